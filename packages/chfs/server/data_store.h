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

struct data_store;

/* Open (creating it if needed) ROOT/data; root is ROOT's absolute path, rootfd an fd of it. */
int ds_open_store(int rootfd, const char *root, struct data_store **out);
void ds_close_store(struct data_store *ds);

/* An fd of fileid's backing file (caller closes); -ENOENT if absent and !create. */
int ds_open(struct data_store *ds, uint64_t fileid, int create);
/* Set the backing file's size to len exactly; an absent file stays absent. */
int ds_truncate(struct data_store *ds, uint64_t fileid, uint64_t len);
/* Remove the backing file; absent is success. */
int ds_remove(struct data_store *ds, uint64_t fileid);
/* Size and mtime of the backing file; 0 and 0 if absent. */
int ds_stat(struct data_store *ds, uint64_t fileid, uint64_t *size, int64_t *mtime_ns);
/* Absolute path of the backing file (created if absent), for direct node-local access. */
int ds_path(struct data_store *ds, uint64_t fileid, char *buf, size_t size);

/* A new random, non-zero file id. */
uint64_t ds_new_fileid(void);

#endif
