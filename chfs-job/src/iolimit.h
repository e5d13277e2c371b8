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
/* Count bytes of class cls; returns how long (ns) the caller must be held back (0 if within the
 * limit or the class is unlimited). CJ_IO_BEFORE: a transfer about to happen (seccomp: its
 * requested size, held before it runs); CJ_IO_AFTER: one that just happened (ptrace: the bytes
 * the call moved), holding back the process's next one. */
enum cj_io_when { CJ_IO_BEFORE, CJ_IO_AFTER };
int64_t cj_iolimit_account(struct cj_iolimit *l, int cls, uint64_t bytes, enum cj_io_when when);
/* The same at a given time (CLOCK_MONOTONIC ns; for tests that run the formula on a virtual clock). */
int64_t cj_iolimit_account_at(struct cj_iolimit *l, int cls, uint64_t bytes, enum cj_io_when when,
                              int64_t now);
bool cj_iolimit_limited(const struct cj_iolimit *l, int cls);
void cj_iolimit_close(struct cj_iolimit *l);
int64_t cj_now_ns(void);

#endif
