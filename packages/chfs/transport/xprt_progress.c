/*
 * xprt_progress.c — the progress thread: the only reader of the completion queue.
 *
 * libfabric 1.17's tcp and shm providers move data only while someone calls into them, so one
 * thread per xprt_t reads the CQ for the xprt's whole life and routes each completion to the
 * operation named by its context (a received request goes to the worker queue, a reply to the
 * waiting call, a send frees its buffer, an RMA wakes its worker).
 *
 * Waiting when idle:
 *  - tcp, verbs, sockets: fi_cq_sread on a FI_WAIT_UNSPEC CQ blocks in the kernel and still drives
 *    progress; xprt_close interrupts it with fi_cq_signal.
 *  - shm has no wait object (sread spins at 100% and ignores its timeout): its loop polls and
 *    sleeps on a futex doorbell, in xprt_shm.c.
 * In caller-progress mode (clients, xprt_call.c) the waiting callers read the CQ; this thread
 * parks while any caller waits (see progress_parked).
 */
#include "xprt_internal.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#define CQ_BATCH 16
#define POLLER_SLICE_MS 100 /* a polling caller re-checks its own deadline at least this often */

_Thread_local int xprt_tls_polling;
void xprt_deadline(struct timespec *ts, int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	if (timeout_ms <= 0) {
		ts->tv_sec += 100L * 365 * 86400;
		return;
	}
	ts->tv_sec += timeout_ms / 1000;
	ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

bool xprt_past(const struct timespec *ts)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > ts->tv_sec || (now.tv_sec == ts->tv_sec && now.tv_nsec >= ts->tv_nsec);
}

int xprt_post_recv(xprt_t *x, struct xprt_rbuf *b)
{
	for (int tries = 0;; tries++) {
		ssize_t rc = fi_recv(x->ep, b->data, sizeof b->data, NULL, FI_ADDR_UNSPEC, &b->op);
		if (rc == 0)
			return 0;
		if (rc != -FI_EAGAIN || tries > 1000)
			return xprt_fi_err((int)rc);
		usleep(100);
	}
}

static void sendop_free(xprt_t *x, struct xprt_sendop *s)
{
	pthread_mutex_lock(&x->send_mu);
	if (s->prev)
		s->prev->next = s->next;
	else
		x->sends = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&x->send_mu);
	free(s);
}

static void repost(xprt_t *x, struct xprt_rbuf *b)
{
	if (atomic_load(&x->stopping))
		return;
	int rc = xprt_post_recv(x, b);
	if (rc < 0)
		fprintf(stderr, "xprt: cannot repost a receive buffer: %s\n", strerror(-rc));
}

static void handle_ok(xprt_t *x, const struct fi_cq_tagged_entry *e)
{
	struct xprt_op *op = e->op_context;
	if (!op)
		return;
	switch (op->kind) {
	case XPRT_OP_RECV: {
		struct xprt_rbuf *b = (struct xprt_rbuf *)op;
		struct xprt_hdr h;
		if (xprt_get_hdr(b->data, e->len, &h) < 0) {
			repost(x, b); /* malformed: dropped */
		} else if (h.kind == XPRT_MSG_REPLY) {
			xprt_call_deliver(x, h.id, b->data + XPRT_HDR_SIZE, h.bodylen, 0);
			repost(x, b);
		} else if (x->is_server) {
			xprt_enqueue_request(x, b, &h);
		} else {
			repost(x, b); /* a request to a client: dropped */
		}
		break;
	}
	case XPRT_OP_SEND: sendop_free(x, (struct xprt_sendop *)op); break;
	case XPRT_OP_RMA: xprt_rma_complete((struct xprt_rmaop *)op, 0); break;
	}
}

static void handle_err(xprt_t *x)
{
	struct fi_cq_err_entry err;
	memset(&err, 0, sizeof err);
	if (fi_cq_readerr(x->cq, &err, 0) != 1)
		return;
	struct xprt_op *op = err.op_context;
	if (!op)
		return;
	int e = xprt_fi_err(err.err);
	switch (op->kind) {
	case XPRT_OP_RECV:
		/* FI_ETRUNC cannot happen with senders of this library (they respect XPRT_MAX_BODY);
		 * anything else is dropped and the buffer goes back. */
		if (err.err != FI_ECANCELED)
			repost(x, (struct xprt_rbuf *)op);
		break;
	case XPRT_OP_SEND: {
		struct xprt_sendop *s = (struct xprt_sendop *)op;
		if (s->call_id)
			xprt_call_deliver(x, s->call_id, NULL, 0, e);
		sendop_free(x, s);
		break;
	}
	case XPRT_OP_RMA: xprt_rma_complete((struct xprt_rmaop *)op, e); break;
	}
}

/* One thread at a time reads the CQ (cq_mu): libfabric 1.17's tcp lost a reply now and then
 * (a call timed out with the reply sent) when two threads read the CQ at once — one blocked
 * in fi_cq_sread, the other in fi_cq_read — so every read, blocking or not, is serialised.
 * A thread already holding it (a completion handler whose send found the queue full) reads
 * on; a non-blocking read finding it busy returns 0: its holder is reading anyway. */
static _Thread_local int tls_holds_cq;

static int poll_cq_locked(xprt_t *x, int timeout_ms)
{
	struct fi_cq_tagged_entry ents[CQ_BATCH];
	ssize_t n = timeout_ms >= 0 ? fi_cq_sread(x->cq, ents, CQ_BATCH, NULL, timeout_ms)
	                            : fi_cq_read(x->cq, ents, CQ_BATCH);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			handle_ok(x, &ents[i]);
		return (int)n;
	}
	if (n == -FI_EAVAIL) {
		handle_err(x);
		return 1;
	}
	return 0;
}

/* Read one batch; returns the number of completions handled (errors count), 0 if none. */
int xprt_poll_cq(xprt_t *x, int timeout_ms)
{
	if (tls_holds_cq)
		return poll_cq_locked(x, timeout_ms < 0 ? -1 : 0);
	if (timeout_ms >= 0)
		pthread_mutex_lock(&x->cq_mu);
	else if (pthread_mutex_trylock(&x->cq_mu) != 0)
		return 0;
	tls_holds_cq = 1;
	int n = poll_cq_locked(x, timeout_ms);
	tls_holds_cq = 0;
	pthread_mutex_unlock(&x->cq_mu);
	return n;
}

static void progress_blocking(xprt_t *x)
{
	while (!atomic_load(&x->stopping)) {
		atomic_fetch_add(&x->st.wakeups, 1);
		xprt_poll_cq(x, 200);
	}
}

static long ms_left(const struct timespec *ts)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long ms = (long long)(ts->tv_sec - now.tv_sec) * 1000 + (ts->tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : ms > POLLER_SLICE_MS ? POLLER_SLICE_MS : (long)ms;
}

bool xprt_poll_until(xprt_t *x, atomic_bool *flag, const struct timespec *until)
{
	if (x->kind == XPRT_SHM)
		return xprt_shm_poll_until(x, flag, until);
	while (!atomic_load(flag) && !xprt_past(until))
		xprt_poll_cq(x, (int)ms_left(until) + 1);
	return atomic_load(flag);
}

void xprt_wake_poller(xprt_t *x)
{
	if (x->kind == XPRT_SHM)
		shm_doorbell_ring(x->self_db);
	else
		fi_cq_signal(x->cq);
}

/* Caller-progress mode: see the top of the file. On tcp/verbs/sockets the thread blocks in
 * fi_cq_sread whenever no caller waits and the calls have been quiet for PARK_LINGER_MS, as in
 * the plain mode (an idle rxm endpoint read only by short non-blocking polls lost a reply now
 * and then); a caller that becomes the poller while it is there interrupts it (fi_cq_signal).
 * shm polls briefly instead (every 1 ms with calls nobody waits for, every 100 ms idle). */
#define PARK_LINGER_MS 5
static void progress_parked(xprt_t *x)
{
	bool blocking = x->kind != XPRT_SHM;
	pthread_mutex_lock(&x->call_mu);
	while (!atomic_load(&x->stopping)) {
		bool orphans = x->waiters == 0 && atomic_load(&x->calls_in_flight) > 0;
		if (x->waiters || atomic_load(&x->poller) || !blocking || x->calls_recent) {
			x->calls_recent = false;
			struct timespec until;
			xprt_deadline(&until, blocking ? PARK_LINGER_MS : orphans ? 1 : 100);
			pthread_cond_timedwait(&x->park_cv, &x->call_mu, &until);
			if (x->waiters || atomic_load(&x->poller) || (blocking && x->calls_recent))
				continue;
		}
		if (blocking)
			x->progress_in_cq = true; /* under call_mu: a new poller sees it and interrupts */
		pthread_mutex_unlock(&x->call_mu);
		atomic_fetch_add(&x->st.wakeups, 1);
		if (blocking)
			xprt_poll_cq(x, 200);
		else
			for (int i = 0; i < 64 && xprt_poll_cq(x, -1) > 0; i++)
				;
		pthread_mutex_lock(&x->call_mu);
		x->progress_in_cq = false;
	}
	pthread_mutex_unlock(&x->call_mu);
}

static void *progress_main(void *arg)
{
	xprt_t *x = arg;
	xprt_tls_polling = 1;
	if (x->caller_progress)
		progress_parked(x);
	else if (x->kind == XPRT_SHM)
		xprt_shm_progress(x);
	else
		progress_blocking(x);
	return NULL;
}

/* The progress thread blocks every signal (it inherits the mask it is created with): the
 * program's process-directed signals (SIGCHLD, SIGALRM, SIGTERM, kill) must reach the
 * program's own threads. Under the syscall hook this thread belongs to another libc than the
 * program's, and a handler of the program run on it would find its thread-local data (errno,
 * malloc's per-thread cache) in the wrong place. */
int xprt_progress_start(xprt_t *x)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&x->progress, NULL, progress_main, x);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	x->progress_started = true;
	return 0;
}

void xprt_progress_stop(xprt_t *x)
{
	if (!x->progress_started)
		return;
	atomic_store(&x->stopping, true);
	pthread_mutex_lock(&x->call_mu);
	pthread_cond_broadcast(&x->park_cv);
	pthread_mutex_unlock(&x->call_mu);
	if (x->kind == XPRT_SHM)
		shm_doorbell_ring(x->self_db);
	else
		fi_cq_signal(x->cq);
	pthread_join(x->progress, NULL);
	x->progress_started = false;
}

void xprt_kick(xprt_t *x, xprt_peer_t *peer)
{
	if (x->kind == XPRT_SHM)
		xprt_shm_kick(x, peer);
}

void xprt_poll_before_wait(xprt_t *x, atomic_bool *flag)
{
	if (x->kind == XPRT_SHM)
		xprt_shm_poll_before_wait(x, flag);
}
