/*
 * chfs_mpi_bench.c — the CHFS core benchmark (MPI): bandwidth and metadata rates of one backend.
 *
 * Workloads, each timed from a barrier to the last rank's finish (MPI_MAX of end times):
 *   fpp-write / fpp-read        every rank its own file of BLOCK bytes, in transfers of XFER
 *   shared-write / shared-read  one file; rank r owns bytes [r*BLOCK, (r+1)*BLOCK)
 *   create / stat / unlink      NFILES empty files per rank in a directory of its own
 * Each transfer carries its file offset in its first 8 bytes; reads check it, so misplaced data
 * fails the run instead of producing a figure. Rank 0 prints one line per result and appends
 * CSV rows "label,backend,workload,xfer,nprocs,value,unit" to -o FILE.
 * The backend is CHFS through chfs.h (-a chfs, pool from CHFS_SERVER) or POSIX I/O into a
 * directory (-a posix -d DIR) as the machine's limit. No fsync on either side: both measure
 * data reaching the (server's) page cache.
 */
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_backend.h"

static int rank, nprocs;
static const struct bench_backend *be;
static const char *label = "run", *csv_path;
static size_t block = 64 << 20;
static size_t xfers[8] = {64 << 10, 1 << 20};
static int nxfers = 2, nfiles = 500;
static char *buf;

static void die(const char *what)
{
	fprintf(stderr, "chfs-mpi-bench rank %d: %s: %s\n", rank, what, strerror(errno));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'k':
	case 'K':
		v *= 1024;
		end++;
		break;
	case 'm':
	case 'M':
		v *= 1048576;
		end++;
		break;
	case 'g':
	case 'G':
		v *= 1073741824.0;
		end++;
		break;
	}
	if (*end || v <= 0) {
		fprintf(stderr, "chfs-mpi-bench: bad size '%s'\n", s);
		exit(2);
	}
	return (size_t)v;
}

static void report(const char *workload, size_t xfer, double value, const char *unit)
{
	if (rank != 0)
		return;
	printf("%-8s %-6s %-13s xfer %8zu  %12.1f %s\n", label, be->name, workload, xfer, value, unit);
	fflush(stdout);
	if (csv_path) {
		FILE *f = fopen(csv_path, "a");
		if (!f)
			die(csv_path);
		fprintf(f, "%s,%s,%s,%zu,%d,%.3f,%s\n", label, be->name, workload, xfer, nprocs, value, unit);
		fclose(f);
	}
}

/* Wait for a nonblocking collective without spinning: a rank that finished early must not take
 * a core from the CHFS servers or the other ranks (2-core hosts; MPICH busy-polls). */
static void quiet_wait(MPI_Request *req)
{
	int done = 0;
	struct timespec ts = {0, 200000};
	for (;;) {
		MPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (done)
			return;
		nanosleep(&ts, NULL);
	}
}

static void barrier(void)
{
	MPI_Request req;
	MPI_Ibarrier(MPI_COMM_WORLD, &req);
	quiet_wait(&req);
}

/* Seconds from a common start to the slowest rank's end. */
static double timed_end(double t0)
{
	double dt = MPI_Wtime() - t0, max;
	MPI_Request req;
	MPI_Iallreduce(&dt, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req);
	quiet_wait(&req);
	return max;
}

static void io_phase(const char *path, int create, int writing, off_t base, size_t xfer)
{
	int fd = create ? be->create(path) : writing ? be->open_wr(path) : be->open_rd(path);
	if (fd < 0)
		die(path);
	for (size_t done = 0; done < block; done += xfer) {
		uint64_t off = (uint64_t)base + done;
		ssize_t n;
		if (writing) {
			memcpy(buf, &off, sizeof off);
			n = be->pwrite(fd, buf, xfer, (off_t)off);
		} else {
			n = be->pread(fd, buf, xfer, (off_t)off);
			uint64_t got;
			memcpy(&got, buf, sizeof got);
			if (n == (ssize_t)xfer && got != off) {
				fprintf(stderr,
				        "chfs-mpi-bench: %s offset %" PRIu64 " holds data of %" PRIu64 "\n",
				        path, off, got);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
		}
		if (n != (ssize_t)xfer) {
			if (n >= 0)
				errno = EIO;
			die(writing ? "write" : "read");
		}
	}
	if (be->close(fd) != 0)
		die("close");
}

static void bandwidth(size_t xfer)
{
	char own[256], shared[256];
	snprintf(own, sizeof own, "fpp.%zu.%d", xfer, rank);
	snprintf(shared, sizeof shared, "shared.%zu", xfer);
	double mib = (double)block * nprocs / 1048576.0;

	barrier();
	double t0 = MPI_Wtime();
	io_phase(own, 1, 1, 0, xfer);
	report("fpp-write", xfer, mib / timed_end(t0), "MiB/s");

	barrier();
	t0 = MPI_Wtime();
	io_phase(own, 0, 0, 0, xfer);
	report("fpp-read", xfer, mib / timed_end(t0), "MiB/s");

	if (rank == 0) {
		int fd = be->create(shared);
		if (fd < 0 || be->close(fd) != 0)
			die(shared);
	}
	barrier();
	t0 = MPI_Wtime();
	io_phase(shared, 0, 1, (off_t)block * rank, xfer);
	report("shared-write", xfer, mib / timed_end(t0), "MiB/s");

	barrier();
	t0 = MPI_Wtime();
	io_phase(shared, 0, 0, (off_t)block * rank, xfer);
	report("shared-read", xfer, mib / timed_end(t0), "MiB/s");

	barrier();
	if (be->unlink(own) != 0 || (rank == 0 && be->unlink(shared) != 0))
		die("unlink data file");
}

static void metadata(void)
{
	char dir[64], path[128];
	snprintf(dir, sizeof dir, "md.%d", rank);
	if (be->mkdir(dir) != 0 && errno != EEXIST)
		die(dir);
	double ops = (double)nfiles * nprocs;
	static const char *names[] = {"create", "stat", "unlink"};
	for (int phase = 0; phase < 3; phase++) {
		barrier();
		double t0 = MPI_Wtime();
		for (int i = 0; i < nfiles; i++) {
			snprintf(path, sizeof path, "%s/f%d", dir, i);
			struct stat st;
			if (phase == 0) {
				int fd = be->create(path);
				if (fd < 0 || be->close(fd) != 0)
					die(path);
			} else if (phase == 1) {
				if (be->stat(path, &st) != 0)
					die(path);
			} else if (be->unlink(path) != 0) {
				die(path);
			}
		}
		report(names[phase], 0, ops / timed_end(t0), "ops/s");
	}
	be->rmdir(dir);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: chfs-mpi-bench -a chfs|posix [-d DIR] [-b BLOCK] [-t XFER[,XFER...]]\n"
	           "                      [-n NFILES] [-l LABEL] [-o CSV]\n"
	           "  -a  backend: chfs (chfs.h, pool from CHFS_SERVER) or posix (plain I/O in -d DIR)\n"
	           "  -d  root: a CHFS directory (chfs, default /chfs-bench) or a local directory\n"
	           "  -b  bytes per rank and file (default 64M; k/M/G suffixes)\n"
	           "  -t  transfer sizes (default 64k,1M)\n"
	           "  -n  files per rank for create/stat/unlink (default 500; 0 = skip)\n"
	           "  -l  label in the output (default run);  -o  append CSV rows to this file\n"
	           "Run it under mpiexec; rank 0 prints one line per figure.\n");
}

int main(int argc, char **argv)
{
	const char *root = NULL, *backend = NULL;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
	int opt;
	while ((opt = getopt(argc, argv, "a:d:b:t:n:l:o:")) != -1) {
		switch (opt) {
		case 'a': backend = optarg; break;
		case 'd': root = optarg; break;
		case 'b': block = parse_size(optarg); break;
		case 't': {
			nxfers = 0;
			char *s = strdup(optarg), *save, *tok;
			for (tok = strtok_r(s, ",", &save); tok && nxfers < 8;
			     tok = strtok_r(NULL, ",", &save))
				xfers[nxfers++] = parse_size(tok);
			free(s);
			break;
		}
		case 'n': nfiles = atoi(optarg); break;
		case 'l': label = optarg; break;
		case 'o': csv_path = optarg; break;
		default:
			if (rank == 0)
				usage(stderr);
			MPI_Finalize();
			return 2;
		}
	}
	if (backend && !strcmp(backend, "chfs")) {
		be = &bench_chfs;
		if (!root)
			root = "/chfs-bench";
	} else if (backend && !strcmp(backend, "posix") && root) {
		be = &bench_posix;
	} else {
		if (rank == 0)
			usage(stderr);
		MPI_Finalize();
		return 2;
	}
	size_t maxx = 0;
	for (int i = 0; i < nxfers; i++) {
		if (block % xfers[i]) {
			if (rank == 0)
				fprintf(stderr, "chfs-mpi-bench: block %zu is not a multiple of %zu\n", block,
				        xfers[i]);
			MPI_Finalize();
			return 2;
		}
		if (xfers[i] > maxx)
			maxx = xfers[i];
	}
	if (be->init(root) != 0)
		die(root);
	buf = aligned_alloc(4096, (maxx + 4095) / 4096 * 4096);
	if (!buf)
		die("buffer");
	for (size_t i = 0; i < maxx; i++)
		buf[i] = (char)(i * 31 + rank);
	for (int i = 0; i < nxfers; i++)
		bandwidth(xfers[i]);
	if (nfiles > 0)
		metadata();
	barrier();
	be->fini();
	free(buf);
	MPI_Finalize();
	return 0;
}
