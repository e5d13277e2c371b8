/*
 * test_fallback.c — without io_uring every request runs on the execution threads.
 *   test_fallback          AS_NO_URING and ASYNCSYS_NO_URING=1 force the fallback (no message:
 *                          it was asked for); requests that would use the ring still work.
 *   test_fallback refused  run under ci/no-io-uring (io_uring_setup refused with EPERM by a
 *                          seccomp filter, what kernel.io_uring_disabled=2 does machine-wide;
 *                          the sysctl itself is never touched: others share the machine). Both
 *                          handles fall back, stderr carries exactly one line naming the cause.
 */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Without the launcher's filter this mode has nothing to test: say so and fail. */
static int refused_here(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	long fd = syscall(__NR_io_uring_setup, 1, &p);
	if (fd >= 0)
		close((int)fd);
	return fd < 0 && errno == EPERM;
}

static int refused(void)
{
	if (!refused_here()) {
		fprintf(stderr,
		        "fallback (refused): io_uring_setup is not refused here; run under ci/no-io-uring\n");
		return 1;
	}
	/* stderr into a file, to count the fallback message */
	char log[] = "/tmp/asyncsys-fallback-log-XXXXXX";
	int lfd = mkstemp(log);
	CHECK(lfd >= 0);
	unlink(log);
	int saved = dup(2);
	dup2(lfd, 2);
	struct as *a = NULL, *b = NULL;
	int ra = as_init(&a, 1, 8), rb = as_init(&b, 1, 8);
	dup2(saved, 2);
	close(saved);
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
	CHECK_EQ(lines, 1); /* once per process, not once per handle */
	CHECK(strstr(text, "Operation not permitted") != NULL);
	CHECK(strstr(text, "seccomp filter") != NULL); /* the cause named, not only the errno */
	CHECK(strstr(text, "execution threads only") != NULL);
	fputs(text, stdout);
	return check_result("fallback (refused)");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "refused") == 0)
		return refused();
	if (argc > 1) {
		fprintf(stderr, "usage: %s [refused]\n", argv[0]);
		return 2;
	}
	return forced();
}
