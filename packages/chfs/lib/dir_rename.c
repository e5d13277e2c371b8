/*
 * dir_rename.c — renaming a directory (chfs_rename, namespace.c, calls dir_rename for every
 * directory once the checks of rename(2) passed: permissions, EINVAL for a target inside the
 * source, the target free or an empty directory removed). A directory that lists empty moves
 * as a file does, in one RENAME when one server owns both names (see dir_rename below); the
 * rest of this file is the walk for a directory with entries (or one only the backend has).
 *
 * Entries are placed by the hash of their whole path, so a subtree is not one object that can
 * be relinked: every entry below the directory gets a new name and, mostly, a new owner. Only
 * metadata move — a file's chunks are keyed by its file id — with one ns_move per entry, the
 * same step as a file rename (RENAME when one server owns both names, else INSERT at the new
 * owner then REMOVE_IF at the old one). Cost: a listing per directory, then per entry a lookup
 * and one or two requests; nothing is copied.
 *
 * Order, so that a failure or a crash at any point leaves every entry reachable under its old
 * name or its new one: the target directory is made first (INSERT of the source's record, so
 * owner, mode and times are kept; its subdirectory count starts at 0 and follows the moves),
 * then the children are moved, a subdirectory by the same steps depth-first, and a source
 * directory is removed only once no server holds an entry below it; last the target gets the
 * source's mtime and atime back (the moves touched it; rename(2) leaves them). An error stops
 * the walk and is returned: what moved stays moved, the rest stays under the old name, both
 * directories exist, and the caller can finish by hand. The one window is that of each entry's
 * move, as for a file rename: a client killed between its INSERT and its REMOVE_IF leaves that
 * entry under both names.
 *
 * Not atomic: other clients can see the subtree half moved — a lookup may find an entry under
 * either name during the walk, and a listing (every server asked, merged) may show both
 * directories partly filled. Upstream CHFS refuses the rename altogether (EXDEV). Entries
 * created in the source during the walk are moved by another pass over the directory, up to
 * DIR_RENAME_PASSES; if the source still is not empty then, EBUSY (the source keeps them).
 * ctime of every moved entry becomes the time of its move (Linux changes only the directory's).
 *
 * The walk recurses once per level of the tree, about 300 bytes of stack each (paths and
 * listings are on the heap): 100 levels take 30 KB; a name of at most 4,095 bytes allows 2,048.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DIR_RENAME_PASSES 4

/* The names of one directory, NUL-separated, as listed (the walk changes it afterwards). */
struct names {
	char *buf;
	size_t len, cap;
	int err;
};

static int collect(void *arg, const char *name, const struct stat *st, off_t off)
{
	struct names *n = arg;
	size_t l = strlen(name) + 1;
	(void)st, (void)off;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	if (n->len + l > n->cap) {
		size_t cap = n->cap ? n->cap : 4096;
		while (cap < n->len + l)
			cap *= 2;
		char *b = realloc(n->buf, cap);
		if (!b) {
			n->err = -ENOMEM;
			return 1;
		}
		n->buf = b;
		n->cap = cap;
	}
	memcpy(n->buf + n->len, name, l);
	n->len += l;
	return 0;
}

/* Directory `to` with the record of `dir`, no subdirectories yet. At the top an existing name
 * is an error (it was removed just before: a concurrent creator); below, a directory there is
 * one an earlier pass made (or a concurrent creator's), and the walk fills it. */
static int make_target(struct srvlist *s, const char *to, const struct chfs_md *dir, int top, uint64_t pid)
{
	struct chfs_md *md = malloc(sizeof *md);
	if (!md)
		return -ENOMEM;
	*md = *dir;
	md->subdirs = 0;
	RPC_DECL(r);
	rpc_begin(&r, WOP_INSERT);
	wenc_str(&r.e, to);
	wenc_md(&r.e, md);
	wenc_u32(&r.e, WIRE_INSERT_NOREPLACE);
	wenc_u64(&r.e, pid);
	int rc = rpc_call_path(s, to, &r);
	if (rc == 0)
		dir_touch(s, to, placement_owner(s->ring, to), 1);
	else if (rc == -EEXIST && !top)
		rc = ns_lookup(s, to, md) == 0 && S_ISDIR(md->mode) ? 0 : -EEXIST;
	free(md);
	return rc;
}

/* rename(2) leaves a directory's mtime alone: the source's, over the moves' touches. */
static int keep_times(struct srvlist *s, const char *to, const struct chfs_md *dir)
{
	RPC_DECL(r);
	rpc_begin(&r, WOP_SETATTR);
	wenc_str(&r.e, to);
	wenc_u64(&r.e, 0); /* any file id */
	wenc_setattr(&r.e, &(struct wire_setattr){.which = WIRE_SET_ATIME | WIRE_SET_MTIME,
	                                          .atime_ns = dir->atime_ns,
	                                          .mtime_ns = dir->mtime_ns});
	return rpc_call_path(s, to, &r);
}

static int move_tree(struct srvlist *s, const char *from, const char *to, const struct chfs_md *dir, int top,
                     struct names *listed, uint64_t pid);

/* The names listed in directory `path` (the backend's too) into *n. */
static int list(const char *path, struct names *n)
{
	int rc = readdir_all(path, n, collect);
	return rc ? rc : n->err;
}

static int move_one(struct srvlist *s, const char *cf, const char *ct, const struct chfs_md *md,
                    uint64_t toid)
{
	return S_ISDIR(md->mode) ? move_tree(s, cf, ct, md, 0, NULL, toid)
	                         : ns_move(s, cf, ct, md, NS_MOVE_NO_TOUCH, toid);
}

/* One pass: every entry listed in `from` now goes to `to`, of file id toid (listed: the names
 * the caller listed already, taken over; else NULL). */
static int move_children(struct srvlist *s, const char *from, const char *to, struct names *listed,
                         uint64_t toid)
{
	struct names n = {0};
	char *cf = malloc(2 * CHFS_PATH_MAX), *ct = cf + CHFS_PATH_MAX;
	struct chfs_md *md = malloc(sizeof *md);
	if (listed)
		n = *listed;
	int rc = !cf || !md ? -ENOMEM : listed ? 0 : list(from, &n);
	for (size_t off = 0; rc == 0 && off < n.len; off += strlen(n.buf + off) + 1) {
		const char *name = n.buf + off;
		if (snprintf(cf, CHFS_PATH_MAX, "%s/%s", from, name) >= CHFS_PATH_MAX ||
		    snprintf(ct, CHFS_PATH_MAX, "%s/%s", to, name) >= CHFS_PATH_MAX) {
			rc = -ENAMETOOLONG;
			break;
		}
		if ((rc = ns_lookup(s, cf, md)) == -ENOENT) {
			rc = 0; /* removed since the listing */
			continue;
		}
		if (rc == 0 && (rc = move_one(s, cf, ct, md, toid)) == -ENOENT) {
			/* `to` fenced for this very directory: it was renamed away from that name
			 * less than FENCE_MS ago and now comes back (server/fence.c) */
			ns_dir_unfence(s, to, toid);
			rc = move_one(s, cf, ct, md, toid);
		}
	}
	free(n.buf);
	free(md);
	free(cf);
	return rc;
}

/* (the target keeps the source's file id, dir->fileid: its entries are added with it) */
static int move_tree(struct srvlist *s, const char *from, const char *to, const struct chfs_md *dir, int top,
                     struct names *listed, uint64_t pid)
{
	int rc = make_target(s, to, dir, top, pid), pass = 0;
	if (rc && listed)
		free(listed->buf);
	for (; rc == 0 && pass < DIR_RENAME_PASSES; pass++, listed = NULL) {
		/* the check fences `from` (dir_fence.c): entries made in it from now on are refused,
		 * so the passes end */
		if ((rc = move_children(s, from, to, listed, dir->fileid)) == 0 &&
		    (rc = ns_dir_fence(s, from, dir->fileid)) == 0)
			break;
		if (rc > 0)
			rc = 0; /* entries made meanwhile: another pass */
	}
	if (rc == 0 && pass == DIR_RENAME_PASSES) {
		log_warn("rename of /%s: entries keep being created in it; stopped after %d passes", from,
		         DIR_RENAME_PASSES);
		rc = -EBUSY;
	}
	if (rc == 0 && (rc = ns_rmdir_entry(s, from)) == 0)
		return keep_times(s, to, dir);
	ns_dir_unfence(s, from, dir->fileid); /* (from stays: creates in it go on) */
	return rc;
}

/* An empty directory (nothing listed; a listing shows the backend's entries, which DIR_EMPTY
 * does not count) moves as a file does (ns_move): one RENAME, atomic, when one server owns both
 * names, else INSERT at the new owner then REMOVE_IF at the old. A directory only the backend
 * has has no record to move (ENOENT; with two owners the INSERT made the target): the walk. A
 * directory with entries: the walk, whose first pass takes this listing. */
int dir_rename(struct srvlist *s, const char *cf, const char *ct, const struct chfs_md *md, uint64_t pid)
{
	struct names n = {0};
	int rc = list(cf, &n), top = 1;
	if (rc == 0 && n.len == 0) {
		/* Fenced first: an entry made since the listing is counted (the walk takes it), one
		 * made later is refused. ENOENT from the move: a directory only the backend has. */
		rc = ns_dir_fence(s, cf, md->fileid);
		if (rc == 0 && (rc = ns_move(s, cf, ct, md, 0, pid)) == -ENOENT)
			rc = top = 0;
		else if (rc <= 0) {
			if (rc)
				ns_dir_unfence(s, cf, md->fileid);
			free(n.buf);
			return rc;
		}
		rc = 0; /* (found entries: the walk lists again) */
	}
	if (rc) {
		free(n.buf);
		return rc;
	}
	return move_tree(s, cf, ct, md, top, &n, pid);
}
