/*
 * flush_meta.h — changes of names and attributes on their way to the backend (flush_meta.c):
 * recorded durably by the handler that made them, applied after the data at chfs_sync and at
 * shutdown, hiding the old backend entry from read-through until then.
 */
#ifndef CHFSD_FLUSH_META_H
#define CHFSD_FLUSH_META_H

#include <stdint.h>

#include "wire.h"

struct chfsd;

enum {
	BM_UNLINK = 1, /* remove the file or symlink at path */
	BM_RENAME,     /* move backend path to path2, then path2's attributes */
	BM_MKDIR,      /* make directory path with its attributes */
	BM_RMDIR,      /* remove directory path */
	BM_SYMLINK,    /* (re)make symlink path as CHFS has it */
	BM_ATTR,       /* path's mode and times as CHFS has them (a new file: created) */
	BM_HIDE,       /* nothing to do but hide path (the other half of a rename) until applied */
	BM_FATTR,      /* BM_ATTR of a regular file: after its data (a data flush sets the mtime) */
	BM_TRUNC,      /* BM_FATTR and the file's size as CHFS has it (it was cut) */
	BM_CHOWN,      /* path's owner and group, which the backend refused with the rest */
	BM_MAX = BM_CHOWN
};

/* Open STORAGE/bdirty/meta.log (bdirty_fd: that directory) and queue what a previous run left;
 * with background, a thread applies what may go before the data (all but renames, rmdirs and file
 * attributes) as it is noted. */
int bmeta_init(struct chfsd *d, int bdirty_fd, int background);
/* Stop the background thread (before the final bmeta_apply). */
void bmeta_stop(void);
/* Record a change (before the request is answered); path2 only for BM_RENAME. */
void bmeta_note(struct chfsd *d, int op, const char *path, const char *path2);
/* What a new entry (CREATE) and a rename (both names here: from and to; INSERT: to only;
 * REMOVE_IF: from only) of md leave to do on the backend. */
/* A write to regular file path was reported (its mtime moved): a BM_FATTR record, unless the
 * last one queued is already path's attributes and not yet being applied. */
void bmeta_note_written(struct chfsd *d, const char *path);
void bmeta_note_create(struct chfsd *d, const char *path, const struct chfs_md *md);
void bmeta_note_rename(struct chfsd *d, const char *from, const char *to, const struct chfs_md *md);
/* 1 if a pending change removes or moves away the backend entry at path (a tombstone). */
int bmeta_hidden(struct chfsd *d, const char *path);
/* Before a new entry at path: apply the pending changes of path now — also those other servers
 * hold, when path is the source of a rename to a name another server owns (the rename's record
 * is there: flush_settle.c asks them). */
void bmeta_settle(struct chfsd *d, const char *path);
/* WOP_META_SETTLE: apply the pending changes of path recorded here. */
void bmeta_settle_here(struct chfsd *d, const char *path);
/* ---- flush_settle.c ---- */
/* Ask every other server to apply its pending changes of path (WOP_META_SETTLE), now. */
void bmeta_settle_peers(struct chfsd *d, const char *path);
/* Apply every pending change in order (failures stay queued with their error). */
void bmeta_apply(struct chfsd *d);
/* Encode "path (op): error" strings of failed changes (n counts them), within budget. */
int bmeta_report(struct wenc *e, size_t budget, uint32_t *n);
unsigned bmeta_failed(void);
const char *bmeta_op_name(int op);

#endif
