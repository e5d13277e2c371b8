/* chfs_serve.h — chfs: mappings served by the seccomp supervisor or the ptrace tracer with
 * libchfs (chfs_serve.c): whole files staged into memfds that the method injects into the tracee, every other path
 * call answered with the matching chfs_* call. Without libchfs in the build the functions are
 * stubs that refuse (and both methods refuse chfs: mappings at start-up). */
#ifndef CHFS_JOB_CHFS_SERVE_H
#define CHFS_JOB_CHFS_SERVE_H

#include "sysc.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Injected descriptors get the lowest free number at or above this one, so the seccomp filter
 * can trap close() of exactly these (the write-back point) and no other. */
#define CJ_CHFS_FD_MIN 900

struct cj_chfs;

#ifdef CJ_HAVE_CHFS
/* Join the pool named by CHFS_SERVER; NULL with a one-line reason in err. */
struct cj_chfs *cj_chfs_start(char *err, size_t len);
/* The local directory where listings are staged (STAGE/path for CHFS path): the caller maps it
 * to chfs:/ so calls relative to a staged directory reach CHFS. */
const char *cj_chfs_stage_root(const struct cj_chfs *c);
/* Write back every staged file changed since its last write-back, remove the staged directory
 * listings, leave the pool. Returns 0, or -EIO if some file could not be written back. */
int cj_chfs_stop(struct cj_chfs *c);
/* open(2) of CHFS path with the tracee's flags and mode (umask applied): a local descriptor
 * for the caller to inject and then close, or -errno. */
int cj_chfs_open(struct cj_chfs *c, const char *path, int flags, mode_t mode);
/* The tracee is closing a descriptor whose open file fd (our duplicate) shows: if it is a
 * staged file opened for writing, write it back now. */
void cj_chfs_closed(struct cj_chfs *c, int fd);
/* Any other call sc (number nr, arguments a) of process pid on CHFS paths path0/path1:
 * its result (>= 0) or -errno; results in memory are written into the tracee. */
long cj_chfs_call(struct cj_chfs *c, const struct cj_sysc *sc, int nr, const uint64_t a[6], const char *path0,
                  const char *path1, pid_t pid, mode_t umask);
#else
#include <errno.h>
#include <stdio.h>
static inline struct cj_chfs *cj_chfs_start(char *err, size_t len)
{
	snprintf(err, len, "chfs-job was built without libchfs: chfs: mappings are not served");
	return NULL;
}
static inline const char *cj_chfs_stage_root(const struct cj_chfs *c) { return (void)c, "/"; }
static inline int cj_chfs_stop(struct cj_chfs *c) { return (void)c, 0; }
static inline int cj_chfs_open(struct cj_chfs *c, const char *p, int f, mode_t m)
{
	return (void)c, (void)p, (void)f, (void)m, -EXDEV;
}
static inline void cj_chfs_closed(struct cj_chfs *c, int fd) { (void)c, (void)fd; }
static inline long cj_chfs_call(struct cj_chfs *c, const struct cj_sysc *sc, int nr, const uint64_t a[6],
                                const char *p0, const char *p1, pid_t pid, mode_t um)
{
	return (void)c, (void)sc, (void)nr, (void)a, (void)p0, (void)p1, (void)pid, (void)um, -EXDEV;
}
#endif

#endif
