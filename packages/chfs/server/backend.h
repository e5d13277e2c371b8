/*
 * backend.h — chfsd's persistent backend (chfsd -b DIR): the directory tree CHFS caches, read
 * through on a miss (a lookup of a path CHFS does not have consults DIR/path; a read of a chunk
 * this server owns but does not hold fetches it from DIR/path).
 *
 * Module map:
 *   backend.c        confined access to DIR: every path is resolved beneath DIR (openat2
 *                    RESOLVE_BENEATH: no "..", absolute or symlink escape), lstat, readlink,
 *                    open for reading, sorted listing
 *   backend_ns.c     the namespace side: a missing entry looked up in DIR (a file becomes a
 *                    CHFS entry flagged MD_BACKEND whose md.link keeps its backend path), and
 *                    readdir merging DIR's entries with CHFS's
 *   flush.c          write-back: which chunks written here are not on the backend yet
 *                    (STORAGE/bdirty/<fileid>), flush threads, chfs_sync's wait, status
 *   flush_meta.c     names and attributes: unlink, rename, mkdir, rmdir, symlink, mode and
 *                    times recorded in STORAGE/bdirty/meta.log, applied after the data
 *   backend_cache.c  the data side: which chunks of a backend file this server holds (the
 *                    held-map, bcache_map.c: an xattr of the backing file, DIR-of-storage/
 *                    bcache/<fileid> beyond it), fetching a missing one before a read or a
 *                    write touches it, and truncation (chunks past the cut are never fetched)
 * Paths are CHFS canonical paths ("" is the root). All functions return 0 (or an fd) or -errno.
 */
#ifndef CHFSD_BACKEND_H
#define CHFSD_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "wire.h"

struct backend;
struct chfsd;

/* ---- backend.c ---- */
int backend_open(const char *dir, struct backend **out);
void backend_close(struct backend *b);
const char *backend_root(const struct backend *b);
/* lstat of DIR/path (the last component is not followed; earlier ones are, within DIR). */
int backend_lstat(struct backend *b, const char *path, struct stat *st);
int backend_readlink(struct backend *b, const char *path, char *buf, size_t size);
/* fd of DIR/path opened read-only (symlinks followed, within DIR). */
int backend_open_read(struct backend *b, const char *path);
/* fd of DIR/path opened for writing, created (0644, parents 0755) if absent. */
int backend_open_write(struct backend *b, const char *path);
/* fd (O_PATH) of the directory holding DIR/path and, in *leaf, path's last component; with
 * make, missing parents are created (0755). For the *at calls of flush_meta.c. */
int backend_parent(struct backend *b, const char *path, int make, const char **leaf);
/* Names in directory DIR/path greater than `after`, sorted (caller frees each and the array). */
int backend_list(struct backend *b, const char *path, const char *after, char ***names, size_t *n);

/* ---- backend_ns.c (need d->bk) ---- */
/* 1 if this server owns ring key `key` under the current member list. */
int backend_owns(struct chfsd *d, uint64_t key);
/* A path CHFS does not have, as the backend has it: a regular file is made a CHFS entry
 * (MD_BACKEND, md.link = path) owned here; a directory or symlink is answered as it is.
 * -ENOENT if the backend has nothing there either. */
int backend_lookup(struct chfsd *d, const char *path, struct chfs_md *out);
/* Before a create of a path CHFS does not have: make a backend file a CHFS entry, so an
 * exclusive create finds it (EEXIST) and opens it instead. */
void backend_materialise(struct chfsd *d, const char *path);
/* STAGE_ENTRY: the entry of path, made from the backend file with chunk_size if CHFS has none. */
int backend_stage_entry(struct chfsd *d, const char *path, uint32_t chunk_size, struct chfs_md *out);
/* The backend entries of directory `path` this server would own (placement), not already in
 * CHFS here, names > cursor, sorted. fn as st_readdir's; used by the READDIR handler. */
typedef int (*backend_readdir_fn)(void *arg, const char *name, const struct chfs_md *md);
int backend_readdir(struct chfsd *d, const char *path, const char *cursor, backend_readdir_fn fn, void *arg,
                    int *eof);

/* ---- backend_cache.c ---- */
int bcache_init(struct chfsd *d);
/* Make sure the chunks of fileid touched by [off, off+len) are held here: fetch each one not
 * yet held from the backend file `path` (the tag's chunk size) and mark it held. */
int bcache_ensure(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                  uint64_t off, uint64_t len);
/* STAGE_DATA: fetch every chunk of [0, size) this server owns and does not hold, reading
 * `piece` bytes at a time (0: 1 MiB); *fetched = bytes copied from the backend. */
int bcache_stage(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                 uint64_t size, uint32_t piece, uint64_t *fetched);
/* The file was truncated to len: nothing at or past len is ever fetched again. */
int bcache_truncate(struct chfsd *d, uint64_t fileid, uint64_t len);
/* Chunk index of fileid arrived from its previous owner (rebalance): held. */
void bcache_mark(struct chfsd *d, uint64_t fileid, uint64_t index);
/* 0 if the byte at offset off of fileid belongs to a backend chunk this server never fetched
 * (a hole that is not data: a rebalance must not hand it over as zeros), else 1. */
int bcache_holds(struct chfsd *d, uint64_t fileid, uint64_t off);
void bcache_remove(struct chfsd *d, uint64_t fileid);

/* ---- flush_local.c ---- */
/* Copy the whole backing file of local-placement file fileid to backend path (size and mtime
 * too); *size and *mtime_ns: the backing file's as copied; *settled: 1 if its mtime was old
 * enough that a write after the copy must change it. *set_ns: in, the mtime the previous copy of
 * this file gave the backend file (0: not known); out, the one this copy gave it. 0 or -errno. */
int bflocal_copy(struct chfsd *d, uint64_t fileid, const char *path, uint64_t *size, int64_t *mtime_ns,
                 int *settled, int64_t *set_ns);

/* ---- flush.c ---- */
/* Load the dirty files left by a previous run and start nthreads flush threads (0: none; files
 * are then flushed only by bflush_wait and at shutdown); delay_s: flush a file this long after
 * its last write (< 0: at once). */
int bflush_init(struct chfsd *d, int nthreads, double delay_s);
/* Once the server is in the pool: fetch the backend names it missed while down (relink_owed.c),
 * then let flushing begin (nothing is flushed before). */
void bflush_release(struct chfsd *d);
/* Shutdown: flush everything (failures stay dirty for the next run), stop the threads. */
void bflush_stop(struct chfsd *d);
/* A WRITE of a file to flush (MD_FLUSH) went to these segments here. */
int bflush_note_write(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                      const struct wire_seg *seg, uint32_t nseg);
/* A client opened the backing file of a local-placement file to flush (MD_LOCAL | MD_FLUSH)
 * for direct I/O: from now on the file is flushed whenever its backing file changed. */
int bflush_note_local(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path);
/* Flush every dirty file now (phase BFLUSH_DATA), apply the pending changes of names and
 * attributes (BFLUSH_META), or both (BFLUSH_ALL); encode u32 n, n x str "path: error" of
 * files and changes that failed. */
enum { BFLUSH_ALL = 0, BFLUSH_DATA = 1, BFLUSH_META = 2 };
int bflush_wait(struct chfsd *d, struct wenc *e, size_t budget, int phase);
/* Flush fileid now if it is dirty here (before a rebalance hands its chunks over). */
void bflush_file_now(struct chfsd *d, uint64_t fileid);
/* A rename of fileid reached the backend: its dirty chunks go to path now (relink.c). */
void bflush_relink(struct chfsd *d, uint64_t fileid, const char *path);
/* The file lost its last name, its data kept for open descriptors (WOP_DATA_UNNAMED): never
 * flush them (its entry stays, with no path, until bflush_forget). */
void bflush_unnamed(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag);
/* The file was removed from CHFS: forget its dirty chunks. */
void bflush_forget(struct chfsd *d, uint64_t fileid);
/* " dirty_files=N dirty_bytes=N flush_failed=N" appended to buf. */
void bflush_status(struct chfsd *d, char *buf, size_t size);
/* The WOP_FLUSH_ERRORS reply: u32 n, n x "path: error" of the files whose last flush failed
 * (as many as fit in budget bytes of reply), without flushing anything. */
int bflush_errors(struct chfsd *d, struct wenc *e, size_t budget);

#endif
