/*
 * dir_fence.c — the emptiness check of a directory that is about to lose its name (rmdir, a
 * rename of a directory away, a rename over an empty directory): WOP_DIR_EMPTY to every
 * server at once, each answering whether it holds an entry below the directory.
 *
 * The check also fences the directory on every server (WIRE_FENCE_SET; server/fence.c):
 * until the fence expires or is lifted, a server refuses with ENOENT any new name directly
 * below it whose client saw the directory with this file id. Without the fence, a client
 * creating below the directory — trusting its last lookup of it (namespace.c check_parent)
 * — could store an entry just after its server answered "empty", and the entry would stay
 * under a name nothing lists once the directory was gone. A removal that does not happen
 * (not empty, refused, failed) lifts the fence (WIRE_FENCE_LIFT), best effort: a lift that
 * is lost leaves creates below the directory waiting until the fence expires
 * (ns_parent_again, namespace.c).
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>

static int dir_empty_once(struct srvlist *s, const char *cp, uint64_t dirid, uint32_t fence,
                          unsigned *refused)
{
	struct rpc_fanout f;
	uint8_t *msg = malloc(WIRE_HDR_LEN + CHFS_PATH_MAX + 24);
	int rc = msg ? rpc_fanout_init(&f, s, WIRE_HDR_LEN + 16) : -ENOMEM;
	if (rc == 0) {
		struct wenc e;
		wenc_init(&e, msg, WIRE_HDR_LEN + CHFS_PATH_MAX + 24);
		wenc_reserve(&e, WIRE_HDR_LEN);
		wenc_str(&e, cp);
		wenc_u64(&e, dirid);
		wenc_u32(&e, fence);
		rc = rpc_fanout_call(s, &f, msg, e.len, WOP_DIR_EMPTY);
		*refused = rpc_multi_refused(f.idx, f.n, f.rcs);
		for (unsigned i = 0; rc == 0 && i < f.n; i++) {
			struct wdec d;
			rc = rpc_fanout_reply(&f, i, &d);
			if (rc == 0 && wdec_u32(&d))
				rc = 1;
			if (rc == 0 && d.err)
				rc = -EIO;
		}
		rpc_fanout_free(&f);
	}
	free(msg);
	return rc;
}

static int dir_empty(struct srvlist *s, const char *cp, uint64_t dirid, uint32_t fence)
{
	int rc = -ERESTART;
	for (int attempt = 0; attempt < CLIENT_RETRIES && rc == -ERESTART; attempt++) {
		unsigned refused = 0;
		if ((rc = dir_empty_once(s, cp, dirid, fence, &refused)) == -ERESTART)
			s = client_list_retry(s, refused, attempt);
	}
	return rpc_restart_failed(rc);
}

int ns_dir_fence(struct srvlist *s, const char *cp, uint64_t dirid)
{
	return dir_empty(s, cp, dirid, WIRE_FENCE_SET);
}

void ns_dir_unfence(struct srvlist *s, const char *cp, uint64_t dirid)
{
	dir_empty(s, cp, dirid, WIRE_FENCE_LIFT);
}
