/*
 * nodelist.c — see nodelist.h.
 */
#include "nodelist.h"

#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int nodelist_fetch(xprt_t *x, const char *addr, const uint8_t secret[CHFS_SECRET_LEN], int timeout_ms,
                   const char *join_id, const char *join_addr, struct nodelist *out)
{
	uint8_t req[WIRE_HDR_LEN + WIRE_ID_LEN + WIRE_ADDR_MAX + 16];
	size_t cap = WIRE_HDR_LEN + WIRE_LIST_MAX + 64, rl;
	unsigned op = join_id ? WOP_JOIN : WOP_NODE_LIST;
	struct wenc e;
	wenc_init(&e, req, sizeof req);
	wenc_reserve(&e, WIRE_HDR_LEN);
	if (join_id) {
		wenc_str(&e, join_id);
		wenc_str(&e, join_addr);
	}
	if (e.err)
		return -EINVAL;
	struct wire_hdr h = {.magic = WIRE_MAGIC,
	                     .version = WIRE_VERSION,
	                     .op = (uint16_t)op,
	                     .body_len = (uint32_t)(e.len - WIRE_HDR_LEN)};
	memcpy(h.secret, secret, CHFS_SECRET_LEN);
	wire_hdr_put(req, &h);
	xprt_peer_t *p;
	int rc = xprt_connect(x, addr, &p);
	if (rc)
		return rc == -ENOMEM ? rc : -ENOTCONN;
	uint8_t *rep = malloc(cap);
	if (!rep)
		return -ENOMEM;
	int xrc = xprt_call(x, p, req, e.len, rep, cap, &rl, timeout_ms);
	if (xrc) {
		rc = nodelist_no_answer(xrc) ? xrc : -ENOTCONN;
	} else if (wire_hdr_get(rep, rl, &h) || h.op != (WIRE_REPLY | op)) {
		rc = -EIO;
	} else if (h.status) {
		rc = h.status;
	} else {
		struct wire_listinfo li;
		rc = wire_list_get(rep + WIRE_HDR_LEN, rl - WIRE_HDR_LEN, &li) ? -EIO : 0;
		out->list = out->down = out->prev = NULL;
		if (rc == 0) {
			out->epoch = li.epoch;
			out->vnodes = li.vnodes;
			out->ring_epoch = li.ring_epoch;
			out->len = li.nlist;
			out->ndown = li.ndown;
			out->nprev = li.nprev;
			if (!(out->list = strndup(li.list, li.nlist)) ||
			    !(out->down = strndup(li.down, li.ndown)) ||
			    !(out->prev = strndup(li.prev, li.nprev))) {
				nodelist_free(out);
				rc = -ENOMEM;
			}
		}
	}
	free(rep);
	return rc;
}

void nodelist_free(struct nodelist *l)
{
	free(l->list);
	free(l->down);
	free(l->prev);
	l->list = l->down = l->prev = NULL;
}
