/*
 * hook_bench.c — the I/O kernel of the hook benchmark (driven by bench/run-bench).
 *
 *   chfs-hook-bench io --api posix|native --dir DIR --size BYTES --block BYTES --procs N
 *     File-per-process: N forked processes each write DIR/bench-<rank> (BYTES, in BLOCK-sized
 *     writes, then fsync) and read it back; all start each phase together. Prints one line
 *     "write_MiBps read_MiBps" of aggregate bandwidth (slowest process bounds the phase).
 *     --api posix uses open/write/read (run it under chfs-run to go through the hook);
 *     --api native uses chfs.h with DIR taken as a CHFS path.
 *   chfs-hook-bench paired --dir DIR --native-dir CHFSDIR --size BYTES --block BYTES --procs N
 *     Run under chfs-run. Each process writes (then reads) two files block by block,
 *     alternating a block through the hook (DIR/pair-h-<rank>) and a block through chfs.h
 *     (CHFSDIR/pair-n-<rank>), and times each call: both paths see the same moment's load,
 *     which on a shared machine dwarfs the difference being measured. Prints
 *     "native_write hook_write native_read hook_read" in MiB/s, then the median over block
 *     pairs of hook time / native time for writes and for reads (each pair ran back to back,
 *     so a burst of other load rarely hits one side of a pair only; the mean over processes of
 *     their medians), both as native time / hook time (a bandwidth ratio). (libchfs's own syscalls for the native file also pass the
 *     rewritten sites, at ~20 ns each: a bias against native.)
 *   chfs-hook-bench getpid N
 *     ns per getpid syscall (fastest batch of 10000 of N calls: the least disturbed one).
 *   chfs-hook-bench seek PATH N
 *     ns per lseek(SEEK_CUR) on PATH (created if missing), fastest batch as for getpid: on a
 *     CHFS file under chfs-run that is the hook's whole per-call overhead on a descriptor
 *     (filter, XSAVE/XRSTOR, dispatch) plus the one lseek on the placeholder; on a local file
 *     the bare syscall. A hooked read or write is one intercepted call plus two such lseeks.
 *   chfs-hook-bench stat PATH N [unmap]
 *     ns per stat() of PATH (a name outside CHFS), fastest batch as for getpid: under chfs-run,
 *     the filter's glance at the name, including its check that the name is readable
 *     (hook/usermem.c, a per-thread cache of readable pages). With "unmap" every stat follows
 *     an mmap + munmap of one page, which empties that cache: the check's worst case (the
 *     time includes the mmap/munmap pair).
 */
#define _GNU_SOURCE
#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "chfs-hook-bench: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

struct io_opts {
	int native;
	const char *dir;
	long size, block;
	int procs;
};

static double write_phase(const struct io_opts *o, const char *path, char *buf)
{
	double t0 = now();
	int fd = o->native ? chfs_create(path, O_WRONLY | O_TRUNC, 0644)
	                   : open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0)
		die("create", path);
	for (long off = 0; off < o->size; off += o->block) {
		ssize_t w =
		        o->native ? chfs_write(fd, buf, (size_t)o->block) : write(fd, buf, (size_t)o->block);
		if (w != o->block)
			die("write", path);
	}
	if ((o->native ? chfs_fsync(fd) : fsync(fd)) != 0)
		die("fsync", path);
	if ((o->native ? chfs_close(fd) : close(fd)) != 0)
		die("close", path);
	return now() - t0;
}

static double read_phase(const struct io_opts *o, const char *path, char *buf)
{
	double t0 = now();
	int fd = o->native ? chfs_open(path, O_RDONLY) : open(path, O_RDONLY);
	if (fd < 0)
		die("open", path);
	for (long off = 0; off < o->size; off += o->block) {
		ssize_t r =
		        o->native ? chfs_read(fd, buf, (size_t)o->block) : read(fd, buf, (size_t)o->block);
		if (r != o->block)
			die("read", path);
	}
	if ((o->native ? chfs_close(fd) : close(fd)) != 0)
		die("close", path);
	return now() - t0;
}

/* Child: wait for "go" on `go`, run a phase, report its seconds on `done`; twice. */
static void child(const struct io_opts *o, int rank, int go, int done)
{
	char path[4096], c;
	snprintf(path, sizeof path, "%s/bench-%d", o->dir, rank);
	char *buf = aligned_alloc(4096, (size_t)o->block);
	memset(buf, 'a' + rank % 26, (size_t)o->block);
	/* Join the pool before the clock starts: chfs_init for the native API, and for the POSIX
   * API (under the hook) a stat of the directory, which loads the hook and joins the pool. */
	struct stat st;
	if (o->native ? chfs_init(NULL) != 0 : stat(o->dir, &st) != 0)
		die("joining the pool for", o->dir);
	double t[2];
	if (read(go, &c, 1) != 1)
		_exit(1);
	t[0] = write_phase(o, path, buf);
	if (write(done, &t[0], sizeof t[0]) != sizeof t[0] || read(go, &c, 1) != 1)
		_exit(1);
	t[1] = read_phase(o, path, buf);
	if (write(done, &t[1], sizeof t[1]) != sizeof t[1])
		_exit(1);
	if (o->native)
		chfs_unlink(path), chfs_term();
	else
		unlink(path);
	_exit(0);
}

/* ---- paired: hook and native interleaved in one process ---------------------------- */

struct pair_times {
	double t[4];        /* native write, hook write, native read, hook read (seconds) */
	double pair_med[2]; /* median over block pairs of hook / native: write, read */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median over the n block pairs of cost[2i+1] / cost[2i] (hook / native); ratio is scratch. */
static double pair_median(const double *cost, double *ratio, long n)
{
	for (long i = 0; i < n; i++)
		ratio[i] = cost[2 * i + 1] / (cost[2 * i] > 0 ? cost[2 * i] : 1e-9);
	qsort(ratio, (size_t)n, sizeof *ratio, cmp_double);
	return n % 2 ? ratio[n / 2] : (ratio[n / 2 - 1] + ratio[n / 2]) / 2;
}

static void paired_child(const struct io_opts *o, const char *ndir, int rank, int go, int done)
{
	char hp[4096], np[4096], c;
	snprintf(hp, sizeof hp, "%s/pair-h-%d", o->dir, rank);
	snprintf(np, sizeof np, "%s/pair-n-%d", ndir, rank);
	char *buf = aligned_alloc(4096, (size_t)o->block);
	memset(buf, 'a' + rank % 26, (size_t)o->block);
	struct stat st;
	if (chfs_init(NULL) != 0 || stat(o->dir, &st) != 0)
		die("joining the pool for", o->dir);
	struct pair_times pt = {{0, 0, 0, 0}, {0, 0}};
	long npairs = o->size / o->block;
	double *cost = malloc(2 * sizeof(double) * (size_t)npairs),
	       *ratio = malloc(sizeof(double) * (size_t)npairs);
	if (!cost || !ratio)
		die("malloc", "");
	if (read(go, &c, 1) != 1)
		_exit(1);
	double t0 = now();
	int nfd = chfs_create(np, O_WRONLY | O_TRUNC, 0644);
	double t1 = now();
	int hfd = open(hp, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	double t2 = now();
	if (nfd < 0 || hfd < 0)
		die("create", hp);
	pt.t[0] += t1 - t0;
	pt.t[1] += t2 - t1;
	for (long i = 0; i < npairs; i++) {
		for (int k = 0; k < 2; k++) { /* alternate which path goes first */
			int native = (k == 0) == (i % 2 == 0);
			double a = now();
			ssize_t w = native ? chfs_write(nfd, buf, (size_t)o->block)
			                   : write(hfd, buf, (size_t)o->block);
			double d = now() - a;
			pt.t[native ? 0 : 1] += d;
			cost[2 * i + !native] = d;
			if (w != o->block)
				die("write", native ? np : hp);
		}
	}
	t0 = now();
	if (chfs_fsync(nfd) || chfs_close(nfd))
		die("fsync", np);
	t1 = now();
	if (fsync(hfd) || close(hfd))
		die("fsync", hp);
	t2 = now();
	pt.t[0] += t1 - t0;
	pt.t[1] += t2 - t1;
	pt.pair_med[0] = pair_median(cost, ratio, npairs);
	if (write(done, &pt, sizeof pt) != sizeof pt || read(go, &c, 1) != 1)
		_exit(1);
	t0 = now();
	nfd = chfs_open(np, O_RDONLY);
	t1 = now();
	hfd = open(hp, O_RDONLY);
	t2 = now();
	if (nfd < 0 || hfd < 0)
		die("open", hp);
	pt.t[2] = t1 - t0;
	pt.t[3] = t2 - t1;
	for (long i = 0; i < o->size / o->block; i++) {
		for (int k = 0; k < 2; k++) {
			int native = (k == 0) == (i % 2 == 0);
			double a = now();
			ssize_t r = native ? chfs_read(nfd, buf, (size_t)o->block)
			                   : read(hfd, buf, (size_t)o->block);
			double d = now() - a;
			pt.t[native ? 2 : 3] += d;
			cost[2 * i + !native] = d;
			if (r != o->block)
				die("read", native ? np : hp);
		}
	}
	t0 = now();
	chfs_close(nfd);
	t1 = now();
	close(hfd);
	t2 = now();
	pt.t[2] += t1 - t0;
	pt.t[3] += t2 - t1;
	pt.pair_med[1] = pair_median(cost, ratio, npairs);
	if (write(done, &pt, sizeof pt) != sizeof pt)
		_exit(1);
	chfs_unlink(np);
	unlink(hp);
	_exit(0);
}

static int run_paired(const struct io_opts *o, const char *ndir)
{
	int go[2], done[2];
	if (pipe(go) || pipe(done))
		die("pipe", "");
	for (int r = 0; r < o->procs; r++) {
		pid_t p = fork();
		if (p < 0)
			die("fork", "");
		if (p == 0)
			paired_child(o, ndir, r, go[0], done[1]);
	}
	double worst[4] = {0, 0, 0, 0}, pair_med[2] = {0, 0};
	for (int ph = 0; ph < 2; ph++) {
		char c[64] = {0};
		if (write(go[1], c, (size_t)o->procs) != o->procs)
			die("pipe", "");
		for (int r = 0; r < o->procs; r++) {
			struct pair_times pt;
			if (read(done[0], &pt, sizeof pt) != sizeof pt) {
				fprintf(stderr, "chfs-hook-bench: a process failed\n");
				return 1;
			}
			for (int k = 2 * ph; k < 2 * ph + 2; k++)
				if (pt.t[k] > worst[k])
					worst[k] = pt.t[k];
			pair_med[ph] += pt.pair_med[ph] / o->procs;
		}
	}
	int st, bad = 0;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	double mib = (double)o->size * o->procs / (1 << 20);
	/* the pair medians as bandwidth ratios hook / native, like the first four figures */
	printf("%.1f %.1f %.1f %.1f %.4f %.4f\n", mib / worst[0], mib / worst[1], mib / worst[2],
	       mib / worst[3], 1 / pair_med[0], 1 / pair_med[1]);
	return bad;
}

static int run_io(const struct io_opts *o)
{
	int go[2], done[2];
	if (pipe(go) || pipe(done))
		die("pipe", "");
	for (int r = 0; r < o->procs; r++) {
		pid_t p = fork();
		if (p < 0)
			die("fork", "");
		if (p == 0)
			child(o, r, go[0], done[1]);
	}
	double phase[2];
	for (int ph = 0; ph < 2; ph++) {
		char c[64] = {0};
		if (write(go[1], c, (size_t)o->procs) != o->procs)
			die("pipe", "");
		phase[ph] = 0;
		for (int r = 0; r < o->procs; r++) {
			double t;
			if (read(done[0], &t, sizeof t) != sizeof t) {
				fprintf(stderr, "chfs-hook-bench: a process failed\n");
				return 1;
			}
			if (t > phase[ph])
				phase[ph] = t;
		}
	}
	int st, bad = 0;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	double mib = (double)o->size * o->procs / (1 << 20);
	printf("%.1f %.1f\n", mib / phase[0], mib / phase[1]);
	return bad;
}

static long parse_size(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		v <<= 30, end++;
	return (*end || v <= 0) ? -1 : v;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "getpid") == 0) {
		/* batches of 10000 calls; the fastest batch is the one least disturbed by other load */
		long n = atol(argv[2]), batches = n / 10000 > 0 ? n / 10000 : 1;
		double best = 1e30;
		for (long b = 0; b < batches; b++) {
			double t0 = now();
			for (int i = 0; i < 10000; i++)
				syscall(SYS_getpid);
			double t = (now() - t0) * 1e9 / 10000;
			if (t < best)
				best = t;
		}
		printf("%.1f\n", best);
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "seek") == 0) {
		int fd = open(argv[2], O_CREAT | O_RDWR, 0644);
		if (fd < 0)
			die("open", argv[2]);
		long n = atol(argv[3]), batches = n / 10000 > 0 ? n / 10000 : 1;
		double best = 1e30;
		for (long b = 0; b < batches; b++) {
			double t0 = now();
			for (int i = 0; i < 10000; i++)
				if (lseek(fd, 0, SEEK_CUR) != 0)
					die("lseek", argv[2]);
			double t = (now() - t0) * 1e9 / 10000;
			if (t < best)
				best = t;
		}
		close(fd);
		unlink(argv[2]);
		printf("%.1f\n", best);
		return 0;
	}
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "unmap"))) && strcmp(argv[1], "stat") == 0) {
		long n = atol(argv[3]), batches = n / 1000 > 0 ? n / 1000 : 1;
		double best = 1e30;
		struct stat st;
		for (long b = 0; b < batches; b++) {
			double t0 = now();
			for (int i = 0; i < 1000; i++) {
				if (argc == 5) {
					void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1,
					               0);
					if (m == MAP_FAILED || munmap(m, 4096) != 0)
						die("mmap/munmap", "");
				}
				if (stat(argv[2], &st) != 0)
					die("stat", argv[2]);
			}
			double t = (now() - t0) * 1e9 / 1000;
			if (t < best)
				best = t;
		}
		printf("%.1f\n", best);
		return 0;
	}
	int paired = argc >= 2 && strcmp(argv[1], "paired") == 0;
	if (argc >= 2 && (strcmp(argv[1], "io") == 0 || paired)) {
		struct io_opts o = {0, NULL, 0, 0, 1};
		const char *ndir = NULL;
		for (int i = 2; i + 1 < argc; i += 2) {
			if (!strcmp(argv[i], "--native-dir"))
				ndir = argv[i + 1];
			if (!strcmp(argv[i], "--api"))
				o.native = !strcmp(argv[i + 1], "native");
			else if (!strcmp(argv[i], "--dir"))
				o.dir = argv[i + 1];
			else if (!strcmp(argv[i], "--size"))
				o.size = parse_size(argv[i + 1]);
			else if (!strcmp(argv[i], "--block"))
				o.block = parse_size(argv[i + 1]);
			else if (!strcmp(argv[i], "--procs"))
				o.procs = atoi(argv[i + 1]);
		}
		if (o.dir && o.size > 0 && o.block > 0 && o.size % o.block == 0 && o.procs > 0 &&
		    o.procs <= 64 && (!paired || ndir))
			return paired ? run_paired(&o, ndir) : run_io(&o);
	}
	fprintf(stderr, "usage: chfs-hook-bench io --api posix|native --dir DIR --size BYTES "
	                "--block BYTES (divides size) --procs N(<=64)\n"
	                "       chfs-hook-bench paired --dir DIR --native-dir CHFSDIR --size BYTES "
	                "--block BYTES --procs N   (under chfs-run)\n"
	                "       chfs-hook-bench getpid N\n"
	                "       chfs-hook-bench seek PATH N\n"
	                "       chfs-hook-bench stat PATH N [unmap]\n");
	return 2;
}
