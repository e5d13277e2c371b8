/*
 * test_fallback.c — without io_uring every request runs on the execution threads.
 *   test_fallback          AS_NO_URING and ASYNCSYS_NO_URING=1 force the fallback (no message:
 *                          it was asked for); requests that would use the ring still work.
 *   test_fallback sysctl   kernel.io_uring_disabled=2 (root only; exit 77 = skipped otherwise):
 *                          the sysctl is set only around two as_init calls (microseconds) and
 *                          restored at once, also from an atexit handler and on SIGINT/SIGTERM/
 *                          SIGABRT/SIGSEGV, so a failing test leaves the old value. Both handles
 *                          fall back, stderr carries exactly one line naming the sysctl.
 */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SYSCTL "/proc/sys/kernel/io_uring_disabled"

static void run_requests(struct as *as)
{
	char path[] = "/tmp/asyncsys-fallback-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, "hello", 5) == 5);
	unlink(path);
	char buf[8] = {0};
	struct syscall_info si[3] = {
	        {.num = SYS_pread64, .arg = {fd, (long)buf, 5, 0}},
	        {.num = SYS_getppid},
	        {.num = SYS_close, .arg = {1000000}},
	};
	unsigned slots[3];
	CHECK_EQ(as_submitv(as, si, 3, slots), 3);
	long r;
	CHECK(as_wait(as, slots[0], &r) == 0 && r == 5 && memcmp(buf, "hello", 5) == 0);
	CHECK(as_wait(as, slots[1], &r) == 0 && r == getppid());
	CHECK(as_wait(as, slots[2], &r) == 0 && r == -EBADF);
	close(fd);
}

static int forced(void)
{
	struct as_params p = {.nthreads = 1, .nreq = 8, .flags = AS_NO_URING};
	struct as *as;
	CHECK_EQ(as_init_params(&as, &p), 0);
	CHECK_EQ(as_features(as), 0);
	run_requests(as);
	as_exit(as, NULL, NULL);

	setenv("ASYNCSYS_NO_URING", "1", 1);
	CHECK_EQ(as_init(&as, 1, 8), 0);
	CHECK_EQ(as_features(as), 0);
	run_requests(as);
	as_exit(as, NULL, NULL);
	unsetenv("ASYNCSYS_NO_URING");

	CHECK_EQ(as_init(&as, 1, 8), 0); /* and the default uses the ring here */
	if (!(as_features(as) & AS_F_URING))
		printf("note: no io_uring on this machine at all\n");
	as_exit(as, NULL, NULL);
	return check_result("fallback (forced)");
}

static char old_value[16];
static volatile sig_atomic_t changed;

static void restore(void)
{
	if (!changed)
		return;
	int fd = open(SYSCTL, O_WRONLY);
	if (fd >= 0) {
		if (write(fd, old_value, strlen(old_value)) < 0) {
			/* nothing more to try */
		}
		close(fd);
	}
	changed = 0;
}

static void on_signal(int sig)
{
	restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int write_sysctl(const char *v)
{
	int fd = open(SYSCTL, O_WRONLY);
	if (fd < 0)
		return -errno;
	int r = write(fd, v, strlen(v)) == (ssize_t)strlen(v) ? 0 : -errno;
	close(fd);
	return r;
}

static int by_sysctl(void)
{
	int fd = open(SYSCTL, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, old_value, sizeof(old_value) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0 || geteuid() != 0 || access(SYSCTL, W_OK) != 0) {
		printf("fallback (sysctl): skipped (needs root and %s)\n", SYSCTL);
		return 77;
	}
	old_value[n] = 0;
	atexit(restore);
	int sigs[] = {SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGBUS, SIGHUP};
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], on_signal);

	/* stderr into a file, to count the fallback message */
	char log[] = "/tmp/asyncsys-fallback-log-XXXXXX";
	int lfd = mkstemp(log);
	unlink(log);
	int saved = dup(2);
	dup2(lfd, 2);

	struct as *a = NULL, *b = NULL;
	changed = 1;
	int w = write_sysctl("2");
	int ra = as_init(&a, 1, 8), rb = as_init(&b, 1, 8);
	restore(); /* the machine's io_uring is back before anything else happens */

	dup2(saved, 2);
	close(saved);
	CHECK_EQ(w, 0);
	CHECK_EQ(ra, 0);
	CHECK_EQ(rb, 0);
	if (ra == 0 && rb == 0) {
		CHECK_EQ(as_features(a), 0);
		CHECK_EQ(as_features(b), 0);
		run_requests(a);
		run_requests(b);
		as_exit(a, NULL, NULL);
		as_exit(b, NULL, NULL);
	}
	char text[1024] = {0};
	CHECK(pread(lfd, text, sizeof(text) - 1, 0) > 0);
	close(lfd);
	int lines = 0;
	for (char *s = text; *s; s++)
		lines += *s == '\n';
	CHECK_EQ(lines, 1);
	CHECK(strstr(text, "kernel.io_uring_disabled=2") != NULL);
	CHECK(strstr(text, "execution threads only") != NULL);
	fputs(text, stdout);

	fd = open(SYSCTL, O_RDONLY);
	char now[16] = {0};
	CHECK(fd >= 0 && read(fd, now, sizeof(now) - 1) > 0);
	close(fd);
	CHECK(strcmp(now, old_value) == 0);
	return check_result("fallback (sysctl)");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "sysctl") == 0)
		return by_sysctl();
	if (argc > 1) {
		fprintf(stderr, "usage: %s [sysctl]\n", argv[0]);
		return 2;
	}
	return forced();
}
