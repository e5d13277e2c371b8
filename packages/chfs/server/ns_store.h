/*
 * ns_store.h — the namespace entries this server owns: files and symlinks (one record each,
 * struct chfs_md in the record_codec.h format) and directories, either "owned" (with a record)
 * or "implicit" (no record: they exist only because entries below them hash to this server).
 * CHFS symlinks are records, never file-system symlinks.
 *
 * The namespace lives in memory (ns_index.h) and is made durable by a snapshot plus an
 * append-only journal in the storage directory, DIR/ns.snap and DIR/ns.journal
 * (ns_journal.h); a storage directory written by earlier versions (one file per entry under
 * DIR/ns/) is imported once at open (ns_import.h). A change is in the journal before it is
 * acknowledged; nothing is fsynced except compaction's snapshot, so acknowledged changes
 * survive a crash of chfsd, not of the machine (see ns_journal.c).
 *
 * A name added or removed below a directory recorded here also sets the directory's mtime and
 * ctime and its subdirectory count (md.subdirs), in the same journal group as the change
 * (directories recorded elsewhere are updated by the client: lib/dirtimes.c).
 *
 * Paths are canonical (path_check_canonical; "" is the root, which has no record and always
 * exists) and are never resolved in the file system. The namespace mints file ids but never
 * touches the backing files (data_store.h). All functions return 0 or -errno.
 */
#ifndef CHFSD_NS_STORE_H
#define CHFSD_NS_STORE_H

#include <stdint.h>

#include "wire.h" /* struct chfs_md, WIRE_SET_* */

struct ns_store;

/* Open the namespace of storage directory ROOT (given an fd of it): replay ROOT/ns.snap and
 * ROOT/ns.journal (created if absent), importing an old-layout ROOT/ns/ once. */
int ns_open_store(int rootfd, struct ns_store **out);
void ns_close_store(struct ns_store *ns);
/* Journal size above which it is compacted into the snapshot (default 16 MiB; 0: after every
 * change, for tests). */
void ns_set_compact_bytes(struct ns_store *ns, uint64_t bytes);

/* Create a file or symlink record with a new file id. An existing file is truncated (size 0,
 * *existed = 1) unless excl; an existing directory gives -EISDIR, a symlink -EEXIST. */
int ns_create(struct ns_store *ns, const char *path, const struct chfs_md *in, int excl, struct chfs_md *out,
              int *existed);
int ns_lookup(struct ns_store *ns, const char *path, struct chfs_md *out);
int ns_mkdir(struct ns_store *ns, const char *path, const struct chfs_md *in);
int ns_rmdir(struct ns_store *ns, const char *path);
/* 1 if the directory holds entries owned here (or entries below implicit subdirectories). */
int ns_dir_has_entries(struct ns_store *ns, const char *path);
/* Calls fn for the owned entries of directory `path` with names > cursor, in name order, while
 * fn returns 0; *eof = 1 if every entry was delivered. */
typedef int (*ns_readdir_fn)(void *arg, const char *name, const struct chfs_md *md);
int ns_readdir(struct ns_store *ns, const char *path, const char *cursor, ns_readdir_fn fn, void *arg,
               int *eof);
/* Remove a file or symlink entry; *old gets its record. */
int ns_unlink(struct ns_store *ns, const char *path, struct chfs_md *old);
/* Put md at path (the other owner's half of a rename), replacing a file or symlink unless
 * noreplace; *old and *replaced report what was replaced. */
int ns_insert(struct ns_store *ns, const char *path, const struct chfs_md *md, int noreplace,
              struct chfs_md *old, int *replaced);
/* Remove the entry at path only if it still has this file id (-ESTALE otherwise). */
int ns_remove_if(struct ns_store *ns, const char *path, uint64_t fileid);
/* Rename within this server (both names owned here). */
int ns_rename(struct ns_store *ns, const char *from, const char *to, struct chfs_md *old, int *replaced);
/* Apply the WIRE_SET_* bits in a->which; fileid != 0 must match the entry's (-ESTALE). Changing
 * the owner or group also clears the set-user-ID bit, and the set-group-ID bit of a group-
 * executable file, of anything but a directory (as Linux's chown does); permission to change
 * them was the client's to check. */
int ns_setattr(struct ns_store *ns, const char *path, uint64_t fileid, const struct wire_setattr *a,
               struct chfs_md *out);

/* Hard links: the inode record at key (wire_inode_key) gains (add) or loses a name; ctime is
 * now; at nlink 0 the record goes. *out: the record after (nlink 0: as it was, minus the
 * name). -ENOENT, -ESTALE (another file id), -EMLINK (WIRE_NLINK_MAX names). A SETATTR of a
 * name record (MD_LINKED, not at an inode key) changing more than its directory bits is
 * WIRE_ELINKED; WIRE_SET_LINKED makes a plain file's record a name record (-EPERM if not a
 * regular file). */
int ns_adjust_links(struct ns_store *ns, const char *key, uint64_t fileid, int add, struct chfs_md *out);

/* The backend file of path's entry moved from `from` to `to` (flush_meta.c): md.link = to, if
 * it is a file whose data go to the backend and md.link is still `from` (-ESTALE otherwise). */
int ns_relink(struct ns_store *ns, const char *path, const char *from, const char *to);

/* Rebalance. ns_walk calls fn(arg, path, md) for every entry recorded here (files, symlinks,
 * owned directories), parents before children, until fn returns non-zero (returned). Entries
 * that change during the walk may be missed or seen in either state. */
typedef int (*ns_walk_fn)(void *arg, const char *path, const struct chfs_md *md);
int ns_walk(struct ns_store *ns, ns_walk_fn fn, void *arg);
/* Take over an entry from its previous owner: md exactly (its file id too) at path, creating
 * implicit parents; a directory's record goes onto an implicit directory already here. -EEXIST
 * if path already has an entry here (it is newer: keep it). */
int ns_adopt(struct ns_store *ns, const char *path, const struct chfs_md *md);

#endif
