/*
 * client_threads.c — chfs-test-client: libchfs driven from threads, for the integration tests
 * (test_client_threads.py) that a one-call-per-run tool like chfs-io cannot express.
 *
 *   smallstack DIR   on a thread with a 64 KiB stack (musl's default is 128 KiB, a sigaltstack
 *                    often less), run every namespace and data call once under DIR: mkdir,
 *                    create, write, read, stat, chmod, utimens, truncate, symlink, readlink,
 *                    readdir, rename, unlink, rmdir. A call that needs more stack than that
 *                    crashes the process (the guard page), which is the failure the test sees.
 *   refresh DIR SECS NTHREADS
 *                    creates DIR/f0..f23, prints "ready" and waits for a line on stdin (the test
 *                    stops a server meanwhile), keeps the files whose stat answers, then lets
 *                    NTHREADS threads stat them for SECS seconds while a monitor records the
 *                    longest time no thread completed a call. Prints "ops N files F gap_ms G".
 *                    With the server-list refresh under the global lock, every thread waited
 *                    for the refresher's RPC timeout on the stopped server.
 *   attrs FILE SECS  for SECS seconds, one thread alternates chmod 0600/0644, one utimens
 *                    (atime k s, mtime k s + 1 ns), one extends FILE by pwrite + fsync (a size
 *                    report), while two threads stat it: every stat must succeed and show
 *                    only values some update wrote (no torn record). Prints "stats N bad B".
 * Server, secret, timeouts: from the environment, as for any libchfs program. Prints "ok" or
 * the numbers and exits 0; names the failing call and errno on stderr otherwise.
 */
#define _GNU_SOURCE
#include "chfs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NFILES 24

static void die(const char *what, const char *path)
{
	fprintf(stderr, "chfs-test-client: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int count_entry(void *buf, const char *name, const struct stat *st, off_t off)
{
	(*(int *)buf)++;
	return 0;
}

/* ---- smallstack ---- */

static void *smallstack_main(void *arg)
{
	const char *dir = arg;
	char a[512], b[512], c[512], buf[4096];
	struct stat sb;
	snprintf(a, sizeof a, "%s/f", dir);
	snprintf(b, sizeof b, "%s/g", dir);
	snprintf(c, sizeof c, "%s/l", dir);
	if (chfs_mkdir(dir, 0755) < 0)
		die("mkdir", dir);
	int fd = chfs_create(a, O_RDWR, 0644);
	if (fd < 0)
		die("create", a);
	memset(buf, 'x', sizeof buf);
	if (chfs_pwrite(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf)
		die("pwrite", a);
	if (chfs_fsync(fd) < 0 || chfs_pread(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf)
		die("fsync/pread", a);
	if (chfs_fstat(fd, &sb) < 0 || sb.st_size != (off_t)sizeof buf)
		die("fstat", a);
	if (chfs_close(fd) < 0)
		die("close", a);
	struct timespec ts[2] = {{1, 0}, {2, 0}};
	if (chfs_stat(a, &sb) < 0 || chfs_chmod(a, 0600) < 0 || chfs_utimens(a, ts) < 0 ||
	    chfs_truncate(a, 100) < 0 || chfs_access(a, R_OK) < 0)
		die("stat/chmod/utimens/truncate/access", a);
	if ((fd = chfs_open(a, O_RDONLY)) < 0 || chfs_read(fd, buf, sizeof buf) != 100 || chfs_close(fd) < 0)
		die("open/read", a);
	if (chfs_symlink("f", c) < 0 || chfs_readlink(c, buf, sizeof buf) != 1 || chfs_lstat(c, &sb) < 0)
		die("symlink/readlink/lstat", c);
	if (chfs_rename(a, b) < 0)
		die("rename", a);
	int n = 0;
	if (chfs_readdir(dir, &n, count_entry) < 0 || n != 4) /* . .. g l */
		die("readdir", dir);
	n = 0;
	for (int i = 0; i < chfs_size(); i++)
		if (chfs_readdir_index(dir, i, &n, count_entry) < 0)
			die("readdir_index", dir);
	if (chfs_unlink(b) < 0 || chfs_unlink(c) < 0 || chfs_rmdir(dir) < 0)
		die("unlink/rmdir", dir);
	chfs_sync();
	return NULL;
}

static int run_smallstack(const char *dir)
{
	pthread_attr_t at;
	pthread_t t;
	pthread_attr_init(&at);
	if (pthread_attr_setstacksize(&at, 64 * 1024) != 0 ||
	    pthread_create(&t, &at, smallstack_main, (void *)dir) != 0)
		die("pthread_create", "64 KiB stack");
	pthread_join(t, NULL);
	puts("ok");
	return 0;
}

/* ---- refresh ---- */

static char files[NFILES][512];
static int nlive;
static atomic_int stop;
static atomic_long ops;
static _Atomic int64_t last_done;
static atomic_long nstats, nbad;

static void *stat_loop(void *arg)
{
	unsigned k = (unsigned)(uintptr_t)arg;
	while (!atomic_load(&stop)) {
		struct stat sb;
		if (chfs_stat(files[k++ % (unsigned)nlive], &sb) == 0) {
			atomic_fetch_add(&ops, 1);
			atomic_store(&last_done, now_ms());
		}
	}
	return NULL;
}

static void *probe(void *arg)
{
	struct stat sb;
	return chfs_stat(arg, &sb) == 0 ? arg : NULL;
}

static int run_refresh(const char *dir, int secs, int nthreads)
{
	pthread_t t[NFILES + 64];
	void *live[NFILES];
	if (nthreads < 1 || nthreads > 64)
		nthreads = 4;
	if (chfs_mkdir(dir, 0755) < 0 && errno != EEXIST)
		die("mkdir", dir);
	for (int i = 0; i < NFILES; i++) {
		snprintf(files[i], sizeof files[i], "%s/f%d", dir, i);
		int fd = chfs_create(files[i], O_WRONLY, 0644);
		if (fd < 0 || chfs_close(fd) < 0)
			die("create", files[i]);
	}
	printf("ready\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		die("read", "stdin");
	/* Probe all at once: the stopped server's files cost one RPC timeout, in parallel. */
	for (int i = 0; i < NFILES; i++)
		pthread_create(&t[i], NULL, probe, files[i]);
	for (int i = 0; i < NFILES; i++)
		pthread_join(t[i], &live[i]);
	for (int i = 0; i < NFILES; i++)
		if (live[i])
			memmove(files[nlive++], live[i], strlen(live[i]) + 1);
	if (nlive == 0)
		die("no file answers in", dir);
	atomic_store(&last_done, now_ms());
	int64_t end = now_ms() + (int64_t)secs * 1000, gap = 0;
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, stat_loop, (void *)(uintptr_t)i);
	while (now_ms() < end) {
		usleep(5000);
		int64_t g = now_ms() - atomic_load(&last_done);
		if (g > gap)
			gap = g;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	printf("ops %ld files %d gap_ms %lld\n", atomic_load(&ops), nlive, (long long)gap);
	return 0;
}

/* ---- attrs ---- */

static const char *attr_file;
static _Atomic long long size_max;
static time_t attr_t0;

static void attr_fail(const char *what)
{
	if (atomic_fetch_add(&nbad, 1) < 5)
		fprintf(stderr, "%s %s: %s\n", what, attr_file, strerror(errno));
}

static void *attr_chmod(void *arg)
{
	for (int k = 0; !atomic_load(&stop); k++)
		if (chfs_chmod(attr_file, k & 1 ? 0600 : 0644) < 0)
			attr_fail("chmod");
	return NULL;
}

static void *attr_utimens(void *arg)
{
	for (long k = 1; !atomic_load(&stop); k++) {
		struct timespec ts[2] = {{k, 0}, {k, 1}};
		if (chfs_utimens(attr_file, ts) < 0)
			attr_fail("utimens");
	}
	return NULL;
}

static void *attr_grow(void *arg)
{
	int fd = chfs_open(attr_file, O_WRONLY);
	for (long long k = 1; fd >= 0 && !atomic_load(&stop); k++) {
		atomic_store(&size_max, k * 10 + 1);
		if (chfs_pwrite(fd, "x", 1, k * 10) != 1 || chfs_fsync(fd) < 0)
			attr_fail("pwrite/fsync");
	}
	if (fd < 0 || chfs_close(fd) < 0)
		attr_fail("open/close");
	return NULL;
}

static void *attr_stat(void *arg)
{
	long long last = 0;
	while (!atomic_load(&stop)) {
		struct stat sb;
		int rc = chfs_stat(attr_file, &sb);
		long long max = atomic_load(&size_max);
		int ok = rc == 0 && S_ISREG(sb.st_mode) &&
		         ((sb.st_mode & 0777) == 0600 || (sb.st_mode & 0777) == 0644) &&
		         ((sb.st_mtim.tv_sec == sb.st_atim.tv_sec && sb.st_mtim.tv_nsec == 1) ||
		          (sb.st_mtim.tv_sec >= attr_t0 - 1 && sb.st_mtim.tv_sec <= time(NULL) + 1)) &&
		         sb.st_size >= last && sb.st_size <= max;
		if (rc == 0)
			last = sb.st_size;
		if (!ok && atomic_fetch_add(&nbad, 1) < 5)
			fprintf(stderr,
			        "stat: rc %d mode %o size %lld (max %lld) atime %ld.%09ld mtime %ld.%09ld\n",
			        rc, sb.st_mode, (long long)sb.st_size, max, (long)sb.st_atim.tv_sec,
			        sb.st_atim.tv_nsec, (long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
		atomic_fetch_add(&nstats, 1);
	}
	return NULL;
}

static int run_attrs(const char *path, int secs)
{
	pthread_t t[5];
	void *(*fn[5])(void *) = {attr_chmod, attr_utimens, attr_grow, attr_stat, attr_stat};
	attr_file = path;
	attr_t0 = time(NULL);
	int fd = chfs_create(path, O_WRONLY, 0644);
	if (fd < 0 || chfs_close(fd) < 0)
		die("create", path);
	for (int i = 0; i < 5; i++)
		pthread_create(&t[i], NULL, fn[i], NULL);
	sleep((unsigned)secs);
	atomic_store(&stop, 1);
	for (int i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	printf("stats %ld bad %ld\n", atomic_load(&nstats), atomic_load(&nbad));
	return 0;
}

int main(int argc, char **argv)
{
	if (chfs_init(NULL) < 0)
		die("chfs_init", "");
	int rc = 2;
	if (argc == 3 && strcmp(argv[1], "smallstack") == 0)
		rc = run_smallstack(argv[2]);
	else if (argc == 5 && strcmp(argv[1], "refresh") == 0)
		rc = run_refresh(argv[2], atoi(argv[3]), atoi(argv[4]));
	else if (argc == 4 && strcmp(argv[1], "attrs") == 0)
		rc = run_attrs(argv[2], atoi(argv[3]));
	else
		fprintf(stderr, "usage: chfs-test-client smallstack DIR | refresh DIR SECS NTHREADS | "
		                "attrs FILE SECS\n");
	chfs_term();
	return rc;
}
