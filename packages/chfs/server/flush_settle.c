/*
 * flush_settle.c — a create at a path a rename left, when the rename's record is on another
 * server.
 *
 * A rename a -> b whose names have different owners leaves two records (flush_meta.c): at b's
 * owner the BM_RENAME that moves backend a to b (after a's data reached a), at a's owner a
 * BM_HIDE of a. A new file created at a before that rename reached the backend flushes its data
 * to backend a too — into the old file's bytes, which the rename then carries to b. So the
 * owner of a, about to create there with a BM_HIDE of a pending, first asks every other server
 * to apply what it has pending for a (WOP_META_SETTLE): b's owner moves backend a to b now and
 * relinks the old file (its chunks not yet flushed go to b, brelink_announce), and the new file
 * has a to itself. A server that cannot be asked (or that the failure detector finds down: not
 * called) is logged; its record is applied at the next sync as before.
 */
#define _GNU_SOURCE
#include "flush_meta.h"

#include "chfsd.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void not_reached(struct chfsd *d, const char *id, const char *addr, int rc, void *arg)
{
	(void)d;
	(void)id;
	log_err("backend rename away from %s: server %s not reached (%s); a new file there may share its "
	        "backend name until the next sync",
	        (const char *)arg, addr, strerror(-rc));
}

void bmeta_settle_peers(struct chfsd *d, const char *path)
{
	size_t cap = WIRE_HDR_LEN + CHFS_PATH_MAX + 16;
	uint8_t *msg = malloc(cap);
	struct wenc e;
	if (msg) {
		wenc_init(&e, msg, cap);
		chfsd_req_hdr(d, &e, WOP_META_SETTLE);
		wenc_str(&e, path);
	}
	if (!msg || chfsd_call_peers(d, &e, not_reached, (void *)path) != 0)
		log_err("backend rename away from %s: out of memory; applied at the next sync", path);
	free(msg);
}
