/*
 * pt_loopback — the smallest FUSE file system that proves the patched libfuse's passthrough API
 * works end to end with the running kernel (a test program, not part of chfuse).
 *
 * It mirrors the regular files at the top level of SRCDIR through the low-level API. With
 * passthrough (the default) open and create register the file's descriptor with
 * fuse_passthrough_open() and reply with fi->backing_id set, so the kernel must send no READ or
 * WRITE request at all; with `--nopassthrough` every byte goes through the read/write handlers.
 * On unmount it writes its request counters as "name value" lines (read_requests,
 * write_requests, open_requests, passthrough_opens; the format of chfuse -o stats) to STATSFILE,
 * which the pytest suite compares.
 *
 * Usage: pt_loopback [--nopassthrough] [--debug] SRCDIR MOUNTPOINT STATSFILE   (runs in the
 * foreground, single-threaded; unmount with fusermount3 -u).
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 1024

static int src_fd = -1;
static int use_passthrough = 1;
static const char *stats_path;
static char *names[MAX_FILES]; /* inode number i + 2 names names[i] */
static int n_names;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long n_read, n_write, n_open, n_passthrough;

static fuse_ino_t ino_of(const char *name)
{
	pthread_mutex_lock(&names_lock);
	int i;
	for (i = 0; i < n_names; i++)
		if (strcmp(names[i], name) == 0)
			break;
	if (i == n_names && n_names < MAX_FILES)
		names[n_names++] = strdup(name);
	pthread_mutex_unlock(&names_lock);
	return i < MAX_FILES ? (fuse_ino_t)i + 2 : 0;
}

static const char *name_of(fuse_ino_t ino)
{
	pthread_mutex_lock(&names_lock);
	const char *n = ino >= 2 && (int)(ino - 2) < n_names ? names[ino - 2] : NULL;
	pthread_mutex_unlock(&names_lock);
	return n;
}

static int stat_ino(fuse_ino_t ino, struct stat *st)
{
	if (ino == FUSE_ROOT_ID) {
		if (fstat(src_fd, st) < 0)
			return -errno;
	} else {
		const char *n = name_of(ino);
		if (!n)
			return -ENOENT;
		if (fstatat(src_fd, n, st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	st->st_ino = ino;
	return 0;
}

static void reply_entry(fuse_req_t req, const char *name)
{
	struct fuse_entry_param e = {.attr_timeout = 1.0, .entry_timeout = 1.0};
	e.ino = ino_of(name);
	int rc = e.ino ? stat_ino(e.ino, &e.attr) : -ENOSPC;
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void pt_init(void *userdata, struct fuse_conn_info *conn)
{
	if (use_passthrough) {
		if (!(conn->capable & FUSE_CAP_PASSTHROUGH)) {
			fprintf(stderr, "pt_loopback: kernel does not offer FUSE passthrough\n");
			use_passthrough = 0;
			return;
		}
		conn->want |= FUSE_CAP_PASSTHROUGH;
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
		conn->max_backing_stack_depth = 0;
	}
}

static void pt_destroy(void *userdata)
{
	FILE *f = fopen(stats_path, "w");
	if (!f)
		return;
	fprintf(f, "read_requests %ld\nwrite_requests %ld\nopen_requests %ld\npassthrough_opens %ld\n",
	        atomic_load(&n_read), atomic_load(&n_write), atomic_load(&n_open),
	        atomic_load(&n_passthrough));
	fclose(f);
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct stat st;
	if (fstatat(src_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	reply_entry(req, name);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = stat_ino(ino, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 1.0);
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
	const char *n = name_of(ino);
	if (!n) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		int fd = openat(src_fd, n, O_WRONLY);
		if (fd < 0 || ftruncate(fd, attr->st_size) < 0) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			fuse_reply_err(req, e);
			return;
		}
		close(fd);
	}
	pt_getattr(req, ino, fi);
}

/* Opens the backing file and, with passthrough, hands it to the kernel. */
static int open_backing(fuse_req_t req, int fd, struct fuse_file_info *fi)
{
	atomic_fetch_add(&n_open, 1);
	fi->fh = (uint64_t)fd;
	if (!use_passthrough)
		return 0;
	int id = fuse_passthrough_open(req, fd);
	if (id <= 0)
		return -EIO;
	fi->backing_id = id;
	atomic_fetch_add(&n_passthrough, 1);
	return 0;
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const char *n = name_of(ino);
	int fd = n ? openat(src_fd, n, fi->flags & ~O_NOFOLLOW) : -1;
	if (fd < 0) {
		fuse_reply_err(req, n ? errno : ENOENT);
		return;
	}
	int rc = open_backing(req, fd, fi);
	if (rc < 0) {
		close(fd);
		fuse_reply_err(req, -rc);
		return;
	}
	fuse_reply_open(req, fi);
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	int fd = openat(src_fd, name, (fi->flags | O_CREAT) & ~O_NOFOLLOW, mode);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	struct fuse_entry_param e = {.attr_timeout = 1.0, .entry_timeout = 1.0};
	e.ino = ino_of(name);
	int rc = stat_ino(e.ino, &e.attr);
	if (rc == 0)
		rc = open_backing(req, fd, fi);
	if (rc < 0) {
		close(fd);
		fuse_reply_err(req, -rc);
		return;
	}
	fuse_reply_create(req, &e, fi);
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fi->backing_id > 0)
		fuse_passthrough_close(req, fi->backing_id);
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	atomic_fetch_add(&n_read, 1);
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void pt_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
	atomic_fetch_add(&n_write, 1);
	ssize_t n = pwrite((int)fi->fh, data, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

static const struct fuse_lowlevel_ops pt_ops = {
        .init = pt_init,
        .destroy = pt_destroy,
        .lookup = pt_lookup,
        .getattr = pt_getattr,
        .setattr = pt_setattr,
        .open = pt_open,
        .create = pt_create,
        .release = pt_release,
        .read = pt_read,
        .write = pt_write,
};

int main(int argc, char **argv)
{
	int debug = 0, i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--nopassthrough") == 0)
			use_passthrough = 0;
		else if (strcmp(argv[i], "--debug") == 0)
			debug = 1;
		else
			break;
	}
	if (argc - i != 3) {
		fprintf(stderr,
		        "usage: pt_loopback [--nopassthrough] [--debug] SRCDIR MOUNTPOINT STATSFILE\n");
		return 2;
	}
	src_fd = open(argv[i], O_DIRECTORY | O_RDONLY);
	if (src_fd < 0) {
		fprintf(stderr, "pt_loopback: %s: %s\n", argv[i], strerror(errno));
		return 1;
	}
	stats_path = argv[i + 2];
	char *fargv[] = {argv[0], "-d", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 2 : 1, fargv);
	struct fuse_session *se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), NULL);
	if (!se) {
		fuse_opt_free_args(&args);
		return 1;
	}
	int rc = 1;
	if (fuse_set_signal_handlers(se) == 0) {
		if (fuse_session_mount(se, argv[i + 1]) == 0) {
			rc = fuse_session_loop(se) ? 1 : 0;
			fuse_session_unmount(se);
		}
		fuse_remove_signal_handlers(se);
	}
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc;
}
