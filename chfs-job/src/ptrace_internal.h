/* ptrace_internal.h — what method_ptrace.c (the tracer) and ptrace_chfs.c (its chfs: side) share:
 * the per-tracee state and the two register-level helpers. Private to the ptrace method. */
#ifndef CHFS_JOB_PTRACE_INTERNAL_H
#define CHFS_JOB_PTRACE_INTERNAL_H

#include "chfs_route.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct cj_pt_tracee {
	pid_t pid;          /* 0 = free slot */
	bool set_ret;       /* a skipped call: set its return value ret at the exit stop */
	long ret;           /* ... that value */
	int io_cls;         /* a read/write call under a limit: its class (disk, net), */
	uint64_t io_req;    /* ... the size it asked for (counted at the entry), */
	int64_t io_at;      /* ... and when it was recorded: the exit refunds a short transfer */
	int64_t hold_until; /* io_limit: held at the entry stop until then (CLOCK_MONOTONIC ns) */
	bool dirent;        /* a getdents64 to filter at its exit */
	bool seen;          /* has stopped once (first stop of an auto-attached child) */
	int staged;         /* chfs: our descriptor + 1 the tracee is reopening (closed at exit) */
	bool cloexec;       /* ... and whether the tracee asked for O_CLOEXEC */
	int inject;         /* moving its new descriptor up: 1 = fcntl(F_DUPFD) runs, 2 = close */
	int low, high;      /* the descriptor the open returned, and its number >= CJ_CHFS_FD_MIN */
	int pending_sig;    /* a signal that arrived during the injection, sent again after */
	struct user_regs_struct saved; /* the registers at the open's exit, restored after it */
};

/* Skip the call: number -1 makes the kernel skip it, with ret as its result (set again at the
 * exit stop: in plain mode the kernel writes -ENOSYS in between). */
void cj_pt_skip_call(pid_t pid, struct cj_pt_tracee *s, struct user_regs_struct *r, long ret);
/* Copy str into the tracee's stack below *sp (which starts below the red zone: rsp - 128; the
 * 128 bytes under rsp belong to the interrupted function on x86-64); *sp becomes its address.
 * 0 or -errno. */
int cj_pt_push_str(pid_t pid, uint64_t *sp, const char *str);

/* ptrace_chfs.c. A trapped entry decided CJ_V_CHFS (d): carry it out; true if the exit stop is
 * needed (always). */
bool cj_pt_chfs_entry(struct cj_chfs *c, const struct cj_policy *p, const struct cj_decision *d, pid_t pid,
                      struct cj_pt_tracee *s, const struct cj_sysc *sc, struct user_regs_struct *r,
                      const uint64_t a[6]);
/* The exit of a staged open (s->staged): starts moving the descriptor up (s->inject set). */
void cj_pt_chfs_opened(pid_t pid, struct cj_pt_tracee *s);
/* A stop of a tracee whose injected calls run (s->inject): signal stops are held back, the exit
 * of each call advances; s->inject is 0 again when the open's result is in place. */
void cj_pt_chfs_injected_stop(pid_t pid, struct cj_pt_tracee *s, int sig);

#endif
