/*
 * storage.h — chfsd's on-disk layout and the only code that touches it.
 *
 * A storage directory (chfsd -c DIR) holds:
 *   DIR/ns/     the namespace entries this server owns, as a tree mirroring CHFS paths. Every
 *               CHFS name is stored with a '_' prefix ("a/b" -> ns/_a/_b), so no client name can
 *               be ".", "..", or collide with server-private names. A file or symlink is a small
 *               regular file holding its encoded struct chfs_md ("record"); a directory is a
 *               real directory whose record is DIR/ns/.../_d/.meta. A directory without .meta is
 *               "implicit": it exists only because entries below it hash to this server.
 *   DIR/data/   one sparse backing file per CHFS file whose chunks live here, named by the
 *               file id (16 hex digits), holding those chunks at their logical offsets.
 *   DIR/members, DIR/chfsd.addr   membership state kept across restarts (membership.c).
 *
 * Safety: every client path was validated (path_check_canonical) and is looked up with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) relative to DIR/ns, and leaves are opened with
 * O_NOFOLLOW, so nothing outside the storage directory can be named even if someone planted a
 * symlink inside it. CHFS symlinks are records, never file-system symlinks.
 *
 * Concurrency: read-modify-write of one record happens under a lock chosen by the path's hash
 * (64 stripes); everything else relies on the atomicity of single file-system calls. Records
 * are replaced by rename (never rewritten in place), so readers need no lock.
 * All functions return 0 or -errno.
 */
#ifndef CHFSD_STORAGE_H
#define CHFSD_STORAGE_H

#include <stdint.h>
#include <time.h>

#include "wire.h"

struct storage;

int st_open(const char *dir, struct storage **out);
void st_close(struct storage *st);
const char *st_root(const struct storage *st);
int st_rootfd(const struct storage *st);

int64_t st_now_ns(void);

/* Namespace (paths are canonical; "" is the root). */
int st_create(struct storage *st, const char *path, const struct chfs_md *in, int excl,
              struct chfs_md *out, int *existed);
int st_lookup(struct storage *st, const char *path, struct chfs_md *out);
int st_mkdir(struct storage *st, const char *path, const struct chfs_md *in);
int st_rmdir(struct storage *st, const char *path);
/* 1 if the directory holds entries owned here (or entries below implicit subdirectories). */
int st_dir_has_entries(struct storage *st, const char *path);
/* Calls fn for the owned entries of directory `path` with names > cursor, in name order, while
 * fn returns 0; *eof = 1 if every entry was delivered. */
typedef int (*st_readdir_fn)(void *arg, const char *name, const struct chfs_md *md);
int st_readdir(struct storage *st, const char *path, const char *cursor, st_readdir_fn fn,
               void *arg, int *eof);
int st_unlink(struct storage *st, const char *path, struct chfs_md *old);
int st_insert(struct storage *st, const char *path, const struct chfs_md *md, int noreplace,
              struct chfs_md *old, int *replaced);
int st_remove_if(struct storage *st, const char *path, uint64_t fileid);
int st_rename(struct storage *st, const char *from, const char *to, struct chfs_md *old,
              int *replaced);
int st_setattr(struct storage *st, const char *path, uint64_t fileid, uint32_t which,
               uint32_t mode, int64_t atime_ns, int64_t mtime_ns, uint64_t size,
               struct chfs_md *out);

/* Backing files. st_data_open returns an fd (caller closes); -ENOENT if absent and !create. */
int st_data_open(struct storage *st, uint64_t fileid, int create);
int st_data_truncate(struct storage *st, uint64_t fileid, uint64_t len);
int st_data_remove(struct storage *st, uint64_t fileid);
int st_data_stat(struct storage *st, uint64_t fileid, uint64_t *size, int64_t *mtime_ns);
int st_data_path(struct storage *st, uint64_t fileid, char *buf, size_t size);
uint64_t st_new_fileid(void);

#endif
