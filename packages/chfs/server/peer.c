/*
 * peer.c — one server-to-server call: header with the pool secret and this server's epoch,
 * bounded by the timeout, reply header and status checked; and the same request to every other
 * member at once (all calls started, then all waited for), skipping those the failure detector
 * finds down: a member that hangs costs the caller one timeout, and delays no other member.
 */
#define _GNU_SOURCE
#include "chfsd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void chfsd_req_hdr(struct chfsd *d, struct wenc *e, unsigned op)
{
	struct wire_hdr h = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .op = (uint16_t)op};
	memcpy(h.secret, d->secret, CHFS_SECRET_LEN);
	wenc_reserve(e, WIRE_HDR_LEN);
	wire_hdr_put(e->p, &h);
}

/* Fill body length and this server's epoch into the header chfsd_req_hdr reserved. */
static void fill_hdr(struct chfsd *d, struct wenc *e)
{
	uint8_t *p = e->p;
	uint32_t n = (uint32_t)(e->len - WIRE_HDR_LEN);
	uint64_t ep = members_epoch(&d->mem);
	for (int i = 0; i < 4; i++)
		p[48 + i] = (uint8_t)(n >> (8 * i));
	for (int i = 0; i < 8; i++)
		p[56 + i] = (uint8_t)(ep >> (8 * i));
}

/* The outcome of a call that ended with transport status rc and reply rep[0..rl). */
static int reply_status(int rc, const uint8_t *rep, size_t rl, struct wdec *body)
{
	struct wire_hdr h;
	if (rc)
		return rc == -ENOMEM ? rc : -ENOTCONN;
	if (wire_hdr_get(rep, rl, &h) != 0 || !(h.op & WIRE_REPLY))
		return -EIO;
	if (h.status)
		return h.status;
	if (body)
		wdec_init(body, rep + WIRE_HDR_LEN, rl - WIRE_HDR_LEN);
	return 0;
}

int chfsd_call(struct chfsd *d, const char *addr, struct wenc *e, uint8_t *rep, size_t cap, struct wdec *body,
               int timeout_ms)
{
	if (e->err)
		return -EINVAL;
	fill_hdr(d, e);
	xprt_peer_t *peer;
	size_t rl = 0;
	int rc = xprt_connect(d->x, addr, &peer);
	if (rc == 0)
		rc = xprt_call(d->x, peer, e->p, e->len, rep, cap, &rl, timeout_ms);
	return reply_status(rc, rep, rl, body);
}

/* Reply room per member of chfsd_call_peers (its requests have no reply body). */
#define PEER_REP (WIRE_HDR_LEN + 16)

int chfsd_call_peers(struct chfsd *d, struct wenc *e, chfsd_peer_failed_fn failed, void *arg)
{
	if (e->err)
		return -EINVAL;
	char *list = malloc(WIRE_LIST_MAX);
	unsigned vnodes, n = 0;
	if (list)
		members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
	for (const char *c = list; c && *c; c++)
		n += *c == ',';
	const char **addrs = calloc(n + 1, sizeof *addrs);
	xprt_call_t **calls = calloc(n + 1, sizeof *calls);
	int *rcs = calloc(n + 1, sizeof *rcs);
	uint8_t *reps = malloc((n + 1) * PEER_REP);
	if (!list || !addrs || !calls || !rcs || !reps) {
		free(list);
		free(addrs);
		free(calls);
		free(rcs);
		free(reps);
		return -ENOMEM;
	}
	fill_hdr(d, e);
	/* Every call is started before any is waited for: a member that does not answer costs one
	 * timeout in all, not one before each member after it. */
	unsigned k = 0;
	for (char *sv = NULL, *ent = strtok_r(list, ",", &sv); ent && k <= n;
	     ent = strtok_r(NULL, ",", &sv)) {
		const char *a = ent + WIRE_ID_LEN + 1;
		ent[WIRE_ID_LEN] = '\0';
		if (strcmp(a, d->self) == 0)
			continue;
		xprt_peer_t *peer;
		addrs[k] = a;
		rcs[k] = members_is_down(&d->mem, ent) ? -EHOSTDOWN : xprt_connect(d->x, a, &peer);
		if (rcs[k] == 0)
			rcs[k] = xprt_call_start(d->x, peer, e->p, e->len, reps + k * PEER_REP, PEER_REP,
			                         d->timeout_ms, &calls[k]);
		k++;
	}
	for (unsigned i = 0; i < k; i++) {
		size_t rl = 0;
		int rc = rcs[i];
		if (rc == 0) {
			int w = xprt_call_wait(calls[i], &rl); /* (sets rl: not inside the call below) */
			rc = reply_status(w, reps + i * PEER_REP, rl, NULL);
		} else if (rc != -EHOSTDOWN)
			rc = reply_status(rc, NULL, 0, NULL);
		if (rc && failed)
			failed(d, addrs[i], rc, arg);
	}
	free(list);
	free(addrs);
	free(calls);
	free(rcs);
	free(reps);
	return 0;
}
