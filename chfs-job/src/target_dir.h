/* target_dir.h — the seccomp supervisor opens a mapped path from its target's directory
 * (target_dir.c). */
#ifndef CHFS_JOB_TARGET_DIR_H
#define CHFS_JOB_TARGET_DIR_H

#include "policy.h"

#include <sys/types.h>

struct cj_target_dirs;

/* One slot per rule of p (which must outlive it); NULL if out of memory. */
struct cj_target_dirs *cj_target_dirs_new(const struct cj_policy *p);
void cj_target_dirs_free(struct cj_target_dirs *t);
/* open(path, flags, mode) for a path rule r mapped (path begins with r->to): the descriptor or -errno. */
int cj_target_open(struct cj_target_dirs *t, const struct cj_rule *r, const char *path, int flags,
                   mode_t mode);

#endif
