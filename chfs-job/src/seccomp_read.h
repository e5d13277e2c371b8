/* seccomp_read.h — the seccomp supervisor reads a limited file for the tracee (seccomp_read.c), so
 * the disk limit counts what a read moved, not what it asked for. */
#ifndef CHFS_JOB_SECCOMP_READ_H
#define CHFS_JOB_SECCOMP_READ_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>

struct cj_sread;

/* What a read carried out for the tracee left behind: the result to answer with, and how to take
 * it back if the answer is refused (the call was withdrawn: a signal, the caller died). */
struct cj_sread_done {
	long res;       /* bytes moved (>= 0) or -errno */
	int fd;         /* our duplicate of the tracee's descriptor (shares its offset); -1 if none */
	int64_t rewind; /* bytes to seek back on that description if the answer is refused */
};

struct cj_sread *cj_sread_new(void);
void cj_sread_free(struct cj_sread *r);
/* Is system call nr one cj_sread_run carries out (read, pread64, readv, preadv, preadv2)? */
bool cj_sread_handles(int nr);
/* The call in req (cj_sread_handles): if its descriptor is a regular file or block device, read
 * it here and write what was read into the tracee's buffers. Returns 1 (carried out: *done holds
 * the result), 0 (not a file: *cls is its class, CJ_NET or -1, and the kernel should run it), or
 * -ENOENT (the call is no longer pending: nothing was done). */
int cj_sread_run(struct cj_sread *r, int listener, const struct seccomp_notif *req, int *cls,
                 struct cj_sread_done *done);
/* The answer has been sent (answered: the kernel took it) or refused (the call was withdrawn):
 * if refused, give back the offset the read took (nothing for a positional read); then close our
 * duplicate. */
void cj_sread_finish(struct cj_sread_done *done, bool answered);

#endif
