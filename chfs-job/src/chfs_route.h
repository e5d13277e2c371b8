/* chfs_route.h — what the seccomp supervisor and the ptrace tracer share to serve chfs:
 * mappings (chfs_route.c): joining the pool and mapping the staging directory, checking that a
 * CHFS path stays inside the policy's own mappings, the flags of an open-family call, and the
 * write-back trigger (close of the reserved range, dup2/dup3). How a staged descriptor reaches
 * the tracee is each method's own business (seccomp: ADDFD; ptrace: the tracee reopens it). */
#ifndef CHFS_JOB_CHFS_ROUTE_H
#define CHFS_JOB_CHFS_ROUTE_H

#include "chfs_serve.h"
#include "decide.h"
#include "policy.h"
#include "sysc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Join the pool (CHFS_SERVER) and add the rule STAGE -> chfs:/ to p; NULL with a one-line
 * reason (starting with method) in err. */
struct cj_chfs *cj_chfs_route_start(struct cj_policy *p, const char *method, char *err, size_t len);
/* Is call nr (arguments a) one the filter traps only because of chfs: mappings — close() of a
 * descriptor >= CJ_CHFS_FD_MIN, dup2/dup3? If so, a staged file it closes in process pid is
 * written back now and true is returned: the call then runs unchanged. */
bool cj_chfs_route_closing(struct cj_chfs *c, pid_t pid, int nr, const uint64_t a[6]);
/* The flags and mode of open-family call nr (open, creat, openat, openat2) of process pid. */
int cj_chfs_route_open_args(pid_t pid, int nr, const uint64_t a[6], int *flags, int *mode);
/* Open-family call nr of pid, decided CJ_V_CHFS in d: a local descriptor of the staged file or
 * directory for the caller to hand to the tracee (and then close), or -errno; *flags gets the
 * tracee's open flags. */
int cj_chfs_route_open(struct cj_chfs *c, const struct cj_policy *p, const struct cj_decision *d, pid_t pid,
                       int nr, const uint64_t a[6], int *flags);
/* Any other call decided CJ_V_CHFS: its result (>= 0, results in memory written into the
 * tracee) or -errno. */
long cj_chfs_route_call(struct cj_chfs *c, const struct cj_policy *p, const struct cj_decision *d,
                        const struct cj_sysc *sc, pid_t pid, int nr, const uint64_t a[6]);

#endif
