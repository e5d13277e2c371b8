/*
 * shared_write.c — chfs-hook-shared-bench: IOR's shared-file write phase, through POSIX calls
 * (run it under chfs-run: the hook) or through chfs.h, one fresh process per rank.
 *
 * The sequence is IOR's (hpc/ior, ior.c and aiori-POSIX.c / aiori-CHFS.c), because that
 * sequence is what made the hook slow (issue 18): the chfs.h backend calls chfs_init while it
 * starts; rank 0 alone stats the file and removes it if it is there; barrier; then the timed
 * phase: every rank opens the file (O_CREAT | O_RDWR; chfs_create on chfs.h), writes its
 * segments (segment s of rank r at (s * nranks + r) * block, lseek + write per transfer as
 * IOR's POSIX backend; chfs_pwrite on chfs.h), closes; barrier. Bandwidth is IOR's: all bytes
 * over the time from the first open to the last close. Afterwards (untimed) each rank reads its
 * segments back and checks every byte.
 *
 * Usage: mpiexec -n N chfs-hook-shared-bench posix|chfs PATH BLOCK XFER SEGMENTS
 * Prints on rank 0: "<MiB/s> <max open seconds> <phase seconds>".
 */
#define _GNU_SOURCE
#include <chfs.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rank, nranks, native;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "rank %d: %s %s: %m\n", rank, what, path);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void fill(unsigned char *buf, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)((off + i) * 7 + (uint64_t)rank * 131 + 1);
}

static void remove_if_there(const char *path)
{
	struct stat st;
	if (native ? chfs_stat(path, &st) == 0 : stat(path, &st) == 0) {
		if (native ? chfs_unlink(path) != 0 : unlink(path) != 0)
			die("remove", path);
	}
}

static int open_shared(const char *path)
{
	int fd = native ? chfs_create(path, O_CREAT | O_RDWR, 0664) : open(path, O_CREAT | O_RDWR, 0664);
	if (fd < 0)
		die("open", path);
	return fd;
}

static void write_at(int fd, const void *buf, size_t len, uint64_t off, const char *path)
{
	if (native) {
		if (chfs_pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
			die("chfs_pwrite", path);
		return;
	}
	if (lseek(fd, (off_t)off, SEEK_SET) != (off_t)off || write(fd, buf, len) != (ssize_t)len)
		die("lseek+write", path);
}

static void check_back(int fd, unsigned char *buf, unsigned char *want, uint64_t block, uint64_t xfer,
                       int segs, const char *path)
{
	for (int s = 0; s < segs; s++)
		for (uint64_t t = 0; t < block / xfer; t++) {
			uint64_t off = ((uint64_t)s * nranks + rank) * block + t * xfer;
			ssize_t r = native ? chfs_pread(fd, buf, xfer, (off_t)off)
			                   : pread(fd, buf, xfer, (off_t)off);
			fill(want, xfer, off);
			if (r != (ssize_t)xfer || memcmp(buf, want, xfer) != 0) {
				fprintf(stderr, "rank %d: %s: other bytes at offset %llu\n", rank, path,
				        (unsigned long long)off);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
		}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc != 6 || (strcmp(argv[1], "posix") && strcmp(argv[1], "chfs"))) {
		if (rank == 0)
			fprintf(stderr, "usage: %s posix|chfs PATH BLOCK XFER SEGMENTS\n", argv[0]);
		MPI_Finalize();
		return 2;
	}
	native = strcmp(argv[1], "chfs") == 0;
	const char *path = argv[2];
	uint64_t block = strtoull(argv[3], NULL, 0), xfer = strtoull(argv[4], NULL, 0);
	int segs = atoi(argv[5]);
	if (!xfer || !block || block % xfer || segs <= 0) {
		if (rank == 0)
			fprintf(stderr, "%s: BLOCK must be a non-zero multiple of XFER\n", argv[0]);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	unsigned char *buf = malloc(xfer), *want = malloc(xfer);
	if (!buf || !want)
		die("malloc", "");
	if (native && chfs_init(NULL) != 0) /* aiori-CHFS: in the backend's initialize */
		die("chfs_init", "");
	if (rank == 0)
		remove_if_there(path);
	MPI_Barrier(MPI_COMM_WORLD);

	double t0 = MPI_Wtime();
	int fd = open_shared(path);
	double topen = MPI_Wtime() - t0;
	for (int s = 0; s < segs; s++)
		for (uint64_t t = 0; t < block / xfer; t++) {
			uint64_t off = ((uint64_t)s * nranks + rank) * block + t * xfer;
			fill(buf, xfer, off);
			write_at(fd, buf, xfer, off, path);
		}
	if (native ? chfs_close(fd) != 0 : close(fd) != 0)
		die("close", path);
	double t1 = MPI_Wtime();
	MPI_Barrier(MPI_COMM_WORLD);

	double start, end, open_max;
	MPI_Reduce(&t0, &start, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
	MPI_Reduce(&t1, &end, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&topen, &open_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

	fd = native ? chfs_open(path, O_RDONLY) : open(path, O_RDONLY);
	if (fd < 0)
		die("open for the check", path);
	check_back(fd, buf, want, block, xfer, segs, path);
	native ? chfs_close(fd) : close(fd);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		double bytes = (double)block * segs * nranks;
		printf("%.1f %.4f %.4f\n", bytes / (1 << 20) / (end - start), open_max, end - start);
	}
	if (native)
		chfs_term();
	free(buf);
	free(want);
	MPI_Finalize();
	return 0;
}
