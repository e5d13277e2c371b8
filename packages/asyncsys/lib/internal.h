/*
 * internal.h — libasyncsys's shared state: the request area, the queues of placed requests
 * (one for the execution threads, one for the ring), the event counter completions bump, and
 * the entry points of the execution-thread and io_uring back ends.
 */
#ifndef ASYNCSYS_INTERNAL_H
#define ASYNCSYS_INTERNAL_H

#include "asyncsys.h"
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define AS_SYSCALL_MAX 1024 /* numbers at or above this are refused with -ENOSYS */

/* A FIFO of slot indices (each slot is queued at most once, so capacity slots suffice); the
 * first rel entries are released to the execution threads (by as_wakeup and friends). */
struct slotq {
	unsigned *v;
	unsigned head, len, cap, rel;
};

struct as {
	struct syscall_info *area;
	unsigned nslots;
	size_t area_bytes;
	unsigned flags;

	pthread_mutex_t q_lock; /* free list and both queues */
	unsigned *free_v;
	unsigned nfree;
	struct slotq exec_q;          /* HASCALL, for the execution threads */
	struct slotq ring_q;          /* HASCALL, waiting for the next ring flush */
	_Atomic unsigned ring_queued; /* ring_q.len, readable without the lock */

	_Atomic unsigned ninflight;      /* HASCALL + EXECUTING */
	_Atomic unsigned ncompleted;     /* COMPLETED, not yet collected */
	_Atomic uint64_t *done_bits;     /* a bit per COMPLETED slot: as_reap reads bits, not the area */
	_Atomic uint32_t event_seq;      /* bumped on completions and ring-lock releases (futex) */
	_Atomic unsigned nwaiters;       /* threads sleeping on event_seq for a slot or for as_exit */
	_Atomic unsigned ncount_waiters; /* ... for a number of completions (as_wakeup_wait) */
	_Atomic unsigned count_target;   /* the number the latest of those waits for */

	/* execution threads */
	pthread_t *threads;
	unsigned nthreads;
	_Atomic uint32_t work_seq; /* bumped by as_wakeup (futex the threads sleep on) */
	_Atomic unsigned nidle;
	_Atomic bool stopping;

	/* io_uring */
	bool uring;
	struct io_uring ring;
	struct io_uring_probe *probe;
	pthread_mutex_t ring_lock;
	_Atomic unsigned ring_inflight; /* requests submitted to the ring, CQE not yet reaped */
	_Atomic bool ring_waiting;      /* a thread sleeps in io_uring_enter for completions */
	int kick_fd;                    /* eventfd polled on the ring: wakes that thread */
	bool kick_armed;
};

/* futex.c */
void as_futex_wait(_Atomic uint32_t *addr, uint32_t val);
void as_futex_wake(_Atomic uint32_t *addr, int n);

/* slots.c: state transitions and completion bookkeeping */
bool as_slot_take(struct as *as, unsigned slot);                  /* HASCALL -> EXECUTING */
void as_slot_complete(struct as *as, unsigned slot, int64_t ret); /* EXECUTING -> COMPLETED */
void as_slots_complete(struct as *as, const unsigned *slots, const int64_t *rets, unsigned n);
/* COMPLETED -> NONE: 1 (result in *ret), 0 (not complete), -EINVAL (no request); the slot is
 * free again. */
int as_slot_collect(struct as *as, unsigned slot, int64_t *ret, int64_t *num);
/* The same for a batch: claim the bits of one done_bits word (those that were still set are
 * this caller's), take each claimed slot's result, count them, then as_slots_free. */
uint64_t as_slots_claim(struct as *as, unsigned word_i, uint64_t bits);
void as_slot_result(struct as *as, unsigned slot, int64_t *ret, int64_t *num);
void as_slots_collected(struct as *as, unsigned n);
void as_slots_free(struct as *as, const unsigned *slots, unsigned n);
/* Completions happened: wakes the waiters that may be satisfied (all of them if final: the
 * signaller has nothing more queued), and the thread sleeping on the ring. */
void as_signal_event(struct as *as, bool final);
int slotq_init(struct slotq *q, unsigned cap);
void slotq_push(struct slotq *q, unsigned v);
bool slotq_pop(struct slotq *q, unsigned *v);

/* exec_threads.c */
int as_threads_start(struct as *as);
void as_threads_wake(struct as *as, unsigned n); /* wakes up to n sleeping threads */
void as_threads_stop(struct as *as);
int64_t as_raw_syscall(const struct syscall_info *si);

/* uring.c */
int as_uring_init(struct as *as, const struct as_params *p); /* 0, or -errno (fall back) */
bool as_uring_accepts(const struct as *as, const struct syscall_info *si);
void as_uring_kick(struct as *as);
/* Flushes queued ring requests (if flush) and, unless done is NULL or true, sleeps until want
 * ring completions (at least 1, at most all in flight) or a kick; then reaps. Caller holds
 * ring_lock. */
void as_uring_pump(struct as *as, bool flush, bool (*done)(struct as *, void *), void *arg, unsigned want);
void as_uring_exit(struct as *as);

/* opmap.c: system call -> SQE */
bool as_opmap_has(const struct syscall_info *si, const struct io_uring_probe *probe);
void as_opmap_prep(struct io_uring_sqe *sqe, const struct syscall_info *si);

#endif
