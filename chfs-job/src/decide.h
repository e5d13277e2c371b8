/* decide.h — what the policy says about one intercepted system call: allow it unchanged, fail
 * it (a denial), or run it on other paths (a mapping). Shared by the seccomp supervisor and the
 * ptrace tracer; they differ only in how they carry the verdict out. */
#ifndef CHFS_JOB_DECIDE_H
#define CHFS_JOB_DECIDE_H

#include "policy.h"
#include "sysc.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* CJ_V_CHFS: every path argument lies under a chfs: mapping; path[] holds the CHFS paths */
enum cj_verdict { CJ_V_ALLOW, CJ_V_ERROR, CJ_V_MAP, CJ_V_CHFS };

struct cj_decision {
	enum cj_verdict verdict;
	int err;                       /* CJ_V_ERROR: negative errno to return */
	bool mapped[2];                /* CJ_V_MAP: which path arguments change */
	bool chfs[2];                  /* which path arguments name CHFS paths (path[i] is the CHFS path) */
	char path[2][PATH_MAX];        /* absolute path each path argument names (mapped if mapped[i]) */
	const struct cj_rule *rule[2]; /* the rule that mapped path[i] (mapped[i]), else NULL */
	char scratch[3][PATH_MAX];     /* private */
};

/* Add the symlink-resolved form of every denied prefix to p (a denial of /data/secret also
 * covers /mnt/secret if /data is a link to /mnt), so both spellings are caught. */
int cj_decide_prepare(struct cj_policy *p);
/* Decide for system call sc with args, made by pid. d is caller-owned scratch (large: heap). */
void cj_decide(const struct cj_policy *p, const struct cj_sysc *sc, pid_t pid, const uint64_t args[6],
               struct cj_decision *d);

/* Remove from the getdents64 records buf[0..len) of directory dir the names p denies;
 * returns the new length (records are moved down in place). */
size_t cj_filter_dirents(const struct cj_policy *p, const char *dir, void *buf, size_t len);

#endif
