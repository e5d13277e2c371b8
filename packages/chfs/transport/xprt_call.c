/*
 * xprt_call.c — the client side: message framing, sends, and calls matched to replies.
 *
 * A call gets a fresh 64-bit id, sits in the x->calls hash while in flight, and its request goes
 * out with the id and the caller's raw address in the header (the server inserts it into its
 * AV; no out-of-band address exchange). The reply carries the same id and lands in one of the
 * shared receive buffers; whoever read the completion takes the call out of the hash under
 * call_mu, copies the reply into the caller's buffer without the lock, then marks it done and
 * signals the caller. A caller that times out removes its call from the hash under the same
 * lock, so a late reply finds nothing and is dropped; a caller whose call was already taken out
 * waits the copy out — the caller's buffer is never touched after it returned.
 *
 * Caller-progress mode (a client xprt with CHFS_XPRT_CALLER_PROGRESS=1; off by default since a
 * clean-clone CI run lost a tcp reply with it under MPI):
 * the waiting callers read the CQ themselves instead of sleeping until the progress thread
 * hands them their reply — one thread hand-off less per call, two context switches less on a
 * lone caller. One waiter at a time is the poller (blocking in fi_cq_sread, or the shm poll and
 * doorbell loop); it dispatches every completion, its own and the other waiters' (who sleep on
 * their condition variable), and when its own reply came it passes the role to the next waiter.
 * The progress thread steps back while anyone waits (xprt_progress.c: progress_parked).
 *
 * Sends: messages up to the provider's inject size go out with fi_tinject (no completion);
 * larger ones are copied into a send operation owned by the transport until its completion, so
 * neither the caller's buffer nor its lifetime matters. -FI_EAGAIN (queue full, connection being
 * set up) is retried, kicking the progress thread, until the call's deadline.
 *
 * A call to a tcp peer still waiting after a short while checks that anyone listens at its
 * address at all, and again every second (xprt_reach.c): rxm would otherwise retry a refused
 * connection silently until the deadline — also to a server that died under the call.
 */
#include "xprt_local.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Header: magic u32 | version u8 | kind u8 | addrlen u16 | bodylen u32 | reserved u32 | id u64 */
void xprt_put_hdr(void *buf, const struct xprt_hdr *h)
{
	unsigned char *p = buf;
	memset(p, 0, XPRT_HDR_SIZE);
	put_le32(p, XPRT_WIRE_MAGIC);
	p[4] = XPRT_WIRE_VERSION;
	p[5] = (unsigned char)h->kind;
	p[6] = (unsigned char)h->addrlen;
	p[7] = (unsigned char)(h->addrlen >> 8);
	put_le32(p + 8, h->bodylen);
	put_le32(p + 16, (uint32_t)h->id);
	put_le32(p + 20, (uint32_t)(h->id >> 32));
}

int xprt_get_hdr(const void *buf, size_t len, struct xprt_hdr *h)
{
	const unsigned char *p = buf;
	if (len < XPRT_HDR_SIZE || get_le32(p) != XPRT_WIRE_MAGIC || p[4] != XPRT_WIRE_VERSION)
		return -EPROTO;
	h->kind = p[5];
	h->addrlen = (uint16_t)(p[6] | p[7] << 8);
	h->bodylen = get_le32(p + 8);
	h->id = get_le32(p + 16) | (uint64_t)get_le32(p + 20) << 32;
	if ((h->kind != XPRT_MSG_REQUEST && h->kind != XPRT_MSG_REPLY) ||
	    (h->kind == XPRT_MSG_REQUEST) != (h->addrlen > 0) || h->addrlen > XPRT_ADDR_MAX ||
	    h->bodylen > XPRT_MAX_BODY || (size_t)XPRT_HDR_SIZE + h->addrlen + h->bodylen != len)
		return -EPROTO;
	return 0;
}

int xprt_send_msg(xprt_t *x, xprt_peer_t *p, int kind, uint64_t id, const void *addr, size_t addrlen,
                  const void *body, size_t bodylen, const struct timespec *deadline)
{
	if (bodylen > XPRT_MAX_BODY)
		return -EMSGSIZE;
	fi_addr_t dest = xprt_peer_fi_addr(x, p);
	if (dest == FI_ADDR_NOTAVAIL)
		return -EHOSTUNREACH; /* shm: nobody serves that name now */
	size_t total = XPRT_HDR_SIZE + addrlen + bodylen;
	struct xprt_sendop *s = NULL;
	unsigned char small[4096];
	unsigned char *msg = small;
	bool inject = total <= x->inject_size && total <= sizeof small;
	if (!inject) {
		s = malloc(sizeof *s + total);
		if (!s)
			return -ENOMEM;
		s->op.kind = XPRT_OP_SEND;
		s->call_id = kind == XPRT_MSG_REQUEST ? id : 0;
		s->len = total;
		msg = (unsigned char *)s->data;
	}
	struct xprt_hdr h = {kind, (uint16_t)addrlen, (uint32_t)bodylen, id};
	xprt_put_hdr(msg, &h);
	if (addrlen)
		memcpy(msg + XPRT_HDR_SIZE, addr, addrlen);
	if (bodylen)
		memcpy(msg + XPRT_HDR_SIZE + addrlen, body, bodylen);
	if (s) {
		pthread_mutex_lock(&x->send_mu);
		s->prev = NULL;
		s->next = x->sends;
		if (x->sends)
			x->sends->prev = s;
		x->sends = s;
		pthread_mutex_unlock(&x->send_mu);
	}
	/* A request: while rxm keeps the send pending (connecting), check after a short while, and
	 * then every second, that anyone listens there at all (xprt_reach.c). */
	bool probe = kind == XPRT_MSG_REQUEST && xprt_reach_applies(x, p);
	struct timespec probe_at;
	xprt_deadline(&probe_at, xprt_reach_first_ms(p));
	for (unsigned spins = 0;; spins++) {
		ssize_t rc = inject ? fi_inject(x->ep, msg, total, dest)
		                    : fi_send(x->ep, msg, total, NULL, dest, &s->op);
		if (rc == 0)
			break;
		if (rc == -FI_EAGAIN && probe && xprt_past(&probe_at)) {
			xprt_deadline(&probe_at, XPRT_REACH_AGAIN_MS);
			int r = xprt_reach_probe(p, XPRT_REACH_PROBE_MS);
			if (r < 0)
				rc = r; /* an errno value, as libfabric's codes below FI_ERRNO_OFFSET */
		}
		if (rc != -FI_EAGAIN || xprt_past(deadline)) {
			if (s) {
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
			return rc == -FI_EAGAIN ? -ETIMEDOUT : xprt_fi_err((int)rc);
		}
		xprt_kick(x, p);
		/* The queue frees up (and rxm connects) only as the CQ is read; the thread that
		 * would read it may be this one, or nobody while a client's callers are busy. */
		if (xprt_tls_polling || x->caller_progress)
			xprt_poll_cq(x, -1);
		if (spins < 16)
			sched_yield();
		else
			usleep(spins < 256 ? 10 : 1000);
	}
	xprt_kick(x, p);
	return 0;
}

void xprt_sends_free(xprt_t *x)
{
	while (x->sends) {
		struct xprt_sendop *s = x->sends;
		x->sends = s->next;
		free(s);
	}
}

/* Post receive buffers until `want` are posted (growing in doublings, up to XPRT_NBUFS_MAX). */
int xprt_grow_bufs(xprt_t *x, int want)
{
	int rc = 0;
	if (want > XPRT_NBUFS_MAX)
		want = XPRT_NBUFS_MAX;
	pthread_mutex_lock(&x->bufs_mu);
	int n = x->nbufs;
	if (want > n) {
		int cap = want < 2 * n ? 2 * n : want;
		if (cap > XPRT_NBUFS_MAX)
			cap = XPRT_NBUFS_MAX;
		struct xprt_rbuf **a = realloc(x->bufs, (size_t)cap * sizeof *a);
		if (!a)
			rc = -ENOMEM;
		else
			x->bufs = a;
		while (!rc && n < cap) {
			struct xprt_rbuf *b = malloc(sizeof *b);
			if (!b) {
				rc = -ENOMEM;
				break;
			}
			b->op.kind = XPRT_OP_RECV;
			b->slot = n;
			x->bufs[n] = b;
			rc = xprt_post_recv(x, b);
			if (rc < 0) {
				free(b);
				break;
			}
			n++;
		}
		x->nbufs = n;
	}
	pthread_mutex_unlock(&x->bufs_mu);
	return rc;
}

/* ---- the call table (x->call_mu held) ---- */

static void call_insert(xprt_t *x, struct xprt_call *c)
{
	struct xprt_call **b = &x->calls[c->id % XPRT_HASH];
	c->next = *b;
	*b = c;
}

static struct xprt_call *call_remove(xprt_t *x, uint64_t id)
{
	for (struct xprt_call **pp = &x->calls[id % XPRT_HASH]; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			struct xprt_call *c = *pp;
			*pp = c->next;
			return c;
		}
	return NULL;
}

static _Thread_local struct xprt_call *tls_poll_call; /* the call this thread polls for */

void xprt_call_deliver(xprt_t *x, uint64_t id, const void *body, size_t len, int err)
{
	pthread_mutex_lock(&x->call_mu);
	struct xprt_call *c = call_remove(x, id);
	pthread_mutex_unlock(&x->call_mu);
	if (!c)
		return;
	/* Out of the hash, not done: its caller waits for us, so the copy needs no lock. */
	int result = err;
	if (!err) {
		result = len > c->repcap ? -EMSGSIZE : 0;
		if (len)
			memcpy(c->rep, body, len > c->repcap ? c->repcap : len);
		atomic_fetch_add(&x->st.replies, 1);
		atomic_store(&c->peer->answered, true);
	}
	pthread_mutex_lock(&x->call_mu);
	if (!err)
		c->replen = len;
	c->result = result;
	c->done = true;
	pthread_cond_signal(&c->cv);
	if (atomic_load(&x->poller) == c && tls_poll_call != c)
		xprt_wake_poller(x); /* it may sleep in the CQ, not on its cv */
	pthread_mutex_unlock(&x->call_mu);
}

void xprt_call_fail_peer(xprt_t *x, xprt_peer_t *p, int err)
{
	for (;;) {
		uint64_t id = 0;
		pthread_mutex_lock(&x->call_mu);
		for (int i = 0; i < XPRT_HASH && !id; i++)
			for (struct xprt_call *c = x->calls[i]; c && !id; c = c->next)
				if (c->peer == p)
					id = c->id;
		pthread_mutex_unlock(&x->call_mu);
		if (!id)
			return;
		xprt_call_deliver(x, id, NULL, 0, err);
	}
}

static int send_request(xprt_t *x, struct xprt_call *c, const void *req, size_t reqlen)
{
	return c->peer->local ? xprt_local_send_request(x, c->peer, c->id, req, reqlen, &c->deadline)
	                      : xprt_send_msg(x, c->peer, XPRT_MSG_REQUEST, c->id, x->self_raw,
	                                      x->self_rawlen, req, reqlen, &c->deadline);
}

static int call_begin(xprt_t *x, struct xprt_call *c, xprt_peer_t *p, const void *req, size_t reqlen,
                      void *rep, size_t repcap, int timeout_ms)
{
	if (!x || !p || (!req && reqlen) || (!rep && repcap))
		return -EINVAL;
	if (reqlen > XPRT_MAX_BODY)
		return -EMSGSIZE;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->x = x;
	c->rep = rep;
	c->repcap = repcap;
	c->timeout_ms = timeout_ms;
	c->id = atomic_fetch_add(&x->next_id, 1);
	xprt_deadline(&c->deadline, timeout_ms);
	/* A local peer connects on first use, or hands the call to libfabric (xprt_local.c). */
	xprt_peer_t *via = p;
	int rc = p->local ? xprt_local_route(x, p, &c->deadline, &via) : 0;
	c->peer = via;
	xprt_deadline(&c->probe_at, xprt_reach_first_ms(via));
	int want = x->nbufs_base + atomic_fetch_add(&x->calls_in_flight, 1) + 1;
	if (!via->local && want > x->nbufs)
		xprt_grow_bufs(x, want);
	pthread_mutex_lock(&x->call_mu);
	call_insert(x, c);
	pthread_mutex_unlock(&x->call_mu);
	atomic_fetch_add(&x->st.calls, 1);
	if (rc == 0)
		rc = send_request(x, c, req, reqlen);
	if (rc == -ECONNRESET) {
		/* The node-local connection had ended while no call waited on it (nobody read its
		 * end), and nothing was sent: route once more — connect again, or libfabric if the
		 * server at that address no longer publishes a socket. */
		rc = xprt_local_route(x, p, &c->deadline, &via);
		if (rc == 0) {
			pthread_mutex_lock(&x->call_mu);
			c->peer = via;
			pthread_mutex_unlock(&x->call_mu);
			if (!via->local && want > x->nbufs)
				xprt_grow_bufs(x, want);
			rc = send_request(x, c, req, reqlen);
		}
		if (rc == -ECONNRESET)
			rc = -EHOSTUNREACH;
	}
	if (rc < 0) {
		pthread_mutex_lock(&x->call_mu);
		if (call_remove(x, c->id)) {
			c->result = rc;
			c->done = true;
		}
		pthread_mutex_unlock(&x->call_mu);
		if (rc == -ETIMEDOUT)
			atomic_fetch_add(&x->st.timeouts, 1);
	}
	return 0;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Milliseconds left until ts (0 if past). */
static int ms_until(const struct timespec *ts)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long ms = (long long)(ts->tv_sec - now.tv_sec) * 1000 + (ts->tv_nsec - now.tv_nsec) / 1000000;
	return ms <= 0 ? 0 : ms > 1 << 30 ? 1 << 30 : (int)ms;
}

/* The call is still waiting: if nobody listens at its peer's address, fail the call now instead
 * of at its deadline, else look again a second later (xprt_reach.c). Called with call_mu held;
 * whether to probe again. */
static bool call_check_reach(xprt_t *x, struct xprt_call *c)
{
	int left = ms_until(&c->deadline);
	pthread_mutex_unlock(&x->call_mu);
	int rc = xprt_reach_probe(c->peer, left < XPRT_REACH_PROBE_MS ? left : XPRT_REACH_PROBE_MS);
	pthread_mutex_lock(&x->call_mu);
	if (rc < 0 && !c->done && call_remove(x, c->id)) {
		c->result = rc;
		c->done = true;
	}
	xprt_deadline(&c->probe_at, XPRT_REACH_AGAIN_MS);
	return ts_before(&c->probe_at, &c->deadline);
}

/* The call timed out (call_mu held): fail it, unless a reply is being copied into it. */
static void call_timeout(xprt_t *x, struct xprt_call *c)
{
	if (!call_remove(x, c->id)) {
		while (!c->done) /* taken out by a deliverer: done within a copy */
			pthread_cond_wait(&c->cv, &x->call_mu);
		return;
	}
	c->result = -ETIMEDOUT;
	c->done = true;
	atomic_fetch_add(&x->st.timeouts, 1);
}

/* A list of waiting calls (wnext/wprev, call_mu held): x->waitq, or a local connection's. */
static void wlist_add(struct xprt_call **head, struct xprt_call *c)
{
	c->wprev = NULL;
	c->wnext = *head;
	if (*head)
		(*head)->wprev = c;
	*head = c;
}

static void wlist_remove(struct xprt_call **head, struct xprt_call *c)
{
	if (c->wprev)
		c->wprev->wnext = c->wnext;
	else
		*head = c->wnext;
	if (c->wnext)
		c->wnext->wprev = c->wprev;
}

static void waitq_add(xprt_t *x, struct xprt_call *c)
{
	wlist_add(&x->waitq, c);
	x->waiters++;
}

static void waitq_remove(xprt_t *x, struct xprt_call *c)
{
	wlist_remove(&x->waitq, c);
	x->waiters--;
}

/* Caller-progress wait (call_mu held): poll the CQ while nobody else does, else sleep until
 * the reply, the turn to poll, or the deadline. */
static void call_wait_polling(xprt_t *x, struct xprt_call *c, bool probe)
{
	waitq_add(x, c);
	while (!c->done) {
		const struct timespec *until = probe ? &c->probe_at : &c->deadline;
		if (!atomic_load(&x->poller)) {
			atomic_store(&x->poller, c);
			if (x->progress_in_cq)
				fi_cq_signal(x->cq); /* it holds the CQ in fi_cq_sread: let go */
			pthread_mutex_unlock(&x->call_mu);
			xprt_tls_polling = 1;
			tls_poll_call = c;
			bool got = xprt_poll_until(x, &c->done, until);
			tls_poll_call = NULL;
			xprt_tls_polling = 0;
			pthread_mutex_lock(&x->call_mu);
			atomic_store(&x->poller, NULL);
			if (got || c->done || !xprt_past(until))
				continue;
		} else if (pthread_cond_timedwait(&c->cv, &x->call_mu, until) != ETIMEDOUT || c->done) {
			continue;
		}
		if (probe) {
			probe = call_check_reach(x, c);
		} else {
			call_timeout(x, c);
		}
	}
	waitq_remove(x, c);
	x->calls_recent = true;
	if (!atomic_load(&x->poller) && x->waitq)
		pthread_cond_signal(&x->waitq->cv); /* the next waiter polls */
	/* The progress thread is not woken: it looks again on its own (xprt_progress.c). */
}

/* A call on a node-local connection (call_mu held): read the connection's replies while no
 * other waiter does (xprt_local_read_replies delivers every reply, ours included), else sleep
 * until our reply, the turn to read, or the deadline. */
static void call_wait_local(xprt_t *x, struct xprt_call *c)
{
	struct xprt_lconn *lc = c->peer->local;
	wlist_add(&lc->waitq, c);
	while (!c->done) {
		if (!lc->reading) {
			lc->reading = true;
			pthread_mutex_unlock(&x->call_mu);
			xprt_local_read_replies(x, lc, &c->done, &c->deadline);
			pthread_mutex_lock(&x->call_mu);
			lc->reading = false;
			if (c->done || !xprt_past(&c->deadline))
				continue;
		} else if (pthread_cond_timedwait(&c->cv, &x->call_mu, &c->deadline) != ETIMEDOUT ||
		           c->done) {
			continue;
		}
		call_timeout(x, c);
	}
	wlist_remove(&lc->waitq, c);
	if (!lc->reading && lc->waitq)
		pthread_cond_signal(&lc->waitq->cv); /* the next waiter reads */
}

static int call_finish(struct xprt_call *c, size_t *replen)
{
	xprt_t *x = c->x;
	bool local = c->peer->local != NULL; /* its replies come from a socket, not the CQ */
	bool probe = !local && xprt_reach_applies(x, c->peer) && ts_before(&c->probe_at, &c->deadline);
	if (!x->caller_progress && !local)
		xprt_poll_before_wait(x, &c->done);
	pthread_mutex_lock(&x->call_mu);
	if (x->caller_progress && !local)
		call_wait_polling(x, c, probe);
	if (local)
		call_wait_local(x, c);
	while (!c->done) {
		const struct timespec *until = probe ? &c->probe_at : &c->deadline;
		if (pthread_cond_timedwait(&c->cv, &x->call_mu, until) != ETIMEDOUT || c->done)
			continue;
		if (probe) {
			probe = call_check_reach(x, c);
		} else {
			call_timeout(x, c);
		}
	}
	pthread_mutex_unlock(&x->call_mu);
	if (c->result == -ETIMEDOUT)
		xprt_peer_check(x, c->peer);
	atomic_fetch_sub(&x->calls_in_flight, 1);
	if (replen)
		*replen = c->replen;
	pthread_cond_destroy(&c->cv);
	return c->result;
}

int xprt_call(xprt_t *x, xprt_peer_t *p, const void *req, size_t reqlen, void *rep, size_t repcap,
              size_t *replen, int timeout_ms)
{
	struct xprt_call c = {0};
	int rc = call_begin(x, &c, p, req, reqlen, rep, repcap, timeout_ms);
	if (rc < 0)
		return rc;
	return call_finish(&c, replen);
}

int xprt_call_start(xprt_t *x, xprt_peer_t *p, const void *req, size_t reqlen, void *rep, size_t repcap,
                    int timeout_ms, xprt_call_t **out)
{
	if (!out)
		return -EINVAL;
	struct xprt_call *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	int rc = call_begin(x, c, p, req, reqlen, rep, repcap, timeout_ms);
	if (rc < 0) {
		free(c);
		return rc;
	}
	c->heap = true;
	*out = c;
	return 0;
}

int xprt_call_wait(xprt_call_t *c, size_t *replen)
{
	int rc = call_finish(c, replen);
	free(c);
	return rc;
}
