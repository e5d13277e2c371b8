/*
 * gfarm2fs_passthrough.h — kernel passthrough for files on this node's gfsd, and the request
 * counters that show it (see gfarm2fs_passthrough.c for the design).
 */
#ifndef GFARM2FS_PASSTHROUGH_H
#define GFARM2FS_PASSTHROUGH_H

#include <stddef.h>

struct gfarm2fs_pt; /* one open file served by the kernel */

/* Options: enable = 0 is plain gfarm2fs; stats_path (may be NULL) receives the counters. */
void gfarm2fs_pt_configure(int enable, const char *stats_path);

/* From the FUSE init callback: asks the kernel for passthrough if configured and offered. */
void gfarm2fs_pt_init(struct fuse_conn_info *conn);

/*
 * After gfs_pio_open/create: if the file's storage is this node's gfsd, registers the spool
 * file with the kernel and sets fi->backing_id; returns NULL when the file stays plain.
 */
struct gfarm2fs_pt *gfarm2fs_pt_open(const char *path, GFS_File gf, struct fuse_file_info *fi);

/*
 * Before gfs_pio_close: if the kernel changed the spool file, marks gf modified so that its
 * close makes gfsd report the spool file's size and mtime to gfmd; drops the registration.
 */
gfarm_error_t gfarm2fs_pt_release(struct gfarm2fs_pt *pt, GFS_File gf, int writable);

void gfarm2fs_pt_count_read(size_t bytes);
void gfarm2fs_pt_count_write(size_t bytes);

/* Rewrites the stats file (if configured); called at release and at unmount. */
void gfarm2fs_pt_stats_write(void);

#endif
