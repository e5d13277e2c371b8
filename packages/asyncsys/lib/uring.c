/*
 * uring.c — the io_uring back end. Requests queued for the ring are turned into SQEs and sent
 * with one submit; a thread that must wait for ring completions sleeps in io_uring_enter while
 * holding ring_lock, and every other thread that needs it awake (a new request, a completion on
 * an execution thread) writes to an eventfd the ring polls (multishot), so nobody spins.
 */
#include "internal.h"
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define KICK_TAG UINT64_MAX

int as_uring_init(struct as *as, const struct as_params *p)
{
	struct io_uring_params up = {0};
	unsigned entries = 8;
	while (entries < as->nslots && entries < 4096)
		entries <<= 1;
	if (p->flags & AS_SQPOLL) {
		up.flags |= IORING_SETUP_SQPOLL;
		up.sq_thread_idle = p->sqpoll_idle_ms ? p->sqpoll_idle_ms : 1000;
	}
	int r = io_uring_queue_init_params(entries, &as->ring, &up);
	if (r < 0)
		return r;
	as->probe = io_uring_get_probe_ring(&as->ring);
	as->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!as->probe || as->kick_fd < 0) {
		r = as->kick_fd < 0 ? -errno : -ENOMEM;
		as_uring_exit(as);
		return r;
	}
	if (p->iowq_workers) {
		unsigned vals[2] = {p->iowq_workers, p->iowq_workers};
		r = io_uring_register_iowq_max_workers(&as->ring, vals);
		if (r < 0) {
			as_uring_exit(as);
			return r;
		}
	}
	pthread_mutex_init(&as->ring_lock, NULL);
	as->uring = true;
	return 0;
}

bool as_uring_accepts(const struct as *as, const struct syscall_info *si)
{
	return as->uring && as_opmap_has(si, as->probe);
}

void as_uring_kick(struct as *as)
{
	uint64_t one = 1;
	if (write(as->kick_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, so the poll has fired already */
	}
}

static unsigned reap(struct as *as);

static struct io_uring_sqe *get_sqe(struct as *as)
{
	struct io_uring_sqe *sqe;
	while (!(sqe = io_uring_get_sqe(&as->ring))) {
		/* SQ full: send what is there, and empty the CQ so the kernel has room to post */
		io_uring_submit(&as->ring);
		reap(as);
	}
	return sqe;
}

/* Moves every queued ring request into the SQ (HASCALL -> EXECUTING). */
static void flush(struct as *as)
{
	unsigned slot, n = 0;
	pthread_mutex_lock(&as->q_lock);
	while (slotq_pop(&as->ring_q, &slot)) {
		if (!as_slot_take(as, slot))
			continue;
		struct io_uring_sqe *sqe = get_sqe(as);
		as_opmap_prep(sqe, &as->area[slot]);
		io_uring_sqe_set_data64(sqe, slot);
		if (as->flags & AS_URING_ASYNC)
			io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
		n++;
	}
	pthread_mutex_unlock(&as->q_lock);
	atomic_fetch_add(&as->ring_inflight, n);
	atomic_fetch_sub(&as->ring_queued, n);
	if (!as->kick_armed) {
		struct io_uring_sqe *sqe = get_sqe(as);
		io_uring_prep_poll_multishot(sqe, as->kick_fd, POLLIN);
		io_uring_sqe_set_data64(sqe, KICK_TAG);
		as->kick_armed = true;
	}
}

#define REAP_BATCH 64

static unsigned reap(struct as *as)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0, done = 0, k = 0, slots[REAP_BATCH];
	int64_t rets[REAP_BATCH];
	io_uring_for_each_cqe(&as->ring, head, cqe)
	{
		seen++;
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		if (tag == KICK_TAG) {
			uint64_t v;
			if (read(as->kick_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: already drained */
			}
			if (!(cqe->flags & IORING_CQE_F_MORE))
				as->kick_armed = false;
			continue;
		}
		slots[k] = (unsigned)tag;
		rets[k++] = cqe->res;
		if (k == REAP_BATCH) {
			as_slots_complete(as, slots, rets, k);
			done += k;
			k = 0;
		}
	}
	as_slots_complete(as, slots, rets, k);
	done += k;
	io_uring_cq_advance(&as->ring, seen);
	atomic_fetch_sub(&as->ring_inflight, done);
	return done;
}

void as_uring_pump(struct as *as, bool do_flush, bool (*done)(struct as *, void *), void *arg, unsigned want)
{
	if (do_flush)
		flush(as);
	unsigned inflight = atomic_load(&as->ring_inflight);
	if (want > inflight)
		want = inflight;
	bool sleep = done && atomic_load(&as->ring_inflight) > 0;
	if (sleep) {
		atomic_store(&as->ring_waiting, true);
		/* Re-check after announcing the sleep: a request queued or a completion published
		 * before this point is seen here; one after it kicks the eventfd. */
		if (atomic_load(&as->ring_queued) > 0 || done(as, arg))
			sleep = false;
	}
	if (sleep)
		io_uring_submit_and_wait(&as->ring, want > 1 ? want : 1); /* -EINTR: the caller re-checks */
	else
		io_uring_submit(&as->ring);
	atomic_store(&as->ring_waiting, false);
	reap(as);
}

void as_uring_exit(struct as *as)
{
	if (as->probe)
		io_uring_free_probe(as->probe);
	as->probe = NULL;
	if (as->kick_fd >= 0)
		close(as->kick_fd);
	as->kick_fd = -1;
	io_uring_queue_exit(&as->ring);
	as->uring = false;
}
