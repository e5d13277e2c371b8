/*
 * check.h — minimal assertion helpers for the C unit tests: CHECK(cond) reports file:line and
 * the expression, counts failures, and the test's main returns check_result().
 */
#ifndef CHFS_CHECK_H
#define CHFS_CHECK_H

#include <stdio.h>

static int check_failures;
#define CHECK(c)                                                                              \
	do {                                                                                  \
		if (!(c)) {                                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			check_failures++;                                                     \
		}                                                                             \
	} while (0)
#define CHECK_EQ(a, b) CHECK((a) == (b))
static inline int check_result(const char *name)
{
	printf("%s: %s\n", name, check_failures ? "FAILED" : "ok");
	return check_failures ? 1 : 0;
}

#endif
