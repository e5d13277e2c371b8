/*
 * ior_shaped.c — an MPI client that drives libchfs exactly as IOR's CHFS backend
 * (hpc/ior src/aiori-CHFS.c) does, so the upstream API is tested the way its main user calls it.
 *
 * The call sequence and flag words are IOR's: chfs_init(NULL); per rank chfs_create(path,
 * IOR_WRONLY|IOR_CREAT|IOR_TRUNC, 0664) — IOR's own flag bits, not O_ ones — then chfs_pwrite of
 * every transfer, chfs_fsync, chfs_close; chfs_stat for the aggregate size; chfs_open(path,
 * IOR_RDONLY) and chfs_pread of every transfer (reading the neighbour's data, as IOR -C does),
 * chfs_close; chfs_unlink; chfs_term. In the shared-file layout every rank calls chfs_create on
 * the one file, as IOR does; `stagger` makes that race deterministic (rank 0 creates and writes
 * its first block before the others create), which is what lost data when create truncated.
 *
 * Every byte read is checked against a pattern that encodes the writer's rank and the offset, so
 * zeros (a truncating create) or another rank's bytes are both caught. Prints one line per rank
 * on failure and exits non-zero; rank 0 prints "ok ..." on success.
 *
 * Usage: ior_shaped PATH fpp|shared BLOCK XFER SEGMENTS [stagger]
 */
#include <chfs.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* IOR's open flags (aiori.h), passed through unchanged as aiori-CHFS.c does. */
#define IOR_RDONLY 0x01
#define IOR_WRONLY 0x02
#define IOR_CREAT 0x10
#define IOR_TRUNC 0x20

static int rank, nranks;

static void fail(const char *what, const char *path)
{
	fprintf(stderr, "rank %d: %s %s failed: %m\n", rank, what, path);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The 8-byte word at file offset off written by rank w. */
static uint64_t pattern(int w, uint64_t off)
{
	return ((uint64_t)(w + 1) << 48) ^ (off / 8) ^ 0x5a5a000000000000ull;
}

static void fill(uint64_t *buf, size_t len, int w, uint64_t off)
{
	for (size_t i = 0; i < len / 8; i++)
		buf[i] = pattern(w, off + i * 8);
}

/* Offset of transfer t of segment seg written by rank w (IOR's segmented layout). */
static uint64_t xfer_off(int shared, int w, uint64_t block, uint64_t xfer, int seg, uint64_t t)
{
	uint64_t base = shared ? ((uint64_t)seg * nranks + w) * block : (uint64_t)seg * block;
	return base + t * xfer;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc < 6) {
		if (rank == 0)
			fprintf(stderr, "usage: %s PATH fpp|shared BLOCK XFER SEGMENTS [stagger]\n", argv[0]);
		MPI_Finalize();
		return 2;
	}
	int shared = strcmp(argv[2], "shared") == 0;
	uint64_t block = strtoull(argv[3], NULL, 0), xfer = strtoull(argv[4], NULL, 0);
	int segs = atoi(argv[5]), stagger = argc > 6 && strcmp(argv[6], "stagger") == 0;
	if (!block || !xfer || block % xfer || xfer % 8 || segs <= 0) {
		fprintf(stderr, "rank %d: BLOCK must be a multiple of XFER, XFER of 8\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	char wpath[4096], rpath[4096];
	int reader_of = shared ? rank : (rank + 1) % nranks; /* IOR -C: read the neighbour's file */
	if (shared) {
		snprintf(wpath, sizeof wpath, "%s", argv[1]);
		snprintf(rpath, sizeof rpath, "%s", argv[1]);
	} else {
		snprintf(wpath, sizeof wpath, "%s.%08d", argv[1], rank);
		snprintf(rpath, sizeof rpath, "%s.%08d", argv[1], reader_of);
	}
	uint64_t *buf = malloc(xfer), *want = malloc(xfer);
	if (!buf || !want)
		fail("malloc", "");

	chfs_init(NULL); /* IOR ignores its result; a failure shows at create */
	MPI_Barrier(MPI_COMM_WORLD);

	/* write phase */
	int fd = -1;
	if (!stagger || rank == 0) {
		fd = chfs_create(wpath, IOR_WRONLY | IOR_CREAT | IOR_TRUNC, 0664);
		if (fd < 0)
			fail("chfs_create", wpath);
	}
	for (int seg = 0; seg < segs; seg++) {
		for (uint64_t t = 0; t < block / xfer; t++) {
			if (stagger && seg == 0 && t == 0) {
				/* rank 0's first transfer lands before any other rank creates */
				if (rank == 0) {
					fill(buf, xfer, rank, xfer_off(shared, rank, block, xfer, 0, 0));
					if (chfs_pwrite(fd, buf, xfer,
					                (off_t)xfer_off(shared, rank, block, xfer, 0, 0)) !=
					    (ssize_t)xfer)
						fail("chfs_pwrite", wpath);
				}
				MPI_Barrier(MPI_COMM_WORLD);
				if (rank != 0) {
					fd = chfs_create(wpath, IOR_WRONLY | IOR_CREAT | IOR_TRUNC, 0664);
					if (fd < 0)
						fail("chfs_create", wpath);
				}
				if (rank == 0)
					continue;
			}
			uint64_t off = xfer_off(shared, rank, block, xfer, seg, t);
			fill(buf, xfer, rank, off);
			if (chfs_pwrite(fd, buf, xfer, (off_t)off) != (ssize_t)xfer)
				fail("chfs_pwrite", wpath);
		}
	}
	if (chfs_fsync(fd) < 0)
		fail("chfs_fsync", wpath);
	if (chfs_close(fd) < 0)
		fail("chfs_close", wpath);
	MPI_Barrier(MPI_COMM_WORLD);

	/* aggregate size, as IOR's get_file_size */
	struct stat st;
	uint64_t expect = shared ? (uint64_t)nranks * block * segs : block * segs;
	if (chfs_stat(rpath, &st) < 0)
		fail("chfs_stat", rpath);
	int bad = 0;
	if ((uint64_t)st.st_size != expect) {
		fprintf(stderr, "rank %d: %s has size %lld, expected %llu\n", rank, rpath,
		        (long long)st.st_size, (unsigned long long)expect);
		bad = 1;
	}

	/* read phase, every byte verified */
	fd = chfs_open(rpath, IOR_RDONLY);
	if (fd < 0)
		fail("chfs_open", rpath);
	int w = shared ? rank : reader_of;
	uint64_t zeros = 0, wrong = 0;
	for (int seg = 0; seg < segs; seg++) {
		for (uint64_t t = 0; t < block / xfer; t++) {
			uint64_t off = xfer_off(shared, w, block, xfer, seg, t);
			ssize_t n = chfs_pread(fd, buf, xfer, (off_t)off);
			if (n < 0)
				fail("chfs_pread", rpath);
			if ((uint64_t)n != xfer) {
				fprintf(stderr, "rank %d: short read of %s at %llu: %zd\n", rank, rpath,
				        (unsigned long long)off, n);
				bad = 1;
				continue;
			}
			fill(want, xfer, w, off);
			for (size_t i = 0; i < xfer / 8; i++) {
				if (buf[i] == want[i])
					continue;
				if (buf[i] == 0)
					zeros += 8;
				else
					wrong += 8;
			}
		}
	}
	if (zeros || wrong) {
		fprintf(stderr, "rank %d: %s: %llu bytes read as zeros, %llu wrong\n", rank, rpath,
		        (unsigned long long)zeros, (unsigned long long)wrong);
		bad = 1;
	}
	if (chfs_close(fd) < 0)
		fail("chfs_close", rpath);
	MPI_Barrier(MPI_COMM_WORLD);

	/* remove phase */
	if ((!shared || rank == 0) && chfs_unlink(wpath) < 0)
		fail("chfs_unlink", wpath);
	chfs_term();

	int anybad = 0;
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0 && !anybad)
		printf("ok %s %s ranks=%d bytes=%llu\n", argv[1], shared ? "shared" : "fpp", nranks,
		       (unsigned long long)(expect * (shared ? 1 : nranks)));
	free(buf);
	free(want);
	MPI_Finalize();
	return anybad;
}
