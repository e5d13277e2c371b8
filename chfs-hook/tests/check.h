/*
 * check.h — the hook's C unit tests' assertion: CHECK(cond) reports file:line and the
 * expression and counts the failure; main returns failures != 0.
 */
#ifndef CHFS_HOOK_CHECK_H
#define CHFS_HOOK_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                              \
		}                                                                                \
	} while (0)

#endif
