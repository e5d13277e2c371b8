/*
 * stagein.c — chfs_stagein: copy a backend file (chfsd -b) into CHFS ahead of its use.
 *
 * Two steps. The owner of the path makes the backend file a CHFS entry if it is not one yet
 * (WOP_STAGE_ENTRY, with this client's chunk size, so `chstagein -c` chooses it); then every
 * server is sent one WOP_STAGE_DATA concurrently and fetches, from the backend file, the chunks
 * of it that it owns and does not hold yet — the data never passes through the client, and no
 * server reads more than its share. A directory or symlink needs nothing (lookups and readdir
 * read through), nor does a file CHFS already has that did not come from the backend.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static atomic_uint piece_size; /* chfs_set_stagein_buf_size; 0 = the server's default */

unsigned stagein_piece(void) { return atomic_load(&piece_size); }

void chfs_set_stagein_buf_size(int v)
{
	if (v >= 0)
		atomic_store(&piece_size, (unsigned)v);
}

static int stage_entry(struct srvlist *s, const char *cp, struct chfs_md *md)
{
	RPC_DECL(r);
	rpc_begin(&r, WOP_STAGE_ENTRY);
	wenc_str(&r.e, cp);
	wenc_u32(&r.e, chfs_client.cfg.chunk_size);
	int rc = rpc_call_path(s, cp, &r);
	if (rc == 0) {
		wdec_md(&r.d, md);
		if (wdec_finish(&r.d))
			rc = -EIO;
	}
	return rc;
}

/* One STAGE_DATA to every server; -ERESTART if one's member list is newer (*refused: which). */
static int stage_data_once(struct srvlist *s, const struct chfs_md *md, unsigned *refused)
{
	size_t len = WIRE_HDR_LEN + 64 + strlen(md->link);
	struct rpc_fanout f;
	uint8_t *msg = malloc(len);
	int rc = msg ? rpc_fanout_init(&f, s, WIRE_HDR_LEN + 64) : -ENOMEM;
	if (rc == 0) {
		struct wenc e;
		wenc_init(&e, msg, len);
		wenc_reserve(&e, WIRE_HDR_LEN);
		wire_tag_put(&e, md);
		wenc_u64(&e, md->size);
		wenc_u32(&e, atomic_load(&piece_size));
		rc = e.err ? -EIO : rpc_fanout_call(s, &f, msg, e.len, WOP_STAGE_DATA);
		*refused = rpc_multi_refused(f.idx, f.n, f.rcs);
		rpc_fanout_free(&f);
	}
	free(msg);
	return rc;
}

static int stagein(const char *path)
{
	PATH_BUF(cp, 1);
	struct srvlist *s;
	struct chfs_md *md = malloc(sizeof *md);
	int rc = !path ? -EFAULT : !md || !cp ? -ENOMEM : 0;
	if (rc == 0)
		rc = path_canonical(path, cp);
	if (rc == 0 && !cp[0]) {
		free(md);
		return 0; /* the root: a directory */
	}
	if (rc == 0)
		rc = client_begin(&s);
	for (int attempt = 0; rc == 0 && attempt < CLIENT_RETRIES; attempt++) {
		if ((rc = stage_entry(s, cp, md)) != 0 || !S_ISREG(md->mode) || !(md->flags & MD_BACKEND))
			break;
		unsigned refused = 0;
		if ((rc = stage_data_once(s, md, &refused)) != -ERESTART)
			break;
		s = client_list_retry(s, refused, attempt); /* the ring changed: place again */
		rc = 0;
		if (attempt == CLIENT_RETRIES - 1)
			rc = -ERESTART;
	}
	free(md);
	return rpc_restart_failed(rc);
}

int chfs_stagein(const char *path) { return set_err(stagein(path)); }
