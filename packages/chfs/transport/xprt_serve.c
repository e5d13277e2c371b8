/*
 * xprt_serve.c — the server side: request queue, worker pool, replies and RMA.
 *
 * The progress thread first asks the admission function (the layer above checks its credential
 * there), so a request without one creates no peer, no AV entry and gets no reply; then it hands
 * each received request buffer to the queue and posts a fresh buffer
 * in its place (so receives stay posted while handlers run); the buffer then belongs to the
 * request until xprt_reply returns it to a small free list. Workers pop requests FIFO and call
 * the handler. A layer that set an inline function (xprt_serve_inline) gets each request on the
 * progress thread first and may answer it there: a small request then crosses no thread at all
 * on the server. A request that arrives while an inline handler itself reads the CQ (its reply
 * found the send queue full) is queued, so inline handlers never nest. RMA operations are issued from the worker and completed by the progress thread;
 * each operation is reference-counted (worker + completion), so a worker that gives up leaves a
 * live object behind for a completion that may still come.
 *
 * A transfer is cut into chunks (XPRT_RMA_CHUNK, a few in flight) and is declared stalled only
 * when no chunk completed for XPRT_RMA_STALL_MS: the allowed time scales with the bytes moved.
 * A transfer the worker gave up on may still land in (or read from) the worker's buffer later:
 * libfabric 1.17 cannot cancel an RMA, and the providers here need no local registration that
 * could be closed. So the operations still in flight are attached to a "late" record of the
 * request, and the caller hands the buffer over with xprt_rma_retire(): it is freed only when
 * the last late operation has ended, and never reused.
 */
#include "xprt_internal.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define REPLY_SEND_TIMEOUT_MS 10000
#define FREE_RBUFS_MAX 64

static struct xprt_rbuf *free_rbufs[FREE_RBUFS_MAX];
static int nfree_rbufs;
static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;

struct xprt_rbuf *xprt_rbuf_get(void)
{
	struct xprt_rbuf *b = NULL;
	pthread_mutex_lock(&free_mu);
	if (nfree_rbufs > 0)
		b = free_rbufs[--nfree_rbufs];
	pthread_mutex_unlock(&free_mu);
	return b ? b : malloc(sizeof *b);
}

void xprt_rbuf_put(struct xprt_rbuf *b)
{
	pthread_mutex_lock(&free_mu);
	if (nfree_rbufs < FREE_RBUFS_MAX) {
		free_rbufs[nfree_rbufs++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&free_mu);
	free(b);
}

static void dispatch(xprt_t *x, struct xprt_req *r, xprt_peer_t *peer, struct xprt_lconn *lc,
                     struct xprt_rbuf *b, const struct xprt_hdr *h);

void xprt_enqueue_request(xprt_t *x, struct xprt_rbuf *b, const struct xprt_hdr *h)
{
	xprt_peer_t *peer;
	struct xprt_req *r = NULL;
	struct xprt_rbuf *nb = NULL;
	xprt_admit_fn admit = atomic_load_explicit(&x->admit, memory_order_acquire);
	if (admit && !admit(b->data + XPRT_HDR_SIZE + h->addrlen, h->bodylen, x->admit_arg)) {
		atomic_fetch_add(&x->st.refused, 1);
		if (xprt_post_recv(x, b) < 0)
			fprintf(stderr, "xprt: cannot repost a receive buffer\n");
		return;
	}
	if (xprt_peer_by_raw(x, b->data + XPRT_HDR_SIZE, h->addrlen, &peer) < 0 || !(r = malloc(sizeof *r)) ||
	    !(nb = xprt_rbuf_get())) {
		/* keep the receive posted; this request is dropped and its caller times out */
		free(r);
		if (xprt_post_recv(x, b) < 0)
			fprintf(stderr, "xprt: cannot repost a receive buffer\n");
		return;
	}
	nb->op.kind = XPRT_OP_RECV;
	nb->slot = b->slot;
	pthread_mutex_lock(&x->bufs_mu);
	x->bufs[b->slot] = nb;
	pthread_mutex_unlock(&x->bufs_mu);
	if (!atomic_load(&x->stopping) && xprt_post_recv(x, nb) < 0)
		fprintf(stderr, "xprt: cannot post a receive buffer\n");

	dispatch(x, r, peer, NULL, b, h);
}

void xprt_serve_local_request(xprt_t *x, xprt_peer_t *peer, struct xprt_lconn *lc, struct xprt_rbuf *b,
                              const struct xprt_hdr *h)
{
	struct xprt_req *r = NULL;
	xprt_admit_fn admit = atomic_load_explicit(&x->admit, memory_order_acquire);
	bool ok = !admit || admit(b->data + XPRT_HDR_SIZE + h->addrlen, h->bodylen, x->admit_arg);
	if (!ok)
		atomic_fetch_add(&x->st.refused, 1);
	if (!ok || !(r = malloc(sizeof *r))) { /* dropped: its caller times out, as over libfabric */
		xprt_rbuf_put(b);
		xprt_local_conn_put(lc);
		return;
	}
	dispatch(x, r, peer, lc, b, h);
}

/* Hand an admitted request to the inline function, else to the worker queue. */
static void dispatch(xprt_t *x, struct xprt_req *r, xprt_peer_t *peer, struct xprt_lconn *lc,
                     struct xprt_rbuf *b, const struct xprt_hdr *h)
{
	r->next = NULL;
	r->x = x;
	r->peer = peer;
	r->id = h->id;
	r->body = b->data + XPRT_HDR_SIZE + h->addrlen;
	r->bodylen = h->bodylen;
	r->buf = b;
	r->late = NULL;
	r->lconn = lc;
	atomic_fetch_add(&x->st.requests, 1);
	static _Thread_local int in_inline;
	xprt_inline_fn inl = atomic_load_explicit(&x->inline_fn, memory_order_acquire);
	if (inl && !in_inline) {
		in_inline = 1;
		int done = inl(r, x->inline_arg);
		in_inline = 0;
		if (done)
			return;
	}
	pthread_mutex_lock(&x->q_mu);
	if (x->q_tail)
		x->q_tail->next = r;
	else
		x->q_head = r;
	x->q_tail = r;
	pthread_cond_signal(&x->q_cv);
	pthread_mutex_unlock(&x->q_mu);
}

/* Shared by the operations of a request that were still in flight when the worker gave up: the
 * buffer they target (handed over by xprt_rma_retire) is freed when the last of them ends. */
struct xprt_rma_late {
	atomic_int refs; /* one per such operation + one for the request until it retires */
	void *buf;
};

static void late_put(struct xprt_rma_late *l)
{
	if (atomic_fetch_sub(&l->refs, 1) != 1)
		return;
	free(l->buf);
	free(l);
}

static void req_free(struct xprt_req *r)
{
	if (r->late) {
		struct xprt_rma_late *l = r->late;
		r->late = NULL;
		late_put(l);
	}
	xprt_rbuf_put(r->buf);
	if (r->lconn)
		xprt_local_conn_put(r->lconn);
	free(r);
}

static void *worker_main(void *arg)
{
	xprt_t *x = arg;
	for (;;) {
		pthread_mutex_lock(&x->q_mu);
		while (!x->q_head && !x->q_stop)
			pthread_cond_wait(&x->q_cv, &x->q_mu);
		if (x->q_stop) {
			pthread_mutex_unlock(&x->q_mu);
			return NULL;
		}
		struct xprt_req *r = x->q_head;
		x->q_head = r->next;
		if (!x->q_head)
			x->q_tail = NULL;
		pthread_mutex_unlock(&x->q_mu);
		x->handler(r, x->handler_arg);
	}
}

int xprt_serve_admit(xprt_t *x, xprt_admit_fn fn, void *arg)
{
	if (!x || !x->is_server || x->workers)
		return -EINVAL;
	x->admit_arg = arg;
	atomic_store_explicit(&x->admit, fn, memory_order_release);
	return 0;
}

int xprt_serve_inline(xprt_t *x, xprt_inline_fn fn, void *arg)
{
	if (!x || !x->is_server || x->workers)
		return -EINVAL;
	x->inline_arg = arg;
	atomic_store_explicit(&x->inline_fn, fn, memory_order_release);
	return 0;
}

int xprt_serve(xprt_t *x, xprt_handler_fn h, void *arg)
{
	if (!x || !h || !x->is_server || x->workers)
		return -EINVAL;
	x->handler = h;
	x->handler_arg = arg;
	x->workers = calloc(x->nworkers, sizeof *x->workers);
	if (!x->workers)
		return -ENOMEM;
	for (unsigned i = 0; i < x->nworkers; i++) {
		int rc = pthread_create(&x->workers[i], NULL, worker_main, x);
		if (rc)
			return -rc;
		x->nworkers_started++;
	}
	/* The node-local socket (xprt_local.c), unless CHFSD_LOCAL_SOCKET=0. Not fatal: clients
	 * then use libfabric. Without one, a socket a killed predecessor left under our address
	 * must go too, or local clients would take us for dead. */
	const char *e = getenv("CHFSD_LOCAL_SOCKET");
	if (e && strcmp(e, "0") == 0) {
		xprt_local_unpublished(x);
	} else {
		int rc = xprt_local_listen(x);
		if (rc < 0)
			fprintf(stderr, "xprt: no node-local socket for %s: %s\n", x->self_addr,
			        strerror(-rc));
	}
	return 0;
}

void xprt_workers_stop(xprt_t *x)
{
	pthread_mutex_lock(&x->q_mu);
	x->q_stop = true;
	pthread_cond_broadcast(&x->q_cv);
	pthread_mutex_unlock(&x->q_mu);
	for (unsigned i = 0; i < x->nworkers_started; i++)
		pthread_join(x->workers[i], NULL);
	x->nworkers_started = 0;
	/* The progress thread still runs (stopped after us) and may enqueue meanwhile. */
	pthread_mutex_lock(&x->q_mu);
	while (x->q_head) {
		struct xprt_req *r = x->q_head;
		x->q_head = r->next;
		req_free(r);
	}
	x->q_tail = NULL;
	pthread_mutex_unlock(&x->q_mu);
}

const void *xprt_req_data(const xprt_req_t *r, size_t *len)
{
	if (len)
		*len = r->bodylen;
	return r->body;
}

const char *xprt_req_peer_addr(const xprt_req_t *r) { return r->peer->addr; }

int xprt_reply(xprt_req_t *r, const void *rep, size_t len)
{
	if (!r)
		return -EINVAL;
	xprt_t *x = r->x;
	int rc = -EINVAL;
	if (rep || !len) {
		struct timespec deadline;
		xprt_deadline(&deadline, REPLY_SEND_TIMEOUT_MS);
		rc = r->lconn
		             ? xprt_local_reply(r, rep, len)
		             : xprt_send_msg(x, r->peer, XPRT_MSG_REPLY, r->id, NULL, 0, rep, len, &deadline);
	}
	req_free(r);
	return rc;
}

/* ---- RMA ---- */

static void rmaop_put(struct xprt_rmaop *op)
{
	if (atomic_fetch_sub(&op->refs, 1) != 1)
		return;
	if (op->local_mr)
		fi_close(&op->local_mr->fid);
	if (op->late)
		late_put(op->late);
	pthread_mutex_destroy(&op->mu);
	pthread_cond_destroy(&op->cv);
	free(op);
}

void xprt_rma_complete(struct xprt_rmaop *op, int err)
{
	pthread_mutex_lock(&op->mu);
	op->err = err;
	op->done = true;
	pthread_cond_signal(&op->cv);
	pthread_mutex_unlock(&op->mu);
	rmaop_put(op);
}

static struct xprt_rmaop *rmaop_new(void)
{
	struct xprt_rmaop *op = calloc(1, sizeof *op);
	if (!op)
		return NULL;
	op->op.kind = XPRT_OP_RMA;
	atomic_init(&op->refs, 2);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&op->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&op->mu, NULL);
	return op;
}

static void rmaop_abort(struct xprt_rmaop *op) /* never posted: only our reference exists */
{
	atomic_store(&op->refs, 1);
	rmaop_put(op);
}

/* Post one chunk; retries -FI_EAGAIN (the provider's queue is full) until the deadline. */
static int rma_post(xprt_req_t *r, fi_addr_t dest, struct xprt_rmaop *op, char *local, size_t len,
                    uint64_t raddr, uint64_t key, bool is_read, const struct timespec *deadline)
{
	xprt_t *x = r->x;
	void *desc = NULL;
	ssize_t rc;
	if (x->mr_mode & FI_MR_LOCAL) {
		rc = fi_mr_reg(x->domain, local, len, is_read ? FI_READ : FI_WRITE, 0,
		               atomic_fetch_add(&x->next_key, 1), 0, &op->local_mr, NULL);
		if (rc)
			return xprt_fi_err((int)rc);
		desc = fi_mr_desc(op->local_mr);
	}
	for (unsigned spins = 0;; spins++) {
		rc = is_read ? fi_read(x->ep, local, len, desc, dest, raddr, key, &op->op)
		             : fi_write(x->ep, local, len, desc, dest, raddr, key, &op->op);
		if (rc == 0)
			break;
		if (rc != -FI_EAGAIN || xprt_past(deadline))
			return rc == -FI_EAGAIN ? -ETIMEDOUT : xprt_fi_err((int)rc);
		xprt_kick(x, r->peer);
		if (spins < 16)
			sched_yield();
		else
			usleep(10);
	}
	xprt_kick(x, r->peer);
	return 0;
}

static int rma_wait(xprt_t *x, struct xprt_rmaop *op, const struct timespec *deadline)
{
	xprt_poll_before_wait(x, &op->done);
	pthread_mutex_lock(&op->mu);
	while (!op->done)
		if (pthread_cond_timedwait(&op->cv, &op->mu, deadline) == ETIMEDOUT)
			break;
	int err = op->done ? op->err : -ETIMEDOUT;
	pthread_mutex_unlock(&op->mu);
	return err;
}

/* The worker gives up on an operation that may still be running: it keeps the request's late
 * record alive, so the buffer it targets is never recycled before it ended. Without memory for
 * the record, wait for the operation however long it takes (never corrupt). */
static void rma_detach(xprt_req_t *r, struct xprt_rmaop *op)
{
	if (!r->late && (r->late = calloc(1, sizeof *r->late)) != NULL)
		atomic_init(&r->late->refs, 1);
	pthread_mutex_lock(&op->mu);
	if (!op->done && r->late) {
		atomic_fetch_add(&r->late->refs, 1);
		op->late = r->late;
	}
	while (!op->done && !op->late)
		pthread_cond_wait(&op->cv, &op->mu);
	pthread_mutex_unlock(&op->mu);
	rmaop_put(op);
}

/* A transfer is cut into XPRT_RMA_CHUNK pieces with up to RMA_WINDOW of them in flight; the
 * deadline is XPRT_RMA_STALL_MS after the last chunk that completed, so a slow but progressing
 * transfer of any size goes on and only a stalled one fails. */
#define RMA_WINDOW 4
static int rma(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, void *local, size_t len,
               bool is_read)
{
	if (!r || !remote || (!local && len) || off > remote->len || len > remote->len - off)
		return -EINVAL;
	if (len == 0)
		return 0;
	xprt_t *x = r->x;
	if (r->lconn) {
		int rc = xprt_local_rma(r, remote, off, local, len, is_read);
		if (rc == 0) {
			atomic_fetch_add(is_read ? &x->st.rma_reads : &x->st.rma_writes, 1);
			atomic_fetch_add(&x->st.rma_bytes, len);
		}
		return rc;
	}
	/* Without FI_MR_VIRT_ADDR the provider addresses a region by offset (xprt_mem.c). */
	uint64_t base = (x->mr_mode & FI_MR_VIRT_ADDR) ? remote->addr : 0;
	fi_addr_t dest = xprt_peer_fi_addr(x, r->peer);
	if (dest == FI_ADDR_NOTAVAIL)
		return -EHOSTUNREACH;
	struct xprt_rmaop *win[RMA_WINDOW];
	unsigned head = 0, n = 0; /* win[head .. head+n) in flight, oldest first */
	size_t posted = 0;
	int err = 0;
	struct timespec deadline;
	xprt_deadline(&deadline, XPRT_RMA_STALL_MS);
	while (err == 0 && (posted < len || n > 0)) {
		while (err == 0 && posted < len && n < RMA_WINDOW) {
			size_t k = len - posted > XPRT_RMA_CHUNK ? XPRT_RMA_CHUNK : len - posted;
			struct xprt_rmaop *op = rmaop_new();
			err = op ? rma_post(r, dest, op, (char *)local + posted, k, base + off + posted,
			                    remote->key, is_read, &deadline)
			         : -ENOMEM;
			if (err) {
				if (op)
					rmaop_abort(op);
				break;
			}
			win[(head + n++) % RMA_WINDOW] = op;
			posted += k;
		}
		if (n == 0)
			break;
		struct xprt_rmaop *op = win[head];
		int rc = rma_wait(x, op, &deadline);
		if (rc == -ETIMEDOUT) {
			err = rc;
			break;
		}
		head = (head + 1) % RMA_WINDOW;
		n--;
		rmaop_put(op);
		err = rc;
		xprt_deadline(&deadline, XPRT_RMA_STALL_MS); /* progress: the stall clock restarts */
	}
	for (; n > 0; n--, head = (head + 1) % RMA_WINDOW)
		rma_detach(r, win[head]);
	if (err == 0) {
		atomic_fetch_add(is_read ? &x->st.rma_reads : &x->st.rma_writes, 1);
		atomic_fetch_add(&x->st.rma_bytes, len);
	} else if (err == -ETIMEDOUT) {
		atomic_fetch_add(&x->st.timeouts, 1);
	}
	return err;
}

int xprt_rma_by_kernel(const xprt_req_t *r) { return r && r->lconn; }

void xprt_rma_retire(xprt_req_t *r, void *buf)
{
	struct xprt_rma_late *l = r ? r->late : NULL;
	if (!l) {
		free(buf); /* nothing can touch it any more */
		return;
	}
	l->buf = buf;
	r->late = NULL;
	late_put(l); /* freed now or when the last late operation ends */
}

int xprt_transfer_timeout_ms(int base_ms, uint64_t bytes)
{
	if (base_ms <= 0)
		return base_ms;
	uint64_t t = (uint64_t)base_ms + bytes * 1000 / XPRT_TRANSFER_MIN_RATE;
	return t > INT_MAX ? INT_MAX : (int)t;
}

int xprt_rma_read(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, void *local, size_t len)
{
	return rma(r, remote, off, local, len, true);
}

int xprt_rma_write(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, const void *local,
                   size_t len)
{
	return rma(r, remote, off, (void *)local, len, false);
}
