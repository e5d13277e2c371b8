/*
 * dirtimes.c — a directory's times and subdirectory count follow the names added to and
 * removed from it, as on a local file system: mtime and ctime change on create, mkdir, symlink,
 * mknod, unlink, rmdir and rename, and st_nlink is 2 + its subdirectories.
 *
 * A directory's record lives at the owner of its path, each entry at the owner of its own. The
 * entry's owner updates the directory's record itself when it holds it (server/ns_store.c
 * touch_parent: no extra request); otherwise the client sends the directory's owner one
 * SETATTR with WIRE_SET_TOUCH (times = that server's clock) and, for a subdirectory,
 * WIRE_SET_SUBDIR_ADD/DEL. So a name change costs one more RPC in (n - 1) / n of the cases on
 * n servers. Best effort: the change itself is done, a failed touch only leaves old times (and
 * a count off by one if a client dies in between; rmdir asks every server, never the count).
 */
#define _GNU_SOURCE
#include "client.h"

void dir_touch(struct srvlist *s, const char *cp, unsigned done_at, int delta)
{
	PATH_BUF(parent, 1);
	if (!parent || !path_split(cp, parent) || !parent[0])
		return; /* the root has no record: its times stay */
	if (placement_owner(s->ring, parent) == done_at)
		return; /* done_at updated it with the change */
	uint32_t which = WIRE_SET_TOUCH | (delta > 0 ? WIRE_SET_SUBDIR_ADD : 0) |
	                 (delta < 0 ? WIRE_SET_SUBDIR_DEL : 0);
	RPC_DECL(r);
	rpc_begin(&r, WOP_SETATTR);
	wenc_str(&r.e, parent);
	wenc_u64(&r.e, 0); /* any file id */
	wenc_setattr(&r.e, &(struct wire_setattr){.which = which});
	rpc_call_path(s, parent, &r);
}
