/*
 * perm_bench.c — chfs-perm-bench: the metadata phases whose cost the permission checks add to,
 * through one given build of libchfs.so.3 (run-perm-bench runs it alternately with the normal
 * library and one built with -DCHFS_BENCH_NO_PERM_CHECKS=ON).
 *
 *   chfs-perm-bench LIB DIR N
 *
 * Loads LIB (dlopen: the same program for both builds), then on N names DIR/f<i>: create
 * (chfs_create + chfs_close), stat, open-close (chfs_open O_RDONLY + chfs_close), remove
 * (chfs_unlink). Prints one line per phase:
 *   phase ops_per_s cpu_us_per_op
 * ops/s is wall-clock; cpu_us_per_op is the process's user + system CPU time per operation
 * (getrusage: the calling thread and libchfs's progress thread), which the permission checks,
 * being client-side work, add to directly, and which other load on a shared machine moves far
 * less than the wall-clock rate. DIR must exist and be writable for the caller (run it as the
 * identity to measure).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

struct lib {
	int (*init)(const char *);
	int (*term)(void);
	int (*create)(const char *, int32_t, mode_t);
	int (*open)(const char *, int32_t);
	int (*close)(int);
	int (*stat)(const char *, struct stat *);
	int (*unlink)(const char *);
};

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "chfs-perm-bench: %s %s: %s\n", what, arg, errno ? strerror(errno) : "failed");
	exit(1);
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p)
		die("dlsym", name);
	return p;
}

static void load(struct lib *l, const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "chfs-perm-bench: cannot load %s: %s\n", path, dlerror());
		exit(1);
	}
	l->init = sym(h, "chfs_init");
	l->term = sym(h, "chfs_term");
	l->create = sym(h, "chfs_create");
	l->open = sym(h, "chfs_open");
	l->close = sym(h, "chfs_close");
	l->stat = sym(h, "chfs_stat");
	l->unlink = sym(h, "chfs_unlink");
	if (l->init(NULL) != 0)
		die("chfs_init of", path);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { P_CREATE, P_STAT, P_OPEN, P_REMOVE, NPHASES };
static const char *phase_name[] = {"create", "stat", "open-close", "remove"};

static double cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* One operation of a phase on DIR/f<i>. */
static void one(const struct lib *l, int phase, const char *dir, long i)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/f%ld", dir, i);
	struct stat st;
	int fd;
	switch (phase) {
	case P_CREATE:
		if ((fd = l->create(path, O_WRONLY, 0644)) < 0 || l->close(fd) != 0)
			die("create", path);
		break;
	case P_STAT:
		if (l->stat(path, &st) != 0)
			die("stat", path);
		break;
	case P_OPEN:
		if ((fd = l->open(path, O_RDONLY)) < 0 || l->close(fd) != 0)
			die("open", path);
		break;
	default:
		if (l->unlink(path) != 0)
			die("unlink", path);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4 || atol(argv[3]) <= 0) {
		fprintf(stderr, "usage: chfs-perm-bench LIB DIR N\n");
		return 2;
	}
	const char *dir = argv[2];
	long n = atol(argv[3]);
	struct lib lib;
	load(&lib, argv[1]);
	for (int p = 0; p < NPHASES; p++) {
		double t0 = now(), c0 = cpu();
		for (long i = 0; i < n; i++)
			one(&lib, p, dir, i);
		double t = now() - t0, c = cpu() - c0;
		printf("%s %.0f %.2f\n", phase_name[p], n / t, c * 1e6 / n);
	}
	lib.term();
	return 0;
}
