/*
 * md_bench.c — chfs-md-bench, a metadata benchmark in the shape of mdtest (files only, one
 * shared directory): every MPI rank works on its own NFILES names DIR/r<rank>.f<i>, phase by
 * phase, each phase timed from a barrier to the slowest rank's end:
 *
 *   create      chfs_create + chfs_close (an empty file; with -w BYTES, chfs_create + chfs_write
 *               of BYTES + chfs_close: the create-write-close rate of small files)
 *   stat        chfs_stat of each file
 *   readdir     rank 0 lists the directory with chfs_readdir (rate: entries/s; the others wait)
 *   open-close  chfs_open(O_RDONLY) + chfs_close
 *   remove      chfs_unlink
 *   stat-miss   chfs_stat of names that do not exist: one RPC whose server work is a failed
 *               lookup, i.e. close to the RPC path's own rate (the bound for the others)
 *
 * Prints ops/s per phase (all ranks together) and appends CSV rows
 * label,np,phase,files,seconds,ops_per_s to -o FILE. Uses only chfs.h and MPI.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chfs.h>

static int rank, nprocs, nfiles = 1000;
static size_t wbytes; /* -w: bytes each create writes */
static char *wbuf;
static const char *dir = "/mdtest", *label = "run", *csv_path;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "chfs-md-bench: rank %d: %s %s: %s\n", rank, what, path ? path : "", strerror(errno));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* MPI waits that sleep instead of spinning: the servers share the cores with the ranks. */
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

static double slowest(double dt)
{
	double max;
	MPI_Request req;
	MPI_Iallreduce(&dt, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req);
	quiet_wait(&req);
	return max;
}

static int count_entry(void *buf, const char *name, const struct stat *st, off_t off)
{
	(void)name, (void)st, (void)off;
	++*(long *)buf;
	return 0;
}

/* The readdir phase: rank 0 lists the shared directory; the number of entries it saw. */
static long list_dir(void)
{
	long n = 0;
	if (rank != 0)
		return 0;
	if (chfs_readdir(dir, &n, count_entry) != 0)
		die("readdir", dir);
	if (n != (long)nfiles * nprocs + 2) {
		errno = EIO;
		die("readdir: wrong number of entries in", dir);
	}
	return n;
}

static void one(int phase, int i)
{
	char p[1024];
	struct stat st;
	snprintf(p, sizeof p, "%s/r%d.f%d", dir, rank, i);
	int fd;
	switch (phase) {
	case 0:
		if ((fd = chfs_create(p, O_WRONLY | O_TRUNC, 0644)) < 0 ||
		    (wbytes && chfs_write(fd, wbuf, wbytes) != (ssize_t)wbytes) || chfs_close(fd) < 0)
			die("create", p);
		break;
	case 1:
		if (chfs_stat(p, &st) != 0)
			die("stat", p);
		break;
	case 2:
		if ((fd = chfs_open(p, O_RDONLY)) < 0 || chfs_close(fd) < 0)
			die("open/close", p);
		break;
	case 3:
		if (chfs_unlink(p) != 0)
			die("unlink", p);
		break;
	default:
		if (chfs_stat(p, &st) == 0 || errno != ENOENT)
			die("stat of a missing name", p);
		break;
	}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
	int opt;
	while ((opt = getopt(argc, argv, "n:d:l:o:w:h")) != -1) {
		switch (opt) {
		case 'n': nfiles = atoi(optarg); break;
		case 'd': dir = optarg; break;
		case 'l': label = optarg; break;
		case 'o': csv_path = optarg; break;
		case 'w': wbytes = (size_t)strtoull(optarg, NULL, 0); break;
		default:
			if (rank == 0)
				fprintf(opt == 'h' ? stdout : stderr,
				        "usage: chfs-md-bench [-n FILES per rank] [-d DIR] [-l LABEL] [-o CSV] [-w BYTES]\n");
			MPI_Finalize();
			return opt == 'h' ? 0 : 2;
		}
	}
	if (nfiles <= 0 || (wbytes && !(wbuf = calloc(1, wbytes))) || chfs_init(NULL) != 0)
		die("chfs_init", NULL);
	if (rank == 0 && chfs_mkdir(dir, 0755) != 0 && errno != EEXIST)
		die("mkdir", dir);
	static const char *names[] = {"create", "stat", "readdir", "open-close", "remove", "stat-miss"};
	if (wbytes)
		names[0] = "create-write";
	FILE *csv = rank == 0 && csv_path ? fopen(csv_path, "a") : NULL;
	for (int phase = 0; phase < 6; phase++) {
		barrier();
		double t0 = MPI_Wtime();
		long ops = (long)nfiles * nprocs;
		if (phase == 2)
			ops = list_dir();
		else
			for (int i = 0; i < nfiles; i++)
				one(phase > 2 ? phase - 1 : phase, i);
		double s = slowest(MPI_Wtime() - t0);
		MPI_Bcast(&ops, 1, MPI_LONG, 0, MPI_COMM_WORLD);
		double rate = (double)ops / s;
		if (rank == 0) {
			printf("%-12s np=%d files=%d  %9.0f ops/s  (%.3f s)\n", names[phase], nprocs,
			       nfiles * nprocs, rate, s);
			if (csv)
				fprintf(csv, "%s,%d,%s,%d,%.6f,%.1f\n", label, nprocs, names[phase],
				        nfiles * nprocs, s, rate);
		}
	}
	if (csv)
		fclose(csv);
	barrier();
	if (rank == 0)
		chfs_rmdir(dir);
	chfs_term();
	free(wbuf);
	MPI_Finalize();
	return 0;
}
