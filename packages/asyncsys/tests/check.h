/*
 * check.h — assertion helpers for libasyncsys's unit tests: CHECK(cond) reports file:line and
 * the expression and counts failures; CHECK_EQ also prints both values; main returns
 * check_result(). backend_flags() maps the test's argument ("uring" or "threads") to as_init
 * flags.
 */
#ifndef ASYNCSYS_CHECK_H
#define ASYNCSYS_CHECK_H

#include <errno.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "asyncsys.h"

static int check_failures;
#define CHECK(c)                                                                              \
	do {                                                                                  \
		if (!(c)) {                                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			check_failures++;                                                     \
		}                                                                             \
	} while (0)
#define CHECK_EQ(a, b)                                                                              \
	do {                                                                                        \
		long long a_ = (long long)(a), b_ = (long long)(b);                                 \
		if (a_ != b_) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, \
			        __LINE__, #a, #b, a_, b_);                                          \
			check_failures++;                                                           \
		}                                                                                   \
	} while (0)
static inline int check_result(const char *name)
{
	printf("%s: %s\n", name, check_failures ? "FAILED" : "ok");
	return check_failures ? 1 : 0;
}

/* "uring" (default: io_uring where an opcode exists) or "threads" (execution threads only). */
static inline unsigned backend_flags(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "threads") == 0)
		return AS_NO_URING;
	if (argc > 1 && strcmp(argv[1], "uring") != 0) {
		fprintf(stderr, "usage: %s [uring|threads]\n", argv[0]);
		exit(2);
	}
	return 0;
}

/*
 * `ci/test --no-io-uring` runs the suites under ci/no-io-uring (io_uring refused with EPERM, as
 * kernel.io_uring_disabled=2 does) and says so with CHFS_TEST_NO_IO_URING=1: then the "uring"
 * backend must have fallen back to the execution threads. The variable is believed only when
 * io_uring_setup really is refused here.
 */
static inline int expect_no_uring(void)
{
	const char *e = getenv("CHFS_TEST_NO_IO_URING");
	if (!e || strcmp(e, "1") != 0)
		return 0;
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	long fd = syscall(__NR_io_uring_setup, 1, &p);
	if (fd >= 0 || errno != EPERM) {
		fprintf(stderr,
		        "CHFS_TEST_NO_IO_URING=1 but io_uring_setup gives %s: run under ci/no-io-uring\n",
		        fd >= 0 ? "a ring" : strerror(errno));
		if (fd >= 0)
			close((int)fd);
		check_failures++;
		return 0;
	}
	return 1;
}

/* The uring backend must really have a ring (the test is meaningless otherwise), except where
 * io_uring is refused on purpose: then it must have fallen back. */
static inline void check_backend(struct as *as, unsigned flags)
{
	unsigned want = (flags & AS_NO_URING) || expect_no_uring() ? 0 : AS_F_URING;
	if ((as_features(as) & AS_F_URING) != want) {
		fprintf(stderr, "backend: wanted features %#x, have %#x\n", want, as_features(as));
		check_failures++;
	}
}

#endif
