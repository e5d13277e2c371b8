/*
 * data_store.h — the backing files of a storage directory: DIR/data/<fileid>, one sparse file
 * per CHFS file whose chunks live on this server, holding those chunks at their logical
 * offsets, named by the file id as 16 lowercase hex digits.
 *
 * The data store knows nothing of paths or records: the namespace (ns_store.h) maps a path to a
 * file id, and the handlers move bytes between the wire and the fd this module opens. All
 * functions return 0 (or an fd) or -errno.
 */
#ifndef CHFSD_DATA_STORE_H
#define CHFSD_DATA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h" /* struct wire_tag */

struct data_store;

/* Open (creating it if needed) ROOT/data; root is ROOT's absolute path, rootfd an fd of it. */
int ds_open_store(int rootfd, const char *root, struct data_store **out);
void ds_close_store(struct data_store *ds);

/* An fd of fileid's backing file (caller closes); -ENOENT if absent and !create. */
int ds_open(struct data_store *ds, uint64_t fileid, int create);
/* Set the backing file's size to len exactly; an absent file stays absent. */
int ds_truncate(struct data_store *ds, uint64_t fileid, uint64_t len);
/* While held (shared; several threads may hold it), no backing file gets shorter: a mapping of
 * one cannot fault (SIGBUS) in a user-space copy — bulk_io.c pushes reads from mappings, and a
 * libfabric provider may memcpy from there. ds_truncate waits for the holders to shorten one.
 * Node-local files (ds_path) are exempt: their users may truncate them directly. */
void ds_shrink_hold(struct data_store *ds);
void ds_shrink_release(struct data_store *ds);
/* Remove the backing file; absent is success. */
int ds_remove(struct data_store *ds, uint64_t fileid);
/* Size and mtime of the backing file; 0 and 0 if absent. */
int ds_stat(struct data_store *ds, uint64_t fileid, uint64_t *size, int64_t *mtime_ns);
/* Absolute path of the backing file (created with its placement tag if absent), for direct
 * node-local access. */
int ds_path(struct data_store *ds, uint64_t fileid, const struct wire_tag *tag, char *buf, size_t size);

/* Rebalance support. A data file created by ds_open_tagged keeps its placement tag (an xattr,
 * or a side file "<id>.t"), so a server can tell which of its chunks another server owns after
 * the ring changed. ds_get_tag: -ENODATA for an untagged file (node-local ones made by ds_path).
 * ds_walk calls fn for each data file until it returns non-zero. ds_punch frees a byte range
 * (reads as zeros; the size stays). */
int ds_open_tagged(struct data_store *ds, uint64_t fileid, const struct wire_tag *tag);
int ds_get_tag(struct data_store *ds, uint64_t fileid, struct wire_tag *tag);
int ds_walk(struct data_store *ds, int (*fn)(void *arg, uint64_t fileid), void *arg);
int ds_punch(struct data_store *ds, uint64_t fileid, uint64_t off, uint64_t len);

/* The data files and the bytes they occupy on disk (allocated blocks: a sparse or punched
 * file counts what it holds), for status. */
int ds_usage(struct data_store *ds, uint64_t *files, uint64_t *bytes);

/* A new random, non-zero file id. */
uint64_t ds_new_fileid(void);

#endif
