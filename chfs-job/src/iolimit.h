/* iolimit.h — the job's bandwidth limits, shared by every process of the job (every supervisor
 * or tracer of one job id maps the same counter file). */
#ifndef CHFS_JOB_IOLIMIT_H
#define CHFS_JOB_IOLIMIT_H

#include "policy.h"

#include <stdint.h>

struct cj_iolimit;

/* Map (creating if first) the job's counter file for p's limits. The job id is CHFS_JOB_ID,
 * else SLURM_JOB_ID, else a fresh one; it is exported as CHFS_JOB_ID to the job so nested
 * chfs-job calls share it (separate chfs-job calls, e.g. MPI ranks, share limits only through
 * CHFS_JOB_ID or SLURM_JOB_ID). NULL with err filled on failure. */
struct cj_iolimit *cj_iolimit_open(const struct cj_policy *p, char *err, size_t errlen);
/* Count a transfer of bytes of class cls about to happen (its requested size: the caller is held
 * before it runs); returns how long (ns) to hold it (0 if within the limit or the class is
 * unlimited). *at (if not NULL) receives the time it is recorded at, for cj_iolimit_refund. */
int64_t cj_iolimit_account(struct cj_iolimit *l, int cls, uint64_t bytes, int64_t *at);
/* The same at a given time (CLOCK_MONOTONIC ns; for tests that run the formula on a virtual clock). */
int64_t cj_iolimit_account_at(struct cj_iolimit *l, int cls, uint64_t bytes, int64_t now, int64_t *at);
/* The transfer recorded at `at` moved bytes fewer than it asked (a short read, an error): take
 * them out of the history, unless it has left it already. */
void cj_iolimit_refund(struct cj_iolimit *l, int cls, uint64_t bytes, int64_t at);
bool cj_iolimit_limited(const struct cj_iolimit *l, int cls);
void cj_iolimit_close(struct cj_iolimit *l);
int64_t cj_now_ns(void);

#endif
