/*
 * gfarm2fs_passthrough.c — FUSE passthrough for files stored on the node's own gfsd.
 *
 * libgfarm already knows when a file's storage is local: when it schedules an open file onto
 * a gfsd on this host (gfs_client_connection_is_local: it reached the gfsd over its Unix
 * socket), it asks that gfsd for GFS_PROTO_OPEN_LOCAL, and gfsd — which alone maps
 * (inode, generation) to a spool path and checks permissions — passes back a descriptor of the
 * spool file; libgfarm then reads and writes that descriptor itself (gfs_pio_local.c).
 * gfs_pio_view_fd() returns it (and -1 for a remote gfsd). At open we force that scheduling,
 * and for a local descriptor register it with the kernel (ioctl FUSE_DEV_IOC_BACKING_OPEN on
 * /dev/fuse, what libfuse's fuse_passthrough_open() does for the low-level API) and answer the
 * open with its backing id: the kernel then reads, writes and mmaps the spool file itself and
 * the page cache holds the spool file's pages only. Remote files stay on the daemon path.
 *
 * The kernel allows one backing file object per FUSE inode at a time (another id makes the
 * open fail with EBUSY), so opens of one spool file share one registration, found by the
 * spool file's (st_dev, st_ino) and reference-counted.
 *
 * Size and mtime for other clients: gfsd reports a file's size and mtime to gfmd when the
 * last writer closes it, from fstat of the spool file, but only fully when the client says it
 * modified the file (GFS_PROTO_CLOSE_FLAG_MODIFIED). The kernel's writes bypass libgfarm, so
 * at release we compare the spool file with its state at open and, if it changed, call
 * gfs_pio_truncate(gf, current size) — a no-op on the data that marks the GFS_File modified —
 * and put back the mtime the kernel's writes left; gfs_pio_close then does the rest.
 *
 * The counters (READ/WRITE requests that reached the daemon, opens by kind) are what the tests
 * and the benchmark read: a passthrough file must add no READ or WRITE.
 */
#define FUSE_USE_VERSION 31
#include <fuse.h>
#include <fuse_lowlevel.h> /* fuse_session_fd */

#include <gfarm/gfarm.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gfarm2fs_passthrough.h"

/* Not in Gfarm's public header; exported by libgfarm (used by its kernel client). */
gfarm_error_t gfs_pio_view_fd(GFS_File gf, int *fdp);

/* Protocol 7.40 ioctls; Debian 12's linux/fuse.h (7.38) predates them. */
#ifndef FUSE_DEV_IOC_BACKING_OPEN
struct fuse_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define FUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct fuse_backing_map)
#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
#endif

struct pt_backing { /* one registered spool file */
	struct pt_backing *next;
	dev_t dev;
	ino_t ino;
	int id;
	int refs;
};

struct gfarm2fs_pt {
	struct pt_backing *backing;
	off_t size; /* spool file at open */
	struct timespec mtime;
};

static int configured = 1;
static const char *stats_path;
static atomic_bool active;
static struct pt_backing *backings;
static pthread_mutex_t backings_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

static atomic_ullong n_open, n_pt_open, n_remote_open, n_pt_refused, n_pt_size_report;
static atomic_ullong n_read, n_read_bytes, n_write, n_write_bytes;

void gfarm2fs_pt_configure(int enable, const char *path)
{
	configured = enable;
	stats_path = path;
}

void gfarm2fs_pt_init(struct fuse_conn_info *conn)
{
	if (!configured)
		return;
	if (!(conn->capable & FUSE_CAP_PASSTHROUGH)) {
		fprintf(stderr, "gfarm2fs: the kernel offers no FUSE passthrough (needs Linux >= "
		                "6.9); all I/O goes through the daemon\n");
		return;
	}
	conn->want |= FUSE_CAP_PASSTHROUGH;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE; /* the kernel refuses both together */
	conn->max_backing_stack_depth = 1;       /* the spool may sit on overlayfs */
	atomic_store(&active, 1);
}

static int session_fd(void) { return fuse_session_fd(fuse_get_session(fuse_get_context()->fuse)); }

/* Registers the spool file open as fd (or shares its registration); -errno on failure. */
static int backing_get(int fd, const struct stat *st, struct pt_backing **bp)
{
	struct pt_backing *b;
	int ret = 0;

	pthread_mutex_lock(&backings_lock);
	for (b = backings; b; b = b->next)
		if (b->dev == st->st_dev && b->ino == st->st_ino)
			break;
	if (b) {
		b->refs++;
	} else if (!(b = calloc(1, sizeof *b))) {
		ret = -ENOMEM;
	} else {
		struct fuse_backing_map map = {.fd = fd};
		int id = ioctl(session_fd(), FUSE_DEV_IOC_BACKING_OPEN, &map);
		if (id <= 0) {
			ret = id < 0 ? -errno : -EIO;
			free(b);
			b = NULL;
		} else {
			*b = (struct pt_backing){
			        .next = backings, .dev = st->st_dev, .ino = st->st_ino, .id = id, .refs = 1};
			backings = b;
		}
	}
	pthread_mutex_unlock(&backings_lock);
	*bp = b;
	return ret;
}

static void backing_put(struct pt_backing *b)
{
	pthread_mutex_lock(&backings_lock);
	if (--b->refs > 0) {
		pthread_mutex_unlock(&backings_lock);
		return;
	}
	struct pt_backing **pp = &backings;
	while (*pp != b)
		pp = &(*pp)->next;
	*pp = b->next;
	pthread_mutex_unlock(&backings_lock);
	uint32_t id = (uint32_t)b->id;
	ioctl(session_fd(), FUSE_DEV_IOC_BACKING_CLOSE, &id);
	free(b);
}

struct gfarm2fs_pt *gfarm2fs_pt_open(const char *path, GFS_File gf, struct fuse_file_info *fi)
{
	atomic_fetch_add(&n_open, 1);
	if (!atomic_load(&active))
		return NULL;
	/* Schedules the file now: a local gfsd hands libgfarm the spool file's descriptor. */
	int fd = -1;
	gfarm_error_t e = gfs_pio_view_fd(gf, &fd);
	if (e != GFARM_ERR_NO_ERROR || fd < 0) {
		atomic_fetch_add(&n_remote_open, 1);
		return NULL;
	}
	struct stat st;
	struct gfarm2fs_pt *pt = calloc(1, sizeof *pt);
	int err = !pt ? -ENOMEM : fstat(fd, &st) < 0 ? -errno : backing_get(fd, &st, &pt->backing);
	if (err) {
		fprintf(stderr, "gfarm2fs: %s: passthrough refused (%s); serving it through the daemon\n",
		        path, strerror(-err));
		atomic_fetch_add(&n_pt_refused, 1);
		free(pt);
		return NULL;
	}
	pt->size = st.st_size;
	pt->mtime = st.st_mtim;
	fi->backing_id = pt->backing->id;
	atomic_fetch_add(&n_pt_open, 1);
	return pt;
}

gfarm_error_t gfarm2fs_pt_release(struct gfarm2fs_pt *pt, GFS_File gf, int writable)
{
	gfarm_error_t e = GFARM_ERR_NO_ERROR;
	int fd = -1;
	struct stat st;

	if (writable && gfs_pio_view_fd(gf, &fd) == GFARM_ERR_NO_ERROR && fd >= 0 && fstat(fd, &st) == 0 &&
	    (st.st_size != pt->size || st.st_mtim.tv_sec != pt->mtime.tv_sec ||
	     st.st_mtim.tv_nsec != pt->mtime.tv_nsec)) {
		e = gfs_pio_truncate(gf, st.st_size);
		const struct timespec times[2] = {st.st_atim, st.st_mtim};
		futimens(fd, times);
		atomic_fetch_add(&n_pt_size_report, 1);
	}
	backing_put(pt->backing);
	free(pt);
	return e;
}

void gfarm2fs_pt_count_read(size_t bytes)
{
	atomic_fetch_add(&n_read, 1);
	atomic_fetch_add(&n_read_bytes, bytes);
}

void gfarm2fs_pt_count_write(size_t bytes)
{
	atomic_fetch_add(&n_write, 1);
	atomic_fetch_add(&n_write_bytes, bytes);
}

void gfarm2fs_pt_stats_write(void)
{
	char tmp[4096];

	if (!stats_path || snprintf(tmp, sizeof tmp, "%s.tmp", stats_path) >= (int)sizeof tmp)
		return;
	pthread_mutex_lock(&stats_lock);
	FILE *f = fopen(tmp, "w");
	if (f) {
		fprintf(f,
		        "passthrough %d\nopen %llu\npassthrough_open %llu\nremote_open %llu\n"
		        "passthrough_refused %llu\nsize_report %llu\nread %llu\nread_bytes %llu\n"
		        "write %llu\nwrite_bytes %llu\n",
		        (int)atomic_load(&active), atomic_load(&n_open), atomic_load(&n_pt_open),
		        atomic_load(&n_remote_open), atomic_load(&n_pt_refused),
		        atomic_load(&n_pt_size_report), atomic_load(&n_read), atomic_load(&n_read_bytes),
		        atomic_load(&n_write), atomic_load(&n_write_bytes));
		if (fclose(f) == 0)
			rename(tmp, stats_path);
	}
	pthread_mutex_unlock(&stats_lock);
}
