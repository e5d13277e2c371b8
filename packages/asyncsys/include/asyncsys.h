/*
 * asyncsys.h — asynchronous system calls over a shared request area (libasyncsys).
 *
 * A process places system-call requests (struct syscall_info) in a request area instead of
 * trapping for each call. Requests whose number has an io_uring opcode (read, write, pread64,
 * openat, statx, fsync, ...) go to an io_uring (one submit for everything queued, optional
 * SQPOLL); every other request is run by the library's execution threads with syscall(2).
 * Each slot's state goes NONE -> HASCALL (placed) -> EXECUTING (taken) -> COMPLETED (result in
 * ret) -> NONE (result collected). Results are the kernel's: >= 0, or -errno.
 * Every function returns 0 or a count on success and a negative errno on failure.
 * Man page: packages/asyncsys/doc/asyncsys.3.md.
 */
#ifndef ASYNCSYS_H
#define ASYNCSYS_H

#include <stdatomic.h>
#include <stdint.h>

#ifdef __cplusplus
#error "asyncsys.h is a C11 header (it uses _Atomic)"
#endif

/* Slot states (the low byte of syscall_info.state; the upper bits count reuses of the slot). */
enum as_state { AS_NONE = 0, AS_HASCALL = 1, AS_EXECUTING = 2, AS_COMPLETED = 3 };
#define AS_STATE(word) ((enum as_state)((word)&0xff))

/* One request: 72 bytes; the area is an array of them in whole pages. */
struct syscall_info {
	_Atomic int64_t state; /* AS_STATE(state) and a reuse counter */
	int64_t num;           /* system call number (SYS_xxx) */
	int64_t arg[6];
	int64_t ret; /* result: >= 0, or -errno; valid in COMPLETED */
};
_Static_assert(sizeof(struct syscall_info) == 72, "syscall_info must be 72 bytes");

/* as_init_params flags */
#define AS_NO_URING 0x1    /* execution threads only (also: environment ASYNCSYS_NO_URING=1) */
#define AS_SQPOLL 0x2      /* io_uring with a kernel submission thread (IORING_SETUP_SQPOLL) */
#define AS_URING_ASYNC 0x4 /* send every ring request to io-wq workers (IOSQE_ASYNC) */

struct as_params {
	unsigned nthreads;       /* execution threads (>= 1) */
	unsigned nreq;           /* requests the area must hold; rounded up to whole pages */
	unsigned flags;          /* AS_NO_URING | AS_SQPOLL | AS_URING_ASYNC */
	unsigned iowq_workers;   /* 0 = kernel default; else max io-wq workers of the ring */
	unsigned sqpoll_idle_ms; /* SQPOLL thread idle time before it sleeps (0 = 1000) */
};

/* as_features() bits */
#define AS_F_URING 0x1  /* an io_uring is in use */
#define AS_F_SQPOLL 0x2 /* ... with SQPOLL */

struct as;

/* One completion handed to as_reap() or to as_exit()'s callback. */
struct as_completion {
	unsigned slot;
	int64_t num;
	int64_t ret;
};
typedef void (*as_completion_fn)(const struct as_completion *c, void *arg);

/* Creates a request area of at least nreq slots and nthreads execution threads. */
int as_init(struct as **asp, unsigned nthreads, unsigned nreq);
int as_init_params(struct as **asp, const struct as_params *p);
unsigned as_features(const struct as *as);
/* The request area (read-only for callers: use as_submit to place requests). */
const struct syscall_info *as_area(const struct as *as, unsigned *nslots);

/* Places one request; returns its slot (>= 0), -EAGAIN (area full), -ENOSYS (number out of
 * range) or -EINVAL (a call that must not run on another thread: exit, clone, execve, ...).
 * The request is not started before the next as_wakeup(), as_wakeup_wait(), as_wait() or
 * as_exit() (of any thread). */
int as_submit(struct as *as, long num, const long arg[6]);
/* Places n requests (num and arg of each; state and ret ignored) and writes their slots to
 * slots[]. All-or-nothing: -EAGAIN if fewer than n slots are free. */
int as_submitv(struct as *as, const struct syscall_info *reqs, unsigned n, unsigned *slots);
/* Starts everything placed (wakes execution threads, one io_uring submit) and waits until at
 * least one request is COMPLETED; returns the number of COMPLETED, uncollected requests (0 when
 * nothing is in flight). */
int as_wakeup(struct as *as);
/* Starts everything placed (as as_wakeup does) and returns at once, without waiting for any
 * completion: a caller that overlaps its own work with its requests collects them later with
 * as_wait/as_poll/as_reap. */
int as_start(struct as *as);
/* The same, waiting until at least min_complete requests are COMPLETED (or none is in flight). */
int as_wakeup_wait(struct as *as, unsigned min_complete);
/* Collects slot's result if it is COMPLETED: 1 (and *ret), 0 (still running), -EINVAL (slot
 * holds no request). */
int as_poll(struct as *as, unsigned slot, long *ret);
/* Waits until slot is COMPLETED and collects it (starts queued requests first). */
int as_wait(struct as *as, unsigned slot, long *ret);
/* Collects up to max COMPLETED requests without waiting; returns how many. */
int as_reap(struct as *as, struct as_completion *out, unsigned max);
/* Runs every placed request to completion, hands each uncollected completion to fn (if not
 * NULL) exactly once, stops the threads and frees everything. No other call on as may run
 * concurrently. */
int as_exit(struct as *as, as_completion_fn fn, void *arg);

#endif
