/*
 * rpc.c — one request/reply exchange with one server.
 *
 * Requests are built with the wire encoder behind a reserved header; rpc_call() fills the header
 * (op, request id, pool secret, body length), sends through the transport with the configured
 * timeout and decodes the reply header. Transport failures (timeout, unreachable, refused) become
 * EIO with one log line naming the server; a refused secret becomes EACCES with a line saying so.
 * A struct rpc's buffers are malloc'd by rpc_begin and freed by rpc_end (RPC_DECL's cleanup):
 * 35 KB per request is too much for small thread stacks, and malloc costs far less than the
 * round trip.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rpc_restart_failed(int rc)
{
	if (rc == -ERESTART) {
		log_err("the pool's member list keeps changing: giving up after %d attempts", CLIENT_RETRIES);
		return -EIO;
	}
	return rc;
}

int rpc_timeout(void)
{
	int t = chfs_client.cfg.rpc_timeout_msec;
	return t > 0 ? t : -1;
}

void rpc_begin(struct rpc *r, unsigned op)
{
	if (!r->mem)
		r->mem = malloc(2 * RPC_SMALL);
	r->buf = r->mem;
	r->rep = r->mem ? r->mem + RPC_SMALL : NULL;
	r->repcap = r->mem ? RPC_SMALL : 0;
	/* Without buffers the encoder has no room: every put fails, nothing is written. */
	wenc_init(&r->e, r->buf, r->repcap);
	uint8_t *h = wenc_reserve(&r->e, WIRE_HDR_LEN);
	if (h) {
		h[6] = (uint8_t)op;
		h[7] = (uint8_t)(op >> 8);
	}
}

void rpc_end(struct rpc *r)
{
	free(r->mem);
	r->mem = NULL;
}

void rpc_fill_hdr(uint8_t *msg, size_t len, unsigned op, uint64_t epoch)
{
	struct wire_hdr h = {.epoch = epoch,
	                     .magic = WIRE_MAGIC,
	                     .version = WIRE_VERSION,
	                     .op = (uint16_t)op,
	                     .reqid = (uint64_t)atomic_load(&chfs_client.lease_id) << 32 |
	                              (uint32_t)atomic_fetch_add(&chfs_client.reqid, 1),
	                     .body_len = (uint32_t)(len - WIRE_HDR_LEN)};
	memcpy(h.secret, chfs_client.secret, CHFS_SECRET_LEN);
	wire_hdr_put(msg, &h);
}

int rpc_status(struct srvlist *s, unsigned idx, int xrc, const uint8_t *rep, size_t replen, struct wdec *body)
{
	const char *addr = s->addrs[idx];
	if (xrc == -EMSGSIZE)
		return -EIO;
	if (xrc == -EHOSTDOWN) {
		log_err("server %s is down (reported by the pool's failure detector)", addr);
		return -EIO;
	}
	/* No reply, or nobody listens there any more (xprt_reach.c): the next call fetches the
	 * member list, which says a server found dead is down (failing its calls at once). */
	if (xrc == -ETIMEDOUT || xrc == -ECONNREFUSED || xrc == -EHOSTUNREACH || xrc == -ENETUNREACH)
		client_list_stale();
	if (xrc < 0 && client_cached_list_failed(s, idx, xrc))
		return -ERESTART;
	if (xrc < 0) {
		if (xrc == -ETIMEDOUT)
			log_err("server %s: no reply within %d ms (down, or the pool secret differs: "
			        "CHFS_SECRET_FILE=%s)",
			        addr, chfs_client.cfg.rpc_timeout_msec, chfs_client.cfg.secret_file);
		else
			log_err("server %s unreachable: %s", addr, strerror(-xrc));
		return xrc == -ENOMEM ? -ENOMEM : -EIO;
	}
	struct wire_hdr h;
	if (wire_hdr_get(rep, replen, &h) != 0 || !(h.op & WIRE_REPLY)) {
		log_err("server %s: malformed reply", addr);
		return -EIO;
	}
	if (h.status == WIRE_ERETRY)
		return -ERESTART;
	if (h.status == WIRE_ELINKED)
		return WIRE_ELINKED; /* a SETATTR of a linked file's name: its caller asks the inode */
	if (h.epoch > s->epoch)
		client_list_stale(); /* the pool changed: fetch the list on the next call */
	if (h.status == -EACCES)
		log_err("server %s refused the request: wrong or missing pool secret (CHFS_SECRET_FILE=%s)",
		        addr, chfs_client.cfg.secret_file);
	if (h.status > 0 || h.status < -4095)
		return -EIO;
	if (h.status)
		return h.status;
	if (body)
		wdec_init(body, rep + WIRE_HDR_LEN, replen - WIRE_HDR_LEN);
	return 0;
}

int rpc_call(struct srvlist *s, unsigned idx, struct rpc *r)
{
	if (!r->mem)
		return -ENOMEM;
	if (r->e.err)
		return r->e.err == -EMSGSIZE ? -ENAMETOOLONG : r->e.err;
	unsigned op = (unsigned)r->buf[6] | (unsigned)r->buf[7] << 8;
	rpc_fill_hdr(r->buf, r->e.len, op, s->epoch);
	int xrc = client_server_down(s, idx) ? -EHOSTDOWN
	                                     : xprt_call(chfs_client.x, s->peers[idx], r->buf, r->e.len,
	                                                 r->rep, r->repcap, &r->replen, rpc_timeout());
	return rpc_status(s, idx, xrc, r->rep, r->replen, &r->d);
}

int rpc_call_path(struct srvlist *s, const char *p, struct rpc *r) { return rpc_call_path_by(s, p, r, NULL); }

int rpc_call_path_by(struct srvlist *s, const char *p, struct rpc *r, const char **by)
{
	int rc = -ERESTART;
	for (int attempt = 0; attempt < CLIENT_RETRIES && rc == -ERESTART; attempt++) {
		unsigned idx = placement_owner(s->ring, p);
		if ((rc = rpc_call(s, idx, r)) == -ERESTART)
			s = client_list_retry(s, idx, attempt);
		else if (by)
			*by = s->addrs[idx]; /* lists live until chfs_term */
	}
	return rpc_restart_failed(rc);
}

unsigned rpc_multi_refused(const unsigned *idx, unsigned n, const int *rc)
{
	for (unsigned i = 0; i < n; i++)
		if (rc[i] == -ERESTART)
			return idx[i];
	return n ? idx[0] : 0;
}

int rpc_multi(struct srvlist *s, const unsigned *idx, unsigned n, uint8_t *msg, size_t len, unsigned op,
              uint8_t *reps, size_t cap, size_t *replen, int *rc)
{
	xprt_call_t **calls = calloc(n ? n : 1, sizeof *calls);
	if (!calls)
		return -ENOMEM;
	rpc_fill_hdr(msg, len, op, s->epoch);
	for (unsigned i = 0; i < n; i++) {
		rc[i] = client_server_down(s, idx[i])
		                ? -EHOSTDOWN
		                : xprt_call_start(chfs_client.x, s->peers[idx[i]], msg, len, reps + i * cap,
		                                  cap, rpc_timeout(), &calls[i]);
		if (rc[i])
			calls[i] = NULL;
	}
	int first = 0;
	for (unsigned i = 0; i < n; i++) {
		if (calls[i])
			rc[i] = xprt_call_wait(calls[i], &replen[i]);
		rc[i] = rpc_status(s, idx[i], rc[i], reps + i * cap, calls[i] ? replen[i] : 0, NULL);
		if (rc[i] && !first)
			first = rc[i];
	}
	free(calls);
	return first;
}

int rpc_fanout_init(struct rpc_fanout *f, const struct srvlist *s, size_t cap)
{
	unsigned n = s->n ? s->n : 1;
	*f = (struct rpc_fanout){.n = s->n, .cap = cap};
	f->idx = malloc(n * sizeof *f->idx);
	f->reps = malloc(n * cap);
	f->rl = calloc(n, sizeof *f->rl);
	f->rcs = calloc(n, sizeof *f->rcs);
	if (!f->idx || !f->reps || !f->rl || !f->rcs) {
		rpc_fanout_free(f);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < s->n; i++)
		f->idx[i] = i;
	return 0;
}

void rpc_fanout_free(struct rpc_fanout *f)
{
	free(f->idx);
	free(f->reps);
	free(f->rl);
	free(f->rcs);
	*f = (struct rpc_fanout){0};
}

int rpc_fanout_call(struct srvlist *s, struct rpc_fanout *f, uint8_t *msg, size_t len, unsigned op)
{
	return rpc_multi(s, f->idx, f->n, msg, len, op, f->reps, f->cap, f->rl, f->rcs);
}

int rpc_fanout_reply(const struct rpc_fanout *f, unsigned i, struct wdec *d)
{
	if (f->rcs[i])
		return f->rcs[i];
	if (f->rl[i] < WIRE_HDR_LEN)
		return -EIO;
	wdec_init(d, f->reps + i * f->cap + WIRE_HDR_LEN, f->rl[i] - WIRE_HDR_LEN);
	return 0;
}
