/* iolimit_test.c — the bandwidth formula on a virtual clock: P processes of one job sharing a
 * limit, each asking for its next transfer as soon as the last one was let through (the size is
 * known before the call and the caller is held: seccomp and ptrace alike). The rate they reach
 * must be the limit — within the one free transfer at the start — for 1, 2 and 4 processes and
 * limits from 1 MB/s to 100 MB/s, also when a few small transfers came long before the stream
 * (a program's start-up reading its libraries: the idle time between is no credit), and a
 * short transfer's refunded bytes must no longer hold anyone back. */
#define _GNU_SOURCE
#include "iolimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

/* Runs `procs` processes for `span` virtual seconds of `n`-byte transfers; returns achieved/limit. */
static double run(struct cj_iolimit *l, int procs, uint64_t limit, uint64_t n, double span, bool startup)
{
	int64_t t0 = 1000000000000LL; /* virtual CLOCK_MONOTONIC: 1,000 s */
	if (startup)                  /* 10 reads of 832 bytes 0.6 s before the stream, then nothing */
		for (int i = 0; i < 10; i++)
			cj_iolimit_account_at(l, CJ_DISK, 832, t0 - 600000000LL + i * 1000, NULL);
	int64_t *next = calloc((size_t)procs, sizeof *next);
	for (int p = 0; p < procs; p++)
		next[p] = t0 + p * 1000; /* they start 1 µs apart */
	int64_t end = t0 + (int64_t)(span * 1e9), last = t0;
	uint64_t moved = 0;
	for (;;) {
		int p = 0; /* the process whose turn comes first */
		for (int i = 1; i < procs; i++)
			if (next[i] < next[p])
				p = i;
		if (next[p] >= end)
			break;
		int64_t now = next[p];
		int64_t done =
		        now + cj_iolimit_account_at(l, CJ_DISK, n, now, NULL); /* runs after the hold */
		moved += n;
		last = done > last ? done : last;
		next[p] = done + 10000; /* 10 µs to move the bytes and come back */
	}
	free(next);
	(void)limit;
	return (double)moved / ((double)(last - t0) / 1e9) / (double)limit;
}

static struct cj_iolimit *open_limit(uint64_t limit)
{
	char err[256];
	struct cj_policy p;
	memset(&p, 0, sizeof p);
	p.limit[CJ_DISK] = limit;
	struct cj_iolimit *l = cj_iolimit_open(&p, err, sizeof err);
	if (!l) {
		fprintf(stderr, "cj_iolimit_open: %s\n", err);
		exit(1);
	}
	return l;
}

/* A 64 KiB read that moved 100 bytes is refunded: the next one goes through at once, where the
 * full 64 KiB at 1 MB/s would have held it 65 ms. */
static void refund(void)
{
	struct cj_iolimit *l = open_limit(1000000);
	int64_t t = 1000000000000LL, at = 0;
	cj_iolimit_account_at(l, CJ_DISK, 65536, t, &at);
	cj_iolimit_refund(l, CJ_DISK, 65536 - 100, at);
	int64_t held = cj_iolimit_account_at(l, CJ_DISK, 65536, t + 1000000, NULL);
	printf("after a refunded short read, the next one is held %.3f ms (100 B at 1 MB/s: 0.1 ms less the 1 ms since)\n",
	       (double)held / 1e6);
	if (held != 0) {
		fprintf(stderr, "  held for bytes that never moved\n");
		failures++;
	}
	cj_iolimit_close(l);
}

int main(void)
{
	char id[64];
	snprintf(id, sizeof id, "iolimit-test-%d", (int)getpid());
	setenv("CHFS_JOB_ID", id, 1);
	const uint64_t limits[] = {1000000, 10000000, 100000000};
	for (int li = 0; li < 3; li++)
		for (int procs = 1; procs <= 4; procs *= 2)
			for (int startup = 0; startup < 2; startup++) {
				struct cj_iolimit *l = open_limit(limits[li]);
				double span = li == 0 ? 20.0 : 5.0;
				double r = run(l, procs, limits[li], 65536, span, startup);
				/* one transfer goes free at the start: 65536 B over the span */
				double slack = 0.01 + 65536.0 / ((double)limits[li] * span);
				printf("limit %3llu MB/s, %d process(es)%s: %.4f of the limit\n",
				       (unsigned long long)(limits[li] / 1000000), procs,
				       startup ? ", start-up reads 0.6 s before" : "", r);
				if (r > 1.0 + slack || r < 1.0 - 0.01) {
					fprintf(stderr, "  outside 1 -0.01/+%.4f\n", slack);
					failures++;
				}
				cj_iolimit_close(l);
			}
	refund();
	return failures ? 1 : 0;
}
