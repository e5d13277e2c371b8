/*
 * exec_threads.c — the execution threads: each takes placed requests from the execution queue
 * (HASCALL -> EXECUTING), runs them with syscall(2) and publishes the result (COMPLETED). With
 * nothing queued a thread sleeps on a futex until as_wakeup() bumps work_seq; it never spins.
 */
#include "internal.h"
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BATCH 16 /* most requests taken per lock acquisition */

int64_t as_raw_syscall(const struct syscall_info *si)
{
	const int64_t *a = si->arg;
	long r = syscall(si->num, a[0], a[1], a[2], a[3], a[4], a[5]);
	return r == -1 ? -(int64_t)errno : r;
}

static void *exec_main(void *arg)
{
	struct as *as = arg;
	unsigned got[BATCH];
	for (;;) {
		uint32_t seq = atomic_load(&as->work_seq);
		unsigned n = 0;
		pthread_mutex_lock(&as->q_lock);
		/* A share small enough that the threads finish together (at most BATCH). */
		unsigned share = as->exec_q.rel / (4 * as->nthreads);
		share = share < 1 ? 1 : share > BATCH ? BATCH : share;
		while (n < share && as->exec_q.rel > 0 && slotq_pop(&as->exec_q, &got[n]))
			n++;
		pthread_mutex_unlock(&as->q_lock);
		if (n == 0) {
			if (atomic_load(&as->stopping))
				return NULL;
			atomic_fetch_add(&as->nidle, 1);
			as_futex_wait(&as->work_seq, seq);
			atomic_fetch_sub(&as->nidle, 1);
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			if (!as_slot_take(as, got[i]))
				continue; /* cannot happen: a queued slot has one consumer */
			as_slot_complete(as, got[i], as_raw_syscall(&as->area[got[i]]));
		}
		pthread_mutex_lock(&as->q_lock);
		bool dry = as->exec_q.rel == 0;
		pthread_mutex_unlock(&as->q_lock);
		as_signal_event(as, dry);
	}
}

int as_threads_start(struct as *as)
{
	as->threads = calloc(as->nthreads, sizeof(*as->threads));
	if (!as->threads)
		return -ENOMEM;
	/* The threads must not take the caller's signals (a handler could run on them). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int err = 0;
	unsigned i;
	for (i = 0; i < as->nthreads; i++) {
		err = pthread_create(&as->threads[i], NULL, exec_main, as);
		if (err)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		as->nthreads = i;
		as_threads_stop(as);
		return -err;
	}
	return 0;
}

void as_threads_wake(struct as *as, unsigned n)
{
	atomic_fetch_add(&as->work_seq, 1);
	if (n > 0 && atomic_load(&as->nidle) > 0)
		as_futex_wake(&as->work_seq, n > INT_MAX ? INT_MAX : (int)n);
}

void as_threads_stop(struct as *as)
{
	atomic_store(&as->stopping, true);
	as_threads_wake(as, UINT_MAX);
	for (unsigned i = 0; i < as->nthreads; i++)
		pthread_join(as->threads[i], NULL);
	free(as->threads);
	as->threads = NULL;
	as->nthreads = 0;
}
