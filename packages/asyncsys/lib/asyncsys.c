/*
 * asyncsys.c — the public interface: as_init, as_submit[v], as_wakeup, as_poll, as_wait,
 * as_reap, as_start, as_exit. Placing a request fills a free slot and queues it for the ring (when its
 * number has an io_uring opcode) or for the execution threads; waiting sleeps on a futex, or in
 * io_uring_enter for the one thread that reaps the ring.
 */
#include "internal.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096u

/* 1 when a seccomp filter is installed in this process ("Seccomp: 2" in /proc/self/status). */
static int under_seccomp_filter(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	int mode = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	if (f)
		fclose(f);
	return mode == 2;
}

/* Says once per process why io_uring is not used: the errno, and the sysctl or a seccomp filter
 * (ci/no-io-uring, a container runtime) when either is what refused it. */
static void log_fallback(int err)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	if (atomic_flag_test_and_set(&said))
		return;
	char cause[48] = "";
	FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
	int v;
	if (f && fscanf(f, "%d", &v) == 1 && v != 0)
		snprintf(cause, sizeof(cause), ", kernel.io_uring_disabled=%d", v);
	else if (err == -EPERM && under_seccomp_filter())
		snprintf(cause, sizeof(cause), ", seccomp filter");
	if (f)
		fclose(f);
	fprintf(stderr, "asyncsys: io_uring unavailable (%s%s); system calls run on execution threads only\n",
	        strerror(-err), cause);
}

static bool env_no_uring(void)
{
	const char *e = getenv("ASYNCSYS_NO_URING");
	return e && *e && strcmp(e, "0") != 0;
}

static void destroy(struct as *as)
{
	if (as->uring)
		as_uring_exit(as);
	if (as->area)
		munmap(as->area, as->area_bytes);
	free(as->free_v);
	free(as->done_bits);
	free(as->exec_q.v);
	free(as->ring_q.v);
	pthread_mutex_destroy(&as->q_lock);
	free(as);
}

int as_init_params(struct as **asp, const struct as_params *p)
{
	if (!asp || !p || p->nthreads < 1 || p->nthreads > 1024 || p->nreq < 1 || p->nreq > (1u << 20))
		return -EINVAL;
	struct as *as = calloc(1, sizeof(*as));
	if (!as)
		return -ENOMEM;
	pthread_mutex_init(&as->q_lock, NULL);
	as->kick_fd = -1;
	as->flags = p->flags | (env_no_uring() ? AS_NO_URING : 0);
	size_t bytes = ((size_t)p->nreq * sizeof(struct syscall_info) + PAGE - 1) / PAGE * PAGE;
	void *area = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		free(as);
		return -ENOMEM;
	}
	as->area = area;
	as->area_bytes = bytes;
	as->nslots = bytes / sizeof(struct syscall_info);
	as->free_v = calloc(as->nslots, sizeof(*as->free_v));
	as->done_bits = calloc((as->nslots + 63) / 64, sizeof(*as->done_bits));
	int r = -ENOMEM;
	if (!as->free_v || !as->done_bits || slotq_init(&as->exec_q, as->nslots) < 0 ||
	    slotq_init(&as->ring_q, as->nslots) < 0)
		goto fail;
	for (unsigned i = 0; i < as->nslots; i++)
		as->free_v[i] = as->nslots - 1 - i; /* slot 0 is handed out first */
	as->nfree = as->nslots;
	if (!(as->flags & AS_NO_URING)) {
		r = as_uring_init(as, p);
		if (r < 0)
			log_fallback(r);
	}
	as->nthreads = p->nthreads;
	r = as_threads_start(as);
	if (r < 0)
		goto fail;
	*asp = as;
	return 0;
fail:
	destroy(as);
	return r;
}

int as_init(struct as **asp, unsigned nthreads, unsigned nreq)
{
	struct as_params p = {.nthreads = nthreads, .nreq = nreq};
	return as_init_params(asp, &p);
}

unsigned as_features(const struct as *as)
{
	return (as->uring ? AS_F_URING : 0) | (as->uring && (as->flags & AS_SQPOLL) ? AS_F_SQPOLL : 0);
}

const struct syscall_info *as_area(const struct as *as, unsigned *nslots)
{
	if (nslots)
		*nslots = as->nslots;
	return as->area;
}

/* -ENOSYS for numbers the kernel cannot have, -EINVAL for calls that must not run on another
 * thread (they would end or replace the execution thread, or the whole process). */
static int check_num(long num)
{
	if (num < 0 || num >= AS_SYSCALL_MAX)
		return -ENOSYS;
	switch (num) {
	case SYS_exit:
	case SYS_exit_group:
	case SYS_clone:
	case SYS_clone3:
	case SYS_fork:
	case SYS_vfork:
	case SYS_execve:
	case SYS_execveat:
	case SYS_rt_sigreturn: return -EINVAL;
	default: return 0;
	}
}

int as_submitv(struct as *as, const struct syscall_info *reqs, unsigned n, unsigned *slots)
{
	for (unsigned i = 0; i < n; i++) {
		int r = check_num(reqs[i].num);
		if (r < 0)
			return r;
	}
	unsigned nring = 0;
	pthread_mutex_lock(&as->q_lock);
	if (as->nfree < n) {
		pthread_mutex_unlock(&as->q_lock);
		return -EAGAIN;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned slot = as->free_v[--as->nfree];
		struct syscall_info *si = &as->area[slot];
		__atomic_store_n(&si->num, reqs[i].num, __ATOMIC_RELAXED);
		memcpy(si->arg, reqs[i].arg, sizeof(si->arg));
		__atomic_store_n(&si->ret, 0, __ATOMIC_RELAXED);
		int64_t w = atomic_load_explicit(&si->state, memory_order_relaxed);
		atomic_store_explicit(&si->state, (w & ~(int64_t)0xff) | AS_HASCALL, memory_order_release);
		if (as_uring_accepts(as, si)) {
			slotq_push(&as->ring_q, slot);
			nring++;
		} else {
			slotq_push(&as->exec_q, slot);
		}
		slots[i] = slot;
	}
	/* Counted once, and before the lock is released: nothing placed here can complete before,
	 * and a flush (which pops under the lock) subtracts from ring_queued only what was added.
	 * Counted after, a flush could take and finish these first, and for a moment
	 * ring_inflight + ring_queued would miss a request still in flight: a waiter that looked
	 * then slept on event_seq with nobody on the ring, and nobody woke it (test_waiters). */
	atomic_fetch_add(&as->ninflight, n);
	if (nring)
		atomic_fetch_add(&as->ring_queued, nring);
	pthread_mutex_unlock(&as->q_lock);
	return (int)n;
}

int as_submit(struct as *as, long num, const long arg[6])
{
	struct syscall_info si = {.num = num};
	for (int i = 0; i < 6; i++)
		si.arg[i] = arg ? arg[i] : 0;
	unsigned slot;
	int r = as_submitv(as, &si, 1, &slot);
	return r < 0 ? r : (int)slot;
}

/* Sleeps until done(as, arg): on the ring (one thread at a time) while ring requests are in
 * flight, else on event_seq. count: done() means "count completions" (0: another condition). */
static void wait_until(struct as *as, bool (*done)(struct as *, void *), void *arg, unsigned count)
{
	for (;;) {
		uint32_t seq = atomic_load(&as->event_seq);
		if (done(as, arg))
			return;
		/* Queued first: a flush adds to ring_inflight before it subtracts from ring_queued,
		 * so a request moving between them meanwhile is counted by one of the two loads. */
		unsigned queued = atomic_load(&as->ring_queued);
		unsigned ring = atomic_load(&as->ring_inflight) + queued;
		if (as->uring && ring > 0 && pthread_mutex_trylock(&as->ring_lock) == 0) {
			/* Waiting for a count and only ring requests in flight: sleep for all that are
			 * needed in one io_uring_enter instead of one wake-up per completion. */
			unsigned want = 1, have = atomic_load(&as->ncompleted);
			if (count > have && atomic_load(&as->ninflight) <= ring)
				want = count - have;
			as_uring_pump(as, true, done, arg, want);
			pthread_mutex_unlock(&as->ring_lock);
			as_signal_event(as, true); /* completions reaped, and the ring is free again */
			continue;
		}
		_Atomic unsigned *nw = count ? &as->ncount_waiters : &as->nwaiters;
		if (count)
			atomic_store(&as->count_target, count);
		atomic_fetch_add(nw, 1);
		as_futex_wait(&as->event_seq, seq);
		atomic_fetch_sub(nw, 1);
	}
}

/* Starts what is queued: wakes execution threads for their queue, flushes the ring queue (or
 * has the thread sleeping on the ring do it). */
static void start(struct as *as)
{
	pthread_mutex_lock(&as->q_lock);
	unsigned nexec = as->exec_q.len;
	as->exec_q.rel = nexec;
	pthread_mutex_unlock(&as->q_lock);
	if (nexec)
		as_threads_wake(as, nexec);
	if (as->uring && atomic_load(&as->ring_queued) > 0) {
		if (pthread_mutex_trylock(&as->ring_lock) == 0) {
			as_uring_pump(as, true, NULL, NULL, 0);
			pthread_mutex_unlock(&as->ring_lock);
			as_signal_event(as, true);
		} else if (atomic_load(&as->ring_waiting)) {
			as_uring_kick(as);
		}
	}
}

static bool enough_completed(struct as *as, void *arg)
{
	return atomic_load(&as->ncompleted) >= *(unsigned *)arg || atomic_load(&as->ninflight) == 0;
}

int as_wakeup_wait(struct as *as, unsigned min_complete)
{
	start(as);
	if (min_complete < 1)
		min_complete = 1;
	wait_until(as, enough_completed, &min_complete, min_complete);
	return (int)atomic_load(&as->ncompleted);
}

int as_wakeup(struct as *as) { return as_wakeup_wait(as, 1); }

int as_start(struct as *as)
{
	start(as);
	return 0;
}

/* Reaps ring completions that are already there, without sleeping or starting anything (if no
 * other thread holds the ring). */
static void reap_ring(struct as *as)
{
	if (as->uring && atomic_load(&as->ring_inflight) > 0 && pthread_mutex_trylock(&as->ring_lock) == 0) {
		as_uring_pump(as, false, NULL, NULL, 0);
		pthread_mutex_unlock(&as->ring_lock);
		as_signal_event(as, true);
	}
}

int as_poll(struct as *as, unsigned slot, long *ret)
{
	if (slot >= as->nslots)
		return -EINVAL;
	int64_t r;
	int c = as_slot_collect(as, slot, &r, NULL);
	if (c == 0) {
		reap_ring(as);
		c = as_slot_collect(as, slot, &r, NULL);
	}
	if (c == 1 && ret)
		*ret = r;
	return c;
}

static bool slot_done(struct as *as, void *arg)
{
	enum as_state st = AS_STATE(atomic_load(&as->area[*(unsigned *)arg].state));
	return st != AS_HASCALL && st != AS_EXECUTING;
}

int as_wait(struct as *as, unsigned slot, long *ret)
{
	if (slot >= as->nslots)
		return -EINVAL;
	if (AS_STATE(atomic_load(&as->area[slot].state)) == AS_NONE)
		return -EINVAL;
	start(as);
	wait_until(as, slot_done, &slot, 0);
	int64_t r;
	int c = as_slot_collect(as, slot, &r, NULL);
	if (c != 1)
		return -EINVAL; /* collected by another thread meanwhile */
	if (ret)
		*ret = r;
	return 0;
}

/* The lowest k set bits of bits. */
static uint64_t first_bits(uint64_t bits, unsigned k)
{
	uint64_t out = 0;
	for (; bits && k; k--) {
		out |= bits & -bits;
		bits &= bits - 1;
	}
	return out;
}

static unsigned collect_all(struct as *as, struct as_completion *out, unsigned max, as_completion_fn fn,
                            void *arg)
{
	unsigned n = 0;
	for (unsigned wi = 0; wi < (as->nslots + 63) / 64 && (fn || n < max); wi++) {
		uint64_t bits = atomic_load(&as->done_bits[wi]);
		if (!bits)
			continue;
		if (!fn)
			bits = first_bits(bits, max - n);
		bits = as_slots_claim(as, wi, bits); /* (bits another collector took meanwhile drop out) */
		unsigned freed[64], nfreed = 0;
		for (; bits; bits &= bits - 1) {
			unsigned s = wi * 64 + (unsigned)__builtin_ctzll(bits);
			struct as_completion c = {.slot = s};
			as_slot_result(as, s, &c.ret, &c.num);
			freed[nfreed++] = s;
			if (fn)
				fn(&c, arg);
			else
				out[n] = c;
			n++;
		}
		if (nfreed) {
			as_slots_collected(as, nfreed);
			as_slots_free(as, freed, nfreed);
		}
	}
	return n;
}

int as_reap(struct as *as, struct as_completion *out, unsigned max)
{
	if (!out && max)
		return -EINVAL;
	reap_ring(as);
	if (atomic_load(&as->ncompleted) == 0)
		return 0;
	return (int)collect_all(as, out, max, NULL, NULL);
}

static bool none_in_flight(struct as *as, void *arg) { return atomic_load(&as->ninflight) == 0; }

int as_exit(struct as *as, as_completion_fn fn, void *arg)
{
	if (!as)
		return -EINVAL;
	start(as);
	wait_until(as, none_in_flight, NULL, 0);
	as_threads_stop(as);
	if (fn)
		collect_all(as, NULL, 0, fn, arg);
	destroy(as);
	return 0;
}
