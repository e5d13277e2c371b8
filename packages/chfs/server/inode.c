/*
 * inode.c — the inode records of hard-linked files.
 *
 * A file with one name keeps every attribute (size, times, mode, owner, placement) in the
 * record of that name, at the owner of the name. A file with several names (chfs_link,
 * lib/link.c) keeps them in one inode record instead, stored in this server's namespace under
 * the reserved key wire_inode_key(file id) ("\x01" + 16 hex digits: a top-level name no client
 * path can spell, skipped by readdir and chfind), so it lives at the ring owner of that key and
 * moves with the rebalance like any entry (MIG_GET_ENTRY by that key; the record's nlink field
 * travels with it). Its names are records flagged MD_LINKED, whose own attributes are a stale
 * copy nobody reads: stat and open of such a name ask INODE_GET, and every SETATTR of a name
 * record is answered WIRE_ELINKED so that size reports, truncates, chmod, chown and utimens
 * go to INODE_SETATTR (ns_store.c).
 *
 * Crash order (the client's, lib/link.c): the inode record is written before a name becomes
 * a name record, and its count is raised before a second name is inserted, so a crash leaves
 * at worst a count too high (the data then stay until the pool's storage is removed), never a
 * name without its inode record.
 */
#define _GNU_SOURCE
#include "inode.h"

#include "chfsd.h"
#include "storage.h"

#include <errno.h>
#include <stdlib.h>

int inode_op(unsigned op) { return op >= WOP_INODE_GET && op <= WOP_INODE_SETATTR; }

void inode_req_key(const struct wire_req *q, char *key) { wire_inode_key(q->fileid, key); }

int inode_handle(struct chfsd *d, const struct wire_req *q, struct wenc *e)
{
	char key[WIRE_INODE_KEY_LEN + 1];
	struct chfs_md *md = malloc(2 * sizeof *md);
	if (!md)
		return -ENOMEM;
	wire_inode_key(q->fileid, key);
	int rc = 0, replaced = 0;
	struct wire_setattr set;
	switch (q->h.op) {
	case WOP_INODE_GET:
		rc = st_lookup(d->st, key, md);
		if (rc == 0 && md->fileid != q->fileid)
			rc = -ESTALE;
		break;
	case WOP_INODE_PUT:
		md[0] = q->md;
		md[0].flags |= MD_LINKED;
		md[0].nlink = 1; /* the name being linked; INODE_ADJUST counts the others */
		rc = st_insert(d->st, key, &md[0], 1, &md[1], &replaced);
		if (rc == -EEXIST && (rc = st_lookup(d->st, key, &md[0])) == 0 && md[0].fileid != q->fileid)
			rc = -ESTALE;
		break;
	case WOP_INODE_ADJUST: rc = st_adjust_links(d->st, key, q->fileid, (int)q->flags, md); break;
	case WOP_INODE_SETATTR:
		set = wire_req_setattr(q);
		rc = st_setattr(d->st, key, q->fileid, &set, md);
		break;
	default: rc = -ENOSYS;
	}
	if (rc == 0 && q->h.op != WOP_INODE_PUT)
		wenc_md(e, md);
	free(md);
	return rc;
}
