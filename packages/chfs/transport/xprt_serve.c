/*
 * xprt_serve.c — the server side: request queue, worker pool, replies and RMA.
 *
 * The progress thread hands each received request buffer to the queue and posts a fresh buffer
 * in its place (so receives stay posted while handlers run); the buffer then belongs to the
 * request until xprt_reply returns it to a small free list. Workers pop requests FIFO and call
 * the handler. RMA operations are issued from the worker and completed by the progress thread;
 * the operation is reference-counted (worker + completion), so a worker that gives up after
 * XPRT_RMA_TIMEOUT_MS leaves a live object behind for a completion that may still come.
 */
#include "xprt_internal.h"

#include <errno.h>
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

static struct xprt_rbuf *rbuf_get(void)
{
	struct xprt_rbuf *b = NULL;
	pthread_mutex_lock(&free_mu);
	if (nfree_rbufs > 0)
		b = free_rbufs[--nfree_rbufs];
	pthread_mutex_unlock(&free_mu);
	return b ? b : malloc(sizeof *b);
}

static void rbuf_put(struct xprt_rbuf *b)
{
	pthread_mutex_lock(&free_mu);
	if (nfree_rbufs < FREE_RBUFS_MAX) {
		free_rbufs[nfree_rbufs++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&free_mu);
	free(b);
}

void xprt_enqueue_request(xprt_t *x, struct xprt_rbuf *b, const struct xprt_hdr *h)
{
	xprt_peer_t *peer;
	struct xprt_req *r = NULL;
	struct xprt_rbuf *nb = NULL;
	if (xprt_peer_by_raw(x, b->data + XPRT_HDR_SIZE, h->addrlen, &peer) < 0 ||
	    !(r = malloc(sizeof *r)) || !(nb = rbuf_get())) {
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

	r->next = NULL;
	r->x = x;
	r->peer = peer;
	r->id = h->id;
	r->body = b->data + XPRT_HDR_SIZE + h->addrlen;
	r->bodylen = h->bodylen;
	r->buf = b;
	atomic_fetch_add(&x->st.requests, 1);
	pthread_mutex_lock(&x->q_mu);
	if (x->q_tail)
		x->q_tail->next = r;
	else
		x->q_head = r;
	x->q_tail = r;
	pthread_cond_signal(&x->q_cv);
	pthread_mutex_unlock(&x->q_mu);
}

static void req_free(struct xprt_req *r)
{
	rbuf_put(r->buf);
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

const char *xprt_req_peer_addr(const xprt_req_t *r)
{
	return r->peer->addr;
}

int xprt_reply(xprt_req_t *r, const void *rep, size_t len)
{
	if (!r)
		return -EINVAL;
	xprt_t *x = r->x;
	int rc = -EINVAL;
	if (rep || !len) {
		struct timespec deadline;
		xprt_deadline(&deadline, REPLY_SEND_TIMEOUT_MS);
		rc = xprt_send_msg(x, r->peer, XPRT_MSG_REPLY, r->id, NULL, 0, rep, len, &deadline);
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

static int rma(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, void *local,
               size_t len, bool is_read)
{
	if (!r || !remote || (!local && len) || off > remote->len || len > remote->len - off)
		return -EINVAL;
	if (len == 0)
		return 0;
	xprt_t *x = r->x;
	struct xprt_rmaop *op = calloc(1, sizeof *op);
	if (!op)
		return -ENOMEM;
	op->op.kind = XPRT_OP_RMA;
	atomic_init(&op->refs, 2);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&op->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&op->mu, NULL);
	void *desc = NULL;
	ssize_t rc;
	if (x->mr_mode & FI_MR_LOCAL) {
		rc = fi_mr_reg(x->domain, local, len, is_read ? FI_READ : FI_WRITE, 0,
			       atomic_fetch_add(&x->next_key, 1), 0, &op->local_mr, NULL);
		if (rc) {
			atomic_store(&op->refs, 1);
			rmaop_put(op);
			return xprt_fi_err((int)rc);
		}
		desc = fi_mr_desc(op->local_mr);
	}
	struct timespec deadline;
	xprt_deadline(&deadline, XPRT_RMA_TIMEOUT_MS);
	uint64_t raddr = remote->addr + off;
	fi_addr_t dest = xprt_peer_fi_addr(x, r->peer);
	if (dest == FI_ADDR_NOTAVAIL) {
		atomic_store(&op->refs, 1);
		rmaop_put(op);
		return -EHOSTUNREACH;
	}
	for (unsigned spins = 0;; spins++) {
		rc = is_read ? fi_read(x->ep, local, len, desc, dest, raddr, remote->key,
				       &op->op)
			     : fi_write(x->ep, local, len, desc, dest, raddr, remote->key,
					&op->op);
		if (rc == 0)
			break;
		if (rc != -FI_EAGAIN || xprt_past(&deadline)) {
			atomic_store(&op->refs, 1);
			rmaop_put(op);
			return rc == -FI_EAGAIN ? -ETIMEDOUT : xprt_fi_err((int)rc);
		}
		xprt_kick(x, r->peer);
		if (spins < 16)
			sched_yield();
		else
			usleep(10);
	}
	xprt_kick(x, r->peer);
	xprt_poll_before_wait(x, &op->done);
	pthread_mutex_lock(&op->mu);
	while (!op->done)
		if (pthread_cond_timedwait(&op->cv, &op->mu, &deadline) == ETIMEDOUT)
			break;
	int err = op->done ? op->err : -ETIMEDOUT;
	pthread_mutex_unlock(&op->mu);
	rmaop_put(op);
	if (err == 0) {
		atomic_fetch_add(is_read ? &x->st.rma_reads : &x->st.rma_writes, 1);
		atomic_fetch_add(&x->st.rma_bytes, len);
	}
	return err;
}

int xprt_rma_read(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, void *local,
                  size_t len)
{
	return rma(r, remote, off, local, len, true);
}

int xprt_rma_write(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off,
                   const void *local, size_t len)
{
	return rma(r, remote, off, (void *)local, len, false);
}
