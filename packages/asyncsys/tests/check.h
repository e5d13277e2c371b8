/*
 * check.h — assertion helpers for libasyncsys's unit tests: CHECK(cond) reports file:line and
 * the expression and counts failures; CHECK_EQ also prints both values; main returns
 * check_result(). backend_flags() maps the test's argument ("uring" or "threads") to as_init
 * flags.
 */
#ifndef ASYNCSYS_CHECK_H
#define ASYNCSYS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The uring backend must really have a ring (the test is meaningless otherwise). */
static inline void check_backend(struct as *as, unsigned flags)
{
	unsigned want = (flags & AS_NO_URING) ? 0 : AS_F_URING;
	if ((as_features(as) & AS_F_URING) != want) {
		fprintf(stderr, "backend: wanted features %#x, have %#x\n", want, as_features(as));
		check_failures++;
	}
}

#endif
