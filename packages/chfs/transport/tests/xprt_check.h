/*
 * xprt_check.h — what the transport test programs (xprt_test.c, xprt_local_test.c) share:
 * the CHECK macro and its failure count, a clock, and checked echo and RMA calls to an echo
 * server (echo_server.h).
 */
#ifndef CHFS_XPRT_CHECK_H
#define CHFS_XPRT_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "xprt.h"

extern int failures; /* CHECKs failed so far: the program's exit status */
#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			failures++;                                          \
		}                                                            \
	} while (0)

/* Run fn((void *)i) on n threads (i = 0..n-1, n <= 64) and add up what they return (each
 * thread's failed calls). */
long run_workers(int n, void *(*fn)(void *));
/* Seconds on the monotonic clock. */
double now_s(void);
/* An 'E' call of n pattern bytes to srv (5 s), its reply checked: xprt_call's result. */
int echo_check(xprt_t *cx, xprt_peer_t *srv, size_t n);
/* An 'R' (server-read) or 'W' (server-write) of len pattern(seed) bytes by RMA to srv (60 s),
 * the data checked; prints "<label> RMA server-read|write <len> B: <ms> ms". xprt_call's
 * result. */
int rma_check(xprt_t *cx, xprt_peer_t *srv, const char *label, char op, size_t len, uint32_t seed);

#endif
