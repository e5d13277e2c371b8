/*
 * link.c — hard links (chfs_link) and the inode records behind them (server/inode.c).
 *
 * A file with one name keeps its attributes in the record of that name. chfs_link gives it a
 * second name in four steps, each one request, in an order that a crash can cut anywhere
 * without leaving a name whose attributes are lost:
 *   1. INODE_PUT: the inode record (the file's attributes, nlink 1) at the owner of the key
 *      wire_inode_key(file id) — kept as it is if it exists already (a concurrent link);
 *   2. SETATTR WIRE_SET_LINKED: the old name's record becomes a name record (MD_LINKED); from
 *      now on every SETATTR of it is answered WIRE_ELINKED and goes to the inode record. What
 *      changed between 1 and 2 (a size report, a chmod) is copied over from the reply;
 *   3. INODE_ADJUST +1;
 *   4. INSERT of the new name record (no replace) at the new name's owner; on failure the
 *      count goes back down.
 * A crash leaves at worst a count too high: the data then stay after the last unlink, as a
 * client killed with an orphan open leaves them (doc/design.md). A file already linked starts
 * at step 3.
 *
 * Reading: ns_lookup (namespace.c) answers a name record with its inode record (one more
 * request, only for linked files). Changing: link_setattr. Removing a name (unlink, rename
 * over it): link_last_name counts it down and says whether the data go.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One WOP_INODE_* request for fileid to the owner of its key; the reply's md into out (NULL:
 * none wanted or none sent). put/adjust: the op's arguments. */
static int inode_call(struct srvlist *s, unsigned op, uint64_t fileid, const struct chfs_md *put, int add,
                      const struct wire_setattr *a, struct chfs_md *out)
{
	char key[WIRE_INODE_KEY_LEN + 1];
	wire_inode_key(fileid, key);
	RPC_DECL(r);
	rpc_begin(&r, op);
	wenc_u64(&r.e, fileid);
	if (op == WOP_INODE_PUT)
		wenc_md(&r.e, put);
	else if (op == WOP_INODE_ADJUST)
		wenc_u32(&r.e, add ? 1 : 0);
	else if (op == WOP_INODE_SETATTR)
		wenc_setattr(&r.e, a);
	int rc = rpc_call_path(s, key, &r);
	if (rc == 0 && out && op != WOP_INODE_PUT) {
		wdec_md(&r.d, out);
		if (wdec_finish(&r.d))
			rc = -EIO;
	}
	return rc;
}

int link_inode_get(struct srvlist *s, uint64_t fileid, struct chfs_md *md)
{
	return inode_call(s, WOP_INODE_GET, fileid, NULL, 0, NULL, md);
}

int link_setattr(struct srvlist *s, uint64_t fileid, const struct wire_setattr *a, struct chfs_md *out)
{
	return inode_call(s, WOP_INODE_SETATTR, fileid, NULL, 0, a, out);
}

int link_last_name(struct srvlist *s, struct chfs_md *md)
{
	if (!(md->flags & MD_LINKED))
		return 1;
	struct chfs_md *after = malloc(sizeof *after);
	if (!after)
		return 0; /* keep the data: a leak, not a loss */
	int rc = inode_call(s, WOP_INODE_ADJUST, md->fileid, NULL, 0, NULL, after);
	int last = rc == 0 && after->nlink == 0;
	if (last)
		*md = *after; /* the attributes the orphans keep (size) */
	free(after);
	return last;
}

/* Steps 1-2: make the plain file md (at cp) a linked one. */
static int make_linked(struct srvlist *s, const char *cp, const struct chfs_md *md)
{
	int rc = inode_call(s, WOP_INODE_PUT, md->fileid, md, 0, NULL, NULL);
	if (rc)
		return rc;
	RPC_DECL(r);
	rpc_begin(&r, WOP_SETATTR);
	wenc_str(&r.e, cp);
	wenc_u64(&r.e, md->fileid);
	wenc_setattr(&r.e, &(struct wire_setattr){.which = WIRE_SET_LINKED});
	rc = rpc_call_path(s, cp, &r);
	if (rc == WIRE_ELINKED)
		return 0; /* linked by someone else meanwhile: the inode record is theirs */
	struct chfs_md *now = rc == 0 ? malloc(sizeof *now) : NULL;
	if (rc == 0 && !now)
		rc = -ENOMEM;
	if (rc == 0) {
		wdec_md(&r.d, now);
		rc = wdec_finish(&r.d) ? -EIO : 0;
	}
	if (rc) {
		/* the name holds another file now (or is gone): drop our inode record again */
		struct chfs_md *gone = malloc(sizeof *gone);
		if (gone)
			inode_call(s, WOP_INODE_ADJUST, md->fileid, NULL, 0, NULL, gone);
		free(gone);
		return rc == -ESTALE ? -ENOENT : rc;
	}
	/* What the name's record took between steps 1 and 2 (a size report, chmod, utimens). */
	struct wire_setattr a = {0};
	if (now->size > md->size) {
		a.which |= WIRE_SET_SIZE_MAX; /* (sets mtime: a write happened) */
		a.size = now->size;
	} else if (now->mtime_ns != md->mtime_ns || now->atime_ns != md->atime_ns) {
		a.which |= WIRE_SET_ATIME | WIRE_SET_MTIME;
		a.atime_ns = now->atime_ns;
		a.mtime_ns = now->mtime_ns;
	}
	if (now->mode != md->mode) {
		a.which |= WIRE_SET_MODE;
		a.mode = now->mode & 07777;
	}
	if (a.which)
		rc = link_setattr(s, md->fileid, &a, NULL);
	free(now);
	return rc;
}

/* May the caller link to md? As Linux with fs.protected_hardlinks=1: its owner, or someone who
 * may read and write it. */
static int may_link(const struct chfs_md *md)
{
	if (perm_owner(md) == 0 || perm_access(md, PERM_R | PERM_W) == 0)
		return 0;
	return -EPERM;
}

int chfs_link(const char *oldpath, const char *newpath)
{
	NS_CALL_DECL(c);
	NS_CALL_DECL(t);
	int rc = ns_begin(oldpath, NS_SYNC | NS_LOOKUP, c);
	if (rc == 0 && !t)
		rc = -ENOMEM;
	if (rc)
		return set_err(rc);
	struct chfs_md *md = &c->md;
	if (S_ISDIR(md->mode))
		return set_err(-EPERM);
	if ((rc = ns_begin(newpath, NS_PARENT, t)) != 0)
		return set_err(rc); /* the root: EEXIST */
	struct srvlist *s = c->s;
	if ((rc = ns_lookup(s, t->cp, &t->md)) != -ENOENT)
		return set_err(rc == 0 ? -EEXIST : rc);
	if (!S_ISREG(md->mode))
		return set_err(-EPERM); /* symlinks, FIFOs and sockets have no inode record (yet) */
	if ((rc = may_link(md)) != 0)
		return set_err(rc);
	if (!(md->flags & MD_LINKED) && (rc = make_linked(s, c->cp, md)) != 0)
		return set_err(rc);
	uint64_t pid = t->parent.fileid;    /* (server/fence.c) */
	struct chfs_md *after = &t->parent; /* (the parent's record is no longer needed) */
	if ((rc = inode_call(s, WOP_INODE_ADJUST, md->fileid, NULL, 1, NULL, after)) != 0)
		return set_err(rc == -ESTALE ? -ENOENT : rc); /* last name removed meanwhile */
	struct chfs_md *name = &t->md;
	*name = *md;
	name->flags |= MD_LINKED;
	name->nlink = 0;
	RPC_DECL(r);
	for (int again = 0;; again++) {
		rpc_begin(&r, WOP_INSERT);
		wenc_str(&r.e, t->cp);
		wenc_md(&r.e, name);
		wenc_u32(&r.e, WIRE_INSERT_NOREPLACE | WIRE_INSERT_LINK);
		wenc_u64(&r.e, pid);
		rc = rpc_call_path(s, t->cp, &r);
		if (rc != -ENOENT || (rc = ns_parent_again(s, t->cp, after, again)) != 0)
			break; /* (ENOENT: the parent fenced, server/fence.c, or gone) */
		pid = after->fileid;
	}
	if (rc) {
		inode_call(s, WOP_INODE_ADJUST, md->fileid, NULL, 0, NULL, after);
		return set_err(rc);
	}
	dir_touch(s, t->cp, placement_owner(s->ring, t->cp), 0);
	return 0;
}
