/*
 * as_bench.c — the two published experiments of asynchronous system-call processing, on
 * libasyncsys (driver: run-asyncsys-bench; see --help).
 *
 *   as-bench crossover [--reps R] [--max N] [--step S] [--fine F] [--threads T] [--csv FILE]
 *                      [--only CALL/PATH]
 *     N system calls one by one (sync: the caller's own syscall) against one batch (as_submitv
 *     of N requests, as_wakeup, collect all), N = 0..max step S (and 1..F step 1), for gettid on
 *     the execution threads, a 4 KiB pread64 from the page cache on the execution threads, on
 *     io_uring, and on io_uring with SQPOLL. Median of R repetitions, sync and batch alternating.
 *     Prints the crossover N of each series: the smallest N from which the batch is faster at
 *     every larger N measured. A last series, liburing-direct, submits the same preads with
 *     liburing alone (N SQEs, one io_uring_submit_and_wait): the kernel's own cost, without
 *     the library. --only runs one series (e.g. pread4k/uring: to profile it).
 *   as-bench tmpfs [--reps R] [--dir DIR] [--max-threads M] [--csv FILE]
 *     A 10 MB file on tmpfs read as 100 preads of 100 KiB (one batch) by 1..M execution threads,
 *     by io_uring with 1..M io-wq workers (IOSQE_ASYNC), by io_uring inline, and by the caller
 *     alone (a pread loop). Median time of R repetitions per configuration.
 */
#define _GNU_SOURCE
#include "asyncsys.h"
#include <errno.h>
#include <liburing.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "as-bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* One batch: place n requests, start them, collect every result; checks each result. */
static double run_batch(struct as *as, const struct syscall_info *si, unsigned n, long expect)
{
	static unsigned slots[4096];
	static struct as_completion c[4096];
	double t0 = now_ns();
	if (n > 0) {
		int r = as_submitv(as, si, n, slots);
		if (r < 0)
			die("as_submitv", r);
		unsigned got = 0;
		while (got < n) {
			as_wakeup_wait(as, n - got);
			int k = as_reap(as, c, n);
			for (int i = 0; i < k; i++)
				if (expect >= 0 && c[i].ret != expect) {
					fprintf(stderr, "as-bench: request returned %lld, expected %ld\n",
					        (long long)c[i].ret, expect);
					exit(1);
				}
			got += k > 0 ? k : 0;
		}
	}
	return now_ns() - t0;
}

struct series {
	const char *name, *path;
	long num;
	unsigned flags; /* as_init flags; UINT_MAX: liburing directly */
};

/* N preads of fd as one batch through a plain ring (no libasyncsys). */
static double direct_batch(struct io_uring *ring, int fd, char *buf, unsigned n)
{
	double t0 = now_ns();
	for (unsigned i = 0; i < n; i++)
		io_uring_prep_read(io_uring_get_sqe(ring), fd, buf, 4096, 0);
	if (n > 0)
		io_uring_submit_and_wait(ring, n);
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(ring, head, cqe)
	{
		if (cqe->res != 4096)
			die("direct pread", cqe->res);
		seen++;
	}
	io_uring_cq_advance(ring, seen);
	return now_ns() - t0;
}

static char page_buf[4096] __attribute__((aligned(4096)));

static void crossover(int argc, char **argv)
{
	int reps = 200, max = 400, step = 20, fine = 40, threads = 1;
	const char *csv = "crossover.csv", *only = NULL;
	for (int i = 2; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--reps"))
			reps = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--max"))
			max = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--step"))
			step = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--fine"))
			fine = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
			threads = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--csv"))
			csv = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--only"))
			only = argv[++i];
		else
			die(argv[i], EINVAL);
	}
	if (reps < 1 || max < 0 || max > 4000 || step < 1 || fine < 0 || threads < 1)
		die("arguments", EINVAL);
	/* a page-cache file for pread */
	char path[] = "/tmp/as-bench-page-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, page_buf, sizeof(page_buf)) != sizeof(page_buf))
		die("page file", errno);
	unlink(path);
	struct series ser[] = {
	        {"gettid", "threads", SYS_gettid, AS_NO_URING},
	        {"pread4k", "threads", SYS_pread64, AS_NO_URING},
	        {"pread4k", "uring", SYS_pread64, 0},
	        {"pread4k", "uring-sqpoll", SYS_pread64, AS_SQPOLL},
	        {"pread4k", "liburing-direct", SYS_pread64, UINT_MAX},
	};
	FILE *out = fopen(csv, "w");
	if (!out)
		die(csv, errno);
	fprintf(out, "call,path,threads,n,sync_ns,batch_ns,speedup\n");
	printf("%-8s %-15s %5s %12s %12s %8s\n", "call", "path", "N", "sync ns", "batch ns", "sync/batch");
	/* N values: the fine sweep 1..fine, then 0..max by step */
	int ns[8192], nn = 0;
	for (int n = 0; n <= max; n += step)
		ns[nn++] = n;
	for (int n = 1; n <= fine; n++)
		if (n % step)
			ns[nn++] = n;
	for (int a = 1; a < nn; a++)
		for (int b = a; b > 0 && ns[b - 1] > ns[b]; b--) {
			int t = ns[b];
			ns[b] = ns[b - 1];
			ns[b - 1] = t;
		}
	static struct syscall_info si[4096];
	double *ts = calloc(reps, sizeof(double)), *tb = calloc(reps, sizeof(double));
	for (unsigned s = 0; s < sizeof(ser) / sizeof(ser[0]); s++) {
		char name[64];
		snprintf(name, sizeof(name), "%s/%s", ser[s].name, ser[s].path);
		if (only && strcmp(only, name) != 0)
			continue;
		int direct = ser[s].flags == UINT_MAX;
		struct as_params p = {.nthreads = threads, .nreq = 4096, .flags = direct ? 0 : ser[s].flags};
		struct as *as;
		int r = as_init_params(&as, &p);
		if (r < 0)
			die("as_init", r);
		struct io_uring ring;
		if (direct && (r = io_uring_queue_init(4096, &ring, 0)) < 0) {
			printf("%-8s %-13s skipped: no io_uring (%s)\n", ser[s].name, ser[s].path,
			       strerror(-r));
			as_exit(as, NULL, NULL);
			continue;
		}
		int want_uring = !direct && !(ser[s].flags & AS_NO_URING);
		if (want_uring && !(as_features(as) & AS_F_URING)) {
			printf("%-8s %-13s skipped: no io_uring\n", ser[s].name, ser[s].path);
			as_exit(as, NULL, NULL);
			continue;
		}
		if (!direct && (ser[s].flags & AS_SQPOLL) && !(as_features(as) & AS_F_SQPOLL))
			die("SQPOLL not granted", EPERM);
		long expect = ser[s].num == SYS_pread64 ? 4096 : -1;
		for (int i = 0; i < max + fine + 1 && i < 4096; i++) {
			si[i] = (struct syscall_info){.num = ser[s].num};
			if (ser[s].num == SYS_pread64) {
				si[i].arg[0] = fd, si[i].arg[1] = (long)page_buf, si[i].arg[2] = 4096;
			}
		}
		double sync_at[8192], batch_at[8192];
		for (int k = 0; k < nn; k++) {
			int n = ns[k];
			run_batch(as, si, n, expect); /* warm */
			for (int rep = 0; rep < reps; rep++) {
				double t0 = now_ns();
				for (int i = 0; i < n; i++) {
					long x = ser[s].num == SYS_pread64 ? pread(fd, page_buf, 4096, 0)
					                                   : syscall(SYS_gettid);
					if (x < 0)
						die("sync call", errno);
				}
				ts[rep] = now_ns() - t0;
				tb[rep] = direct ? direct_batch(&ring, fd, page_buf, n)
				                 : run_batch(as, si, n, expect);
			}
			sync_at[k] = median(ts, reps);
			batch_at[k] = median(tb, reps);
			fprintf(out, "%s,%s,%d,%d,%.0f,%.0f,%.3f\n", ser[s].name, ser[s].path, threads, n,
			        sync_at[k], batch_at[k], n ? sync_at[k] / batch_at[k] : 0.0);
			if (n % step == 0)
				printf("%-8s %-15s %5d %12.0f %12.0f %8.2f\n", ser[s].name, ser[s].path, n,
				       sync_at[k], batch_at[k], n ? sync_at[k] / batch_at[k] : 0.0);
		}
		/* crossover: smallest N > 0 from which batch < sync at every larger N */
		int cross = -1;
		for (int k = nn - 1; k >= 0 && ns[k] > 0 && batch_at[k] < sync_at[k]; k--)
			cross = ns[k];
		if (cross > 0)
			printf("CROSSOVER %s %s %d\n", ser[s].name, ser[s].path, cross);
		else
			printf("CROSSOVER %s %s none (batch slower up to N=%d)\n", ser[s].name, ser[s].path,
			       max);
		fflush(stdout);
		as_exit(as, NULL, NULL);
		if (direct)
			io_uring_queue_exit(&ring);
	}
	free(ts);
	free(tb);
	fclose(out);
	close(fd);
}

#define NREAD 100
#define RSIZE (100 * 1024)

static void tmpfs(int argc, char **argv)
{
	int reps = 30, maxt = 8;
	const char *dir = "/dev/shm", *csv = "tmpfs.csv";
	for (int i = 2; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--reps"))
			reps = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--dir"))
			dir = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--max-threads"))
			maxt = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--csv"))
			csv = argv[++i];
		else
			die(argv[i], EINVAL);
	}
	if (reps < 1 || maxt < 1 || maxt > 64)
		die("arguments", EINVAL);
	char path[4096];
	snprintf(path, sizeof(path), "%s/as-bench-tmpfs-XXXXXX", dir);
	int fd = mkstemp(path);
	if (fd < 0)
		die(path, errno);
	unlink(path);
	char *data = malloc((size_t)NREAD * RSIZE);
	char *dst =
	        mmap(NULL, (size_t)NREAD * RSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!data || dst == MAP_FAILED)
		die("memory", ENOMEM);
	for (size_t i = 0; i < (size_t)NREAD * RSIZE; i++)
		data[i] = (char)(i * 31 + (i >> 12));
	if (write(fd, data, (size_t)NREAD * RSIZE) != (ssize_t)NREAD * RSIZE)
		die("tmpfs file", errno);
	memset(dst, 1, (size_t)NREAD * RSIZE); /* fault the destination in */
	struct syscall_info si[NREAD];
	for (int i = 0; i < NREAD; i++)
		si[i] = (struct syscall_info){
		        .num = SYS_pread64,
		        .arg = {fd, (long)(dst + (size_t)i * RSIZE), RSIZE, (long)i * RSIZE}};
	FILE *out = fopen(csv, "w");
	if (!out)
		die(csv, errno);
	fprintf(out, "config,workers,median_us,min_us,speedup_vs_1\n");
	printf("%-22s %7s %10s %10s %10s\n", "config", "workers", "median us", "min us", "vs 1");
	double *t = calloc(reps, sizeof(double));
	/* caller alone */
	for (int rep = 0; rep < reps; rep++) {
		double t0 = now_ns();
		for (int i = 0; i < NREAD; i++)
			if (pread(fd, dst + (size_t)i * RSIZE, RSIZE, (off_t)i * RSIZE) != RSIZE)
				die("pread", errno);
		t[rep] = now_ns() - t0;
	}
	double m = median(t, reps);
	fprintf(out, "sync-loop,1,%.1f,%.1f,1.000\n", m / 1e3, t[0] / 1e3);
	printf("%-22s %7d %10.1f %10.1f %10s\n", "sync-loop", 1, m / 1e3, t[0] / 1e3, "-");
	struct {
		const char *name;
		unsigned flags;
		int sweep;
	} cfg[] = {
	        {"exec-threads", AS_NO_URING, 1}, {"uring-iowq", AS_URING_ASYNC, 1}, {"uring-inline", 0, 0}};
	for (unsigned c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		double base = 0;
		for (int w = 1; w <= (cfg[c].sweep ? maxt : 1); w++) {
			struct as_params p = {.nreq = NREAD, .flags = cfg[c].flags};
			p.nthreads = cfg[c].flags & AS_NO_URING ? w : 1;
			p.iowq_workers = cfg[c].flags & AS_URING_ASYNC ? w : 0;
			struct as *as;
			int r = as_init_params(&as, &p);
			if (r < 0)
				die("as_init", r);
			if (!(cfg[c].flags & AS_NO_URING) && !(as_features(as) & AS_F_URING)) {
				printf("%-22s skipped: no io_uring\n", cfg[c].name);
				as_exit(as, NULL, NULL);
				break;
			}
			run_batch(as, si, NREAD, RSIZE); /* warm: threads and io-wq workers exist */
			for (int rep = 0; rep < reps; rep++)
				t[rep] = run_batch(as, si, NREAD, RSIZE);
			m = median(t, reps);
			if (w == 1)
				base = m;
			fprintf(out, "%s,%d,%.1f,%.1f,%.3f\n", cfg[c].name, w, m / 1e3, t[0] / 1e3, base / m);
			printf("%-22s %7d %10.1f %10.1f %10.2f\n", cfg[c].name, w, m / 1e3, t[0] / 1e3,
			       base / m);
			fflush(stdout);
			as_exit(as, NULL, NULL);
		}
	}
	if (memcmp(dst, data, (size_t)NREAD * RSIZE) != 0)
		die("data read back differs", EIO);
	free(t);
	free(data);
	munmap(dst, (size_t)NREAD * RSIZE);
	fclose(out);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: as-bench crossover [--reps R] [--max N] [--step S] [--fine F] [--threads T] [--csv FILE]\n"
		       "                          [--only CALL/PATH]   (one series, e.g. pread4k/uring)\n"
		       "       as-bench tmpfs [--reps R] [--dir DIR] [--max-threads M] [--csv FILE]\n"
		       "The published experiments of asynchronous system calls on libasyncsys; the driver\n"
		       "run-asyncsys-bench runs both and writes CSV (and PNG). Man page: asyncsys(3).\n");
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "crossover"))
		crossover(argc, argv);
	else if (!strcmp(argv[1], "tmpfs"))
		tmpfs(argc, argv);
	else
		die(argv[1], EINVAL);
	return 0;
}
