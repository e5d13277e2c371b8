/* iolimit_test.c — the bandwidth formula on a virtual clock: P processes of one job sharing a
 * limit, each asking for its next transfer as soon as the last one was let through (seccomp's
 * order: the size is known before the call and the caller is held). The rate they reach must
 * be the limit — within the one free transfer at the start — for 1, 2 and 4 processes and
 * limits from 1 MB/s to 100 MB/s; ptrace's order (size known after the call) must stay exact
 * for one process. */
#define _GNU_SOURCE
#include "iolimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

/* Runs `procs` processes for `span` virtual seconds of `n`-byte transfers; returns achieved/limit. */
static double run(struct cj_iolimit *l, int procs, uint64_t limit, uint64_t n, enum cj_io_when when,
                  double span)
{
	int64_t t0 = 1000000000000LL; /* virtual CLOCK_MONOTONIC: 1,000 s */
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
		int64_t sleep = cj_iolimit_account_at(l, CJ_DISK, n, when, now);
		/* before: the transfer runs after the hold; after: the next one waits */
		int64_t done = now + sleep;
		moved += n;
		last = done > last ? done : last;
		next[p] = done + 10000; /* 10 µs to move the bytes and come back */
	}
	free(next);
	(void)limit;
	return (double)moved / ((double)(last - t0) / 1e9) / (double)limit;
}

int main(void)
{
	char err[256];
	char id[64];
	snprintf(id, sizeof id, "iolimit-test-%d", (int)getpid());
	setenv("CHFS_JOB_ID", id, 1);
	const uint64_t limits[] = {1000000, 10000000, 100000000};
	for (int li = 0; li < 3; li++)
		for (int procs = 1; procs <= 4; procs *= 2)
			for (int w = 0; w < 2; w++) {
				enum cj_io_when when = w ? CJ_IO_AFTER : CJ_IO_BEFORE;
				if (when == CJ_IO_AFTER && procs > 1)
					continue; /* documented: (m+P-1)/m */
				struct cj_policy p;
				memset(&p, 0, sizeof p);
				p.limit[CJ_DISK] = limits[li];
				struct cj_iolimit *l = cj_iolimit_open(&p, err, sizeof err);
				if (!l) {
					fprintf(stderr, "cj_iolimit_open: %s\n", err);
					return 1;
				}
				double span = li == 0 ? 20.0 : 5.0;
				double r = run(l, procs, limits[li], 65536, when, span);
				/* one transfer goes free at the start: 65536 B over the span */
				double slack = 0.01 + 65536.0 / ((double)limits[li] * span);
				printf("limit %3llu MB/s, %d process(es), size known %s: %.4f of the limit\n",
				       (unsigned long long)(limits[li] / 1000000), procs,
				       when == CJ_IO_BEFORE ? "before" : "after", r);
				if (r > 1.0 + slack || r < 1.0 - 0.01) {
					fprintf(stderr, "  outside 1 -0.01/+%.4f\n", slack);
					failures++;
				}
				cj_iolimit_close(l);
			}
	return failures ? 1 : 0;
}
