/*
 * slots.c — the state machine of one request slot and the queues of slot numbers.
 * The state word holds the state in its low byte and a reuse counter above it. A completer
 * publishes the result and the COMPLETED state first, then the slot's bit in done_bits; a
 * collector owns a result by clearing that bit (one atomic and per bit word for a batch), so
 * two collectors never both take it, and one that read a slot just before another collected
 * and reused it sees a different counter.
 */
#include "internal.h"
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>

static int64_t word(int64_t gen, enum as_state st) { return (gen << 8) | st; }

bool as_slot_take(struct as *as, unsigned slot)
{
	/* A queued slot has one consumer (whoever pops it under q_lock) and nothing else writes a
	 * HASCALL state, so a store does what a compare-and-swap did, without its locked cycle. */
	struct syscall_info *si = &as->area[slot];
	int64_t w = atomic_load_explicit(&si->state, memory_order_acquire);
	if (AS_STATE(w) != AS_HASCALL)
		return false;
	atomic_store_explicit(&si->state, word(w >> 8, AS_EXECUTING), memory_order_relaxed);
	return true;
}

void as_slots_complete(struct as *as, const unsigned *slots, const int64_t *rets, unsigned n)
{
	if (n == 0)
		return;
	/* ncompleted first: as_wakeup may see the count a moment before the states, never after;
	 * the counters and the bits move once per batch (one bit word at a time), not per slot. */
	atomic_fetch_add(&as->ncompleted, n);
	uint64_t bits = 0;
	unsigned word_i = slots[0] / 64;
	for (unsigned i = 0; i < n; i++) {
		struct syscall_info *si = &as->area[slots[i]];
		int64_t w = atomic_load_explicit(&si->state, memory_order_relaxed);
		__atomic_store_n(&si->ret, rets[i], __ATOMIC_RELAXED);
		atomic_store_explicit(&si->state, word(w >> 8, AS_COMPLETED), memory_order_release);
		if (slots[i] / 64 != word_i) {
			atomic_fetch_or(&as->done_bits[word_i], bits);
			bits = 0;
			word_i = slots[i] / 64;
		}
		bits |= UINT64_C(1) << (slots[i] % 64);
	}
	atomic_fetch_or(&as->done_bits[word_i], bits);
	atomic_fetch_sub(&as->ninflight, n);
}

void as_slot_complete(struct as *as, unsigned slot, int64_t ret) { as_slots_complete(as, &slot, &ret, 1); }

uint64_t as_slots_claim(struct as *as, unsigned word_i, uint64_t bits)
{
	return atomic_fetch_and(&as->done_bits[word_i], ~bits) & bits;
}

void as_slot_result(struct as *as, unsigned slot, int64_t *ret, int64_t *num)
{
	struct syscall_info *si = &as->area[slot];
	int64_t w = atomic_load_explicit(&si->state, memory_order_relaxed);
	*ret = __atomic_load_n(&si->ret, __ATOMIC_RELAXED);
	if (num)
		*num = __atomic_load_n(&si->num, __ATOMIC_RELAXED);
	atomic_store_explicit(&si->state, word((w >> 8) + 1, AS_NONE), memory_order_release);
}

void as_slots_collected(struct as *as, unsigned n) { atomic_fetch_sub(&as->ncompleted, n); }

int as_slot_collect(struct as *as, unsigned slot, int64_t *ret, int64_t *num)
{
	if (slot >= as->nslots)
		return -EINVAL;
	struct syscall_info *si = &as->area[slot];
	uint64_t bit = UINT64_C(1) << (slot % 64);
	for (;;) {
		int64_t w = atomic_load(&si->state);
		switch (AS_STATE(w)) {
		case AS_NONE: return -EINVAL;
		case AS_HASCALL:
		case AS_EXECUTING: return 0;
		case AS_COMPLETED: break;
		}
		if (as_slots_claim(as, slot / 64, bit)) {
			as_slot_result(as, slot, ret, num);
			as_slots_collected(as, 1);
			as_slots_free(as, &slot, 1);
			return 1;
		}
		/* No bit: another collector took it and is about to say so in the state, or the
		 * completer is about to set it. */
		while (atomic_load(&si->state) == w && !(atomic_load(&as->done_bits[slot / 64]) & bit))
			sched_yield();
		if (atomic_load(&si->state) != w)
			return 0;
	}
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
	unsigned i = q->head + q->len; /* (no %: a division per request was measurable) */
	q->v[i >= q->cap ? i - q->cap : i] = v;
	q->len++;
}

bool slotq_pop(struct slotq *q, unsigned *v)
{
	if (q->len == 0)
		return false;
	*v = q->v[q->head];
	if (++q->head == q->cap)
		q->head = 0;
	q->len--;
	if (q->rel > 0)
		q->rel--;
	return true;
}
