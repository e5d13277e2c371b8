/*
 * storage.h — chfsd's storage directory, the one interface the request handlers use.
 *
 * A storage directory (chfsd -c DIR) holds:
 *   DIR/ns.snap, DIR/ns.journal   the namespace entries this server owns (ns_store.h): a
 *               snapshot and the journal of changes since (ns_journal.h), records in the
 *               on-disk record format (record_codec.h); an old-layout DIR/ns/ tree (one file
 *               per entry) is imported once and renamed DIR/ns.imported (ns_import.h)
 *   DIR/data/   one sparse backing file per CHFS file whose chunks live here (data_store.h)
 *   DIR/members, DIR/chfsd.addr, DIR/server.id   membership state kept across restarts
 *               (membership.c)
 *
 * Module map: storage.c opens the directory and composes the two stores behind one handle;
 * ns_store.c owns the namespace (in memory: ns_index.c; its journal and
 * snapshot: ns_journal.c; the import of the old tree: ns_import.c) and its lock; data_store.c owns the backing files; record_codec.c owns the bytes of a record. The
 * st_* calls below are those modules' calls on the handle's store, unchanged in meaning; their
 * contracts are documented in ns_store.h and data_store.h. All return 0 (or an fd) or -errno.
 */
#ifndef CHFSD_STORAGE_H
#define CHFSD_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "data_store.h"
#include "ns_store.h"

struct storage;

int st_open(const char *dir, struct storage **out);
void st_close(struct storage *st);
const char *st_root(const struct storage *st);
int st_rootfd(const struct storage *st);

/* Namespace (ns_store.h; paths are canonical, "" is the root). */
int st_create(struct storage *st, const char *path, const struct chfs_md *in, int excl, struct chfs_md *out,
              int *existed);
int st_lookup(struct storage *st, const char *path, struct chfs_md *out);
int st_mkdir(struct storage *st, const char *path, const struct chfs_md *in);
int st_rmdir(struct storage *st, const char *path);
int st_dir_has_entries(struct storage *st, const char *path);
typedef ns_readdir_fn st_readdir_fn;
int st_readdir(struct storage *st, const char *path, const char *cursor, st_readdir_fn fn, void *arg,
               int *eof);
int st_unlink(struct storage *st, const char *path, struct chfs_md *old);
int st_insert(struct storage *st, const char *path, const struct chfs_md *md, int noreplace,
              struct chfs_md *old, int *replaced);
int st_remove_if(struct storage *st, const char *path, uint64_t fileid);
int st_rename(struct storage *st, const char *from, const char *to, struct chfs_md *old, int *replaced);
int st_adjust_links(struct storage *st, const char *key, uint64_t fileid, int add, struct chfs_md *out);
int st_relink(struct storage *st, const char *path, const char *from, const char *to);
int st_setattr(struct storage *st, const char *path, uint64_t fileid, const struct wire_setattr *a,
               struct chfs_md *out);

/* Backing files (data_store.h). st_data_open returns an fd (caller closes); -ENOENT if absent
 * and !create. */
int st_data_open(struct storage *st, uint64_t fileid, int create);
int st_data_truncate(struct storage *st, uint64_t fileid, uint64_t len);
void st_data_shrink_hold(struct storage *st);
void st_data_shrink_release(struct storage *st);
int st_data_remove(struct storage *st, uint64_t fileid);
int st_data_stat(struct storage *st, uint64_t fileid, uint64_t *size, int64_t *mtime_ns);
int st_data_path(struct storage *st, uint64_t fileid, const struct wire_tag *tag, char *buf, size_t size);

/* Rebalance (ns_walk/ns_adopt in ns_store.h, ds_open_tagged/... in data_store.h). */
int st_ns_walk(struct storage *st, ns_walk_fn fn, void *arg);
int st_adopt(struct storage *st, const char *path, const struct chfs_md *md);
int st_data_open_tagged(struct storage *st, uint64_t fileid, const struct wire_tag *tag);
int st_data_tag(struct storage *st, uint64_t fileid, struct wire_tag *tag);
int st_data_walk(struct storage *st, int (*fn)(void *arg, uint64_t fileid), void *arg);
int st_data_punch(struct storage *st, uint64_t fileid, uint64_t off, uint64_t len);
int st_data_usage(struct storage *st, uint64_t *files, uint64_t *bytes);

#endif
