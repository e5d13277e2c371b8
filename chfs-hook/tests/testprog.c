/*
 * testprog.c — small programs the hook tests run under chfs-run, each exercising one
 * process-level mechanism the hook must survive:
 *   vfork DIR      vfork + execve("/bin/sh -c ...") and vfork + _exit, then write DIR/vfork.txt
 *   threads DIR N  N threads each write and read back DIR/thread-<i> (1 MiB, checked)
 *   forks DIR N    N children (fork) each write DIR/child-<i>; the parent waits, then reads
 *   signals        a SIGALRM handler interrupts syscalls 200 times (rt_sigreturn path)
 *   getpid N       N getpid syscalls; prints ns per call
 *   iovmax FILE    readv/writev on FILE whose total length wraps size_t or exceeds SSIZE_MAX
 *                  must fail with EINVAL (as the kernel does), touching nothing
 *   arenas DIR N   after a file in DIR (a CHFS path: the hook is loaded), N threads each take a
 *                  malloc arena and wait; then one more thread's first act is to open a local
 *                  file. Its malloc arena is the first beyond glibc's eighth, whose creation asks
 *                  get_nprocs(), which opens a /sys file: if the hook's path check allocated its
 *                  per-thread memory with malloc there, that open re-entered it without end
 *                  (rake -m -j3 under the hook died that way)
 * Prints "ok" and exits 0 on success; otherwise names the step and errno on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "testprog: %s %s: %s\n", what, path ? path : "", strerror(errno));
	exit(1);
}

static void write_file(const char *path, const char *buf, size_t n)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0)
		fail("open", path);
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, buf + off, n - off);
		if (w <= 0)
			fail("write", path);
		off += (size_t)w;
	}
	if (close(fd) != 0)
		fail("close", path);
}

static void check_file(const char *path, const char *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("open", path);
	char *got = malloc(n + 1);
	size_t off = 0;
	ssize_t r;
	while ((r = read(fd, got + off, n + 1 - off)) > 0)
		off += (size_t)r;
	if (r < 0)
		fail("read", path);
	if (off != n || memcmp(got, buf, n) != 0) {
		fprintf(stderr, "testprog: %s: content differs (%zu bytes, want %zu)\n", path, off, n);
		exit(1);
	}
	free(got);
	close(fd);
}

static int run_vfork(const char *dir)
{
	for (volatile int i = 0; i < 20; i++) {
		pid_t p = vfork();
		if (p == 0) {
			execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
			_exit(99);
		}
		int st;
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
			fail("vfork+exec", NULL);
		p = vfork();
		if (p == 0)
			_exit(3);
		if (p < 0 || waitpid(p, &st, 0) != p || WEXITSTATUS(st) != 3)
			fail("vfork+_exit", NULL);
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/vfork.txt", dir);
	write_file(path, "after vfork\n", 12);
	check_file(path, "after vfork\n", 12);
	return 0;
}

struct job {
	const char *dir;
	int i;
};

static void *thread_main(void *arg)
{
	struct job *j = arg;
	char path[4096];
	size_t n = 1 << 20;
	char *buf = malloc(n);
	for (size_t k = 0; k < n; k++)
		buf[k] = (char)(k * 7 + (size_t)j->i);
	snprintf(path, sizeof path, "%s/thread-%d", j->dir, j->i);
	for (int round = 0; round < 3; round++) {
		write_file(path, buf, n);
		check_file(path, buf, n);
	}
	free(buf);
	return NULL;
}

static int run_threads(const char *dir, int n)
{
	pthread_t t[64];
	struct job j[64];
	for (int i = 0; i < n && i < 64; i++) {
		j[i] = (struct job){dir, i};
		if ((errno = pthread_create(&t[i], NULL, thread_main, &j[i])) != 0)
			fail("pthread_create", NULL);
	}
	for (int i = 0; i < n && i < 64; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int run_forks(const char *dir, int n)
{
	char path[4096], text[64];
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p < 0)
			fail("fork", NULL);
		if (p == 0) {
			snprintf(path, sizeof path, "%s/child-%d", dir, i);
			int len = snprintf(text, sizeof text, "child %d pid %d\n", i, (int)getpid());
			write_file(path, text, (size_t)len);
			_exit(0);
		}
	}
	int st, bad = 0;
	pid_t p;
	while ((p = wait(&st)) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	if (bad)
		return fprintf(stderr, "testprog: a child failed\n"), 1;
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/child-%d", dir, i);
		if (access(path, R_OK) != 0)
			fail("access", path);
	}
	return 0;
}

static volatile sig_atomic_t ticks;
static void on_alarm(int sig) { ticks++; }

static int run_signals(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 500}, {0, 500}};
	setitimer(ITIMER_REAL, &it, NULL);
	while (ticks < 200)
		getppid();
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	return 0;
}

static int run_getpid(long n)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		syscall(SYS_getpid);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}

/* Lengths far beyond the 16-byte buffer: only the EINVAL check may look at them. */
static int run_iovmax(const char *path)
{
	char buf[16] = "0123456789abcdef";
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return fail("open", path);
	struct iovec wrap[2] = {{buf, SIZE_MAX / 2 + 1}, {buf, SIZE_MAX / 2 + 1}};  /* sum wraps to 0 */
	struct iovec big[2] = {{buf, SSIZE_MAX / 2 + 1}, {buf, SSIZE_MAX / 2 + 1}}; /* > SSIZE_MAX */
	struct iovec *cases[] = {wrap, big};
	for (int i = 0; i < 2; i++) {
		errno = 0;
		if (writev(fd, cases[i], 2) != -1 || errno != EINVAL)
			return fail(i ? "writev > SSIZE_MAX" : "writev wrapping", path);
		errno = 0;
		if (preadv(fd, cases[i], 2, 0) != -1 || errno != EINVAL)
			return fail(i ? "preadv > SSIZE_MAX" : "preadv wrapping", path);
	}
	struct iovec one = {buf, (size_t)SSIZE_MAX + 1};
	errno = 0;
	if (pwritev(fd, &one, 1, 0) != -1 || errno != EINVAL)
		return fail("pwritev single > SSIZE_MAX", path);
	struct stat sb;
	if (fstat(fd, &sb) < 0 || sb.st_size != 0)
		return fail("size after refused writes", path);
	close(fd);
	return 0;
}

static pthread_barrier_t arena_barrier;

static void *take_arena(void *arg)
{
	(void)arg;
	void *volatile p = malloc(100); /* this thread's first malloc: an arena of its own */
	pthread_barrier_wait(&arena_barrier);
	free(p);
	return NULL;
}

static void *open_first(void *arg)
{
	int fd = open((const char *)arg, O_RDONLY); /* no malloc before this in this thread */
	if (fd < 0)
		return (void *)1;
	close(fd);
	return NULL;
}

static int run_arenas(const char *dir, int n)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/arenas", dir);
	write_file(path, "x", 1);
	pthread_t *t = calloc((size_t)n, sizeof *t);
	if (!t || pthread_barrier_init(&arena_barrier, NULL, (unsigned)n + 1) != 0)
		return fail("barrier", NULL);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, take_arena, NULL) != 0)
			return fail("pthread_create", NULL);
	pthread_t last;
	void *res = NULL;
	if (pthread_create(&last, NULL, open_first, (void *)"/proc/self/status") != 0 ||
	    pthread_join(last, &res) != 0 || res != NULL)
		return fail("open in a thread with a new arena", "/proc/self/status");
	pthread_barrier_wait(&arena_barrier);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 2;
	if (argc == 3 && strcmp(argv[1], "vfork") == 0)
		rc = run_vfork(argv[2]);
	else if (argc == 4 && strcmp(argv[1], "threads") == 0)
		rc = run_threads(argv[2], atoi(argv[3]));
	else if (argc == 4 && strcmp(argv[1], "forks") == 0)
		rc = run_forks(argv[2], atoi(argv[3]));
	else if (argc == 2 && strcmp(argv[1], "signals") == 0)
		rc = run_signals();
	else if (argc == 3 && strcmp(argv[1], "getpid") == 0)
		return run_getpid(atol(argv[2]));
	else if (argc == 3 && strcmp(argv[1], "iovmax") == 0)
		rc = run_iovmax(argv[2]);
	else if (argc == 4 && strcmp(argv[1], "arenas") == 0)
		rc = run_arenas(argv[2], atoi(argv[3]));
	else
		fprintf(stderr, "usage: testprog vfork DIR | threads DIR N | forks DIR N | signals | "
		                "getpid N | iovmax FILE | arenas DIR N\n");
	if (rc == 0)
		puts("ok");
	return rc;
}
