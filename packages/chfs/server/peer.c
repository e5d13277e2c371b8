/*
 * peer.c — one server-to-server call: header with the pool secret and this server's epoch,
 * bounded by the timeout, reply header and status checked; and the same request to every other
 * member, skipping those the failure detector finds down (their timeout would only stall the
 * caller).
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

int chfsd_call(struct chfsd *d, const char *addr, struct wenc *e, uint8_t *rep, size_t cap, struct wdec *body,
               int timeout_ms)
{
	if (e->err)
		return -EINVAL;
	struct wire_hdr h;
	/* Fill body length and epoch into the header chfsd_req_hdr reserved. */
	uint8_t *p = e->p;
	uint32_t n = (uint32_t)(e->len - WIRE_HDR_LEN);
	uint64_t ep = members_epoch(&d->mem);
	for (int i = 0; i < 4; i++)
		p[48 + i] = (uint8_t)(n >> (8 * i));
	for (int i = 0; i < 8; i++)
		p[56 + i] = (uint8_t)(ep >> (8 * i));
	xprt_peer_t *peer;
	size_t rl;
	int rc = xprt_connect(d->x, addr, &peer);
	if (rc == 0)
		rc = xprt_call(d->x, peer, e->p, e->len, rep, cap, &rl, timeout_ms);
	if (rc)
		return rc == -ENOMEM || rc == -EMSGSIZE ? rc
		                                        : -ENOTCONN; /* (EMSGSIZE: ours, not the link's) */
	if (wire_hdr_get(rep, rl, &h) != 0 || !(h.op & WIRE_REPLY))
		return -EIO;
	if (h.status)
		return h.status;
	if (body)
		wdec_init(body, rep + WIRE_HDR_LEN, rl - WIRE_HDR_LEN);
	return 0;
}

int chfsd_call_peers(struct chfsd *d, struct wenc *e, chfsd_peer_failed_fn failed, void *arg)
{
	char *list = malloc(WIRE_LIST_MAX);
	if (!list)
		return -ENOMEM;
	uint8_t rep[WIRE_HDR_LEN + 16];
	unsigned vnodes;
	members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
	for (char *sv = NULL, *ent = strtok_r(list, ",", &sv); ent; ent = strtok_r(NULL, ",", &sv)) {
		const char *a = ent + WIRE_ID_LEN + 1;
		ent[WIRE_ID_LEN] = '\0';
		if (strcmp(a, d->self) == 0)
			continue;
		int rc = members_is_down(&d->mem, ent)
		                 ? -EHOSTDOWN
		                 : chfsd_call(d, a, e, rep, sizeof rep, NULL, d->timeout_ms);
		if (rc && failed)
			failed(d, ent, a, rc, arg);
	}
	free(list);
	return 0;
}
