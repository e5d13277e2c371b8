/*
 * slots.c — the state machine of one request slot and the queues of slot numbers.
 * The state word holds the state in its low byte and a reuse counter above it, so a collector
 * that read a slot just before another thread collected and reused it cannot take the new
 * request's result (its compare-and-swap sees a different counter).
 */
#include "internal.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

static int64_t word(int64_t gen, enum as_state st) { return (gen << 8) | st; }

bool as_slot_take(struct as *as, unsigned slot)
{
	struct syscall_info *si = &as->area[slot];
	int64_t w = atomic_load(&si->state);
	if (AS_STATE(w) != AS_HASCALL)
		return false;
	return atomic_compare_exchange_strong(&si->state, &w, word(w >> 8, AS_EXECUTING));
}

void as_slot_complete(struct as *as, unsigned slot, int64_t ret)
{
	struct syscall_info *si = &as->area[slot];
	int64_t w = atomic_load(&si->state);
	__atomic_store_n(&si->ret, ret, __ATOMIC_RELAXED);
	/* ncompleted first: as_wakeup may see the count a moment before the state, never after. */
	atomic_fetch_add(&as->ncompleted, 1);
	atomic_store(&si->state, word(w >> 8, AS_COMPLETED));
	atomic_fetch_or(&as->done_bits[slot / 64], UINT64_C(1) << (slot % 64));
	atomic_fetch_sub(&as->ninflight, 1);
}

int as_slot_collect(struct as *as, unsigned slot, int64_t *ret, int64_t *num, bool free_now)
{
	if (slot >= as->nslots)
		return -EINVAL;
	struct syscall_info *si = &as->area[slot];
	int64_t w = atomic_load(&si->state);
	switch (AS_STATE(w)) {
	case AS_NONE: return -EINVAL;
	case AS_HASCALL:
	case AS_EXECUTING: return 0;
	case AS_COMPLETED: break;
	}
	/* Relaxed atomic reads: a concurrent collector may be reusing the slot (the CAS fails then). */
	int64_t r = __atomic_load_n(&si->ret, __ATOMIC_RELAXED),
	        n = __atomic_load_n(&si->num, __ATOMIC_RELAXED);
	if (!atomic_compare_exchange_strong(&si->state, &w, word((w >> 8) + 1, AS_NONE)))
		return 0; /* another thread collected it first */
	atomic_fetch_sub(&as->ncompleted, 1);
	/* Only the collector that won clears the bit, and before the slot can be reused. */
	atomic_fetch_and(&as->done_bits[slot / 64], ~(UINT64_C(1) << (slot % 64)));
	if (free_now)
		as_slots_free(as, &slot, 1);
	*ret = r;
	if (num)
		*num = n;
	return 1;
}

void as_slots_free(struct as *as, const unsigned *slots, unsigned n)
{
	pthread_mutex_lock(&as->q_lock);
	for (unsigned i = 0; i < n; i++)
		as->free_v[as->nfree++] = slots[i];
	pthread_mutex_unlock(&as->q_lock);
}

void as_signal_event(struct as *as, bool final)
{
	atomic_fetch_add(&as->event_seq, 1);
	/* A thread waiting for a number of completions is woken when that number is reached (not
	 * after every batch: that ping-pong cost more than the calls), or when this signaller runs
	 * dry, which bounds any wake missed because waiters overwrote each other's target. */
	bool wake = atomic_load(&as->nwaiters) > 0 ||
	            (atomic_load(&as->ncount_waiters) > 0 &&
	             (final || atomic_load(&as->ncompleted) >= atomic_load(&as->count_target) ||
	              atomic_load(&as->ninflight) == 0));
	if (wake)
		as_futex_wake(&as->event_seq, INT_MAX);
	if (atomic_load(&as->ring_waiting))
		as_uring_kick(as);
}

int slotq_init(struct slotq *q, unsigned cap)
{
	q->v = calloc(cap, sizeof(*q->v));
	q->head = q->len = q->rel = 0;
	q->cap = cap;
	return q->v ? 0 : -ENOMEM;
}

void slotq_push(struct slotq *q, unsigned v)
{
	q->v[(q->head + q->len) % q->cap] = v;
	q->len++;
}

bool slotq_pop(struct slotq *q, unsigned *v)
{
	if (q->len == 0)
		return false;
	*v = q->v[q->head];
	q->head = (q->head + 1) % q->cap;
	q->len--;
	if (q->rel > 0)
		q->rel--;
	return true;
}
