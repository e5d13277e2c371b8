/*
 * chfuse_ops.c — the FUSE operations of chfuse, each a translation to chfs.h.
 *
 * libchfs reports errors as -1 + errno (like POSIX); every handler returns -errno, the FUSE
 * convention. An open file is a struct chfuse_file in fi->fh: the libchfs descriptor, plus the
 * shared backing-file entry when the file is served by kernel passthrough. Passthrough is
 * decided per open: if chfs_local_backing_path() says every chunk of the file lives on this
 * node's server, the kernel gets the backing file; otherwise (hash-placed file, passthrough
 * off, or the backing file cannot be registered) reads and writes come here and go through
 * libchfs. The server derives size and times of local files from the backing file, so writes
 * the kernel makes directly are visible to every other client's stat.
 *
 * Owners: every operation on names acts for the requesting process (chfs_act_as with the
 * uid/gid of fuse_get_context), so what a user creates is that user's, also under
 * allow_other; the kernel checks permissions (default_permissions, including chown's rules)
 * before a request reaches us, so libchfs only records owners (CHFS_ACT_CHECKED).
 *
 * A file unlinked or renamed over while open stays usable until its last release
 * (chfuse_hidden.c). FIFOs and sockets are CHFS entries the kernel runs (op_mknod). Hard links
 * are chfs_link (every name of a linked file reports the file's nlink; libfuse's high-level API
 * gives each name its own kernel inode, kept coherent by the short attribute timeout and by
 * opens that drop the page cache). What CHFS does not keep is refused with a clear errno,
 * never faked: RENAME_EXCHANGE (EINVAL). Device nodes are CHFS entries the kernel opens. statfs has no chfs.h call: it reports the file system holding this
 * node's backing files, scaled by the number of servers (an estimate for df, documented).
 */
#include "chfuse.h"

#include <chfs.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h> /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

struct chfuse_file {
	int fd;                    /* libchfs descriptor */
	struct chfuse_backing *bk; /* non-NULL: served by passthrough */
	atomic_bool written;       /* written through the daemon since the last flush */
};

static inline int neg_errno(void) { return errno ? -errno : -EIO; }

static inline struct chfuse_file *file_of(struct fuse_file_info *fi)
{
	return (struct chfuse_file *)(uintptr_t)fi->fh;
}

static int session_fd(void) { return fuse_session_fd(fuse_get_session(fuse_get_context()->fuse)); }

/* This thread's libchfs calls act for the process that made the request (see the top). */
static void act_for_caller(void)
{
	const struct fuse_context *ctx = fuse_get_context();
	chfs_act_as(ctx->uid, ctx->gid, 0, NULL, CHFS_ACT_CHECKED);
}

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->hard_remove = 0; /* an open file's unlink: libfuse hides it (chfuse_hidden.c) */
	cfg->nullpath_ok = 0;
	cfg->use_ino = 1; /* st_ino is the CHFS file id: hard links show as one file (ls -i, du, find) */
	cfg->attr_timeout = 1.0; /* other nodes change files: keep kernel caches short */
	cfg->entry_timeout = 1.0;
	cfg->negative_timeout = 0.0;
	if (chfuse_cfg.passthrough) {
		if (conn->capable & FUSE_CAP_PASSTHROUGH) {
			conn->want |= FUSE_CAP_PASSTHROUGH;
			conn->want &= ~FUSE_CAP_WRITEBACK_CACHE; /* the kernel refuses both together */
			conn->max_backing_stack_depth = 1;       /* backing dir may sit on overlayfs */
			atomic_store(&chfuse_passthrough_active, true);
		} else {
			fprintf(stderr, "chfuse: the kernel offers no FUSE passthrough (needs Linux >= 6.9 "
			                "with CONFIG_FUSE_PASSTHROUGH); all I/O goes through the daemon\n");
		}
	}
	return NULL;
}

static void op_destroy(void *private_data) { chfuse_stats_dump(); }

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	int hfd = fi || !path ? -1 : chfuse_hidden_fd(path);
	int rc = fi ? chfs_fstat(file_of(fi)->fd, st) : hfd >= 0 ? chfs_fstat(hfd, st) : chfs_lstat(path, st);
	if (rc < 0)
		return neg_errno();
	if (path && chfuse_is_hidden_name(path) && st->st_nlink > 0)
		st->st_nlink++; /* libfuse takes one off for its hidden name: other hard links remain */
	else if (hfd < 0)
		chfuse_links_seen(path, st); /* (fi: libfuse passes the path too, nullpath_ok off) */
	return 0;
}

static int op_access(const char *path, int mask)
{
	act_for_caller();
	return chfs_access(path, mask) < 0 ? neg_errno() : 0;
}

static int op_readlink(const char *path, char *buf, size_t size)
{
	if (size == 0)
		return -EINVAL;
	int n = chfs_readlink(path, buf, size - 1);
	if (n < 0)
		return neg_errno();
	buf[(size_t)n < size - 1 ? (size_t)n : size - 1] = '\0';
	return 0;
}

static int op_mkdir(const char *path, mode_t mode)
{
	act_for_caller();
	return chfs_mkdir(path, mode) < 0 ? neg_errno() : 0;
}

static int op_unlink(const char *path)
{
	if (chfuse_unhide(path))
		return 0; /* the last release of a file unlinked while open */
	act_for_caller();
	if (chfs_unlink(path) < 0)
		return neg_errno();
	chfuse_links_changed(path, 1); /* the other names' nlink */
	return 0;
}

/* FIFOs and sockets: the kernel runs them on the inode (chfs.h chfs_mknod). */
static int op_mknod(const char *path, mode_t mode, dev_t rdev)
{
	act_for_caller();
	return chfs_mknod(path, mode, rdev) < 0 ? neg_errno() : 0;
}

static int op_link(const char *from, const char *to)
{
	act_for_caller();
	if (chfs_link(from, to) < 0)
		return neg_errno();
	struct stat st; /* every name's nlink and ctime changed: the old ones' caches go */
	if (chfs_lstat(from, &st) == 0) {
		chfuse_links_seen(from, &st);
		chfuse_links_seen(to, &st);
		chfuse_links_changed(to, 0);
	}
	return 0;
}

static int op_rmdir(const char *path)
{
	act_for_caller();
	return chfs_rmdir(path) < 0 ? neg_errno() : 0;
}

static int op_symlink(const char *target, const char *path)
{
	act_for_caller();
	return chfs_symlink(target, path) < 0 ? neg_errno() : 0;
}

static int op_rename(const char *from, const char *to, unsigned int flags)
{
	if (flags & RENAME_EXCHANGE)
		return -EINVAL; /* CHFS has no atomic exchange */
	act_for_caller();
	if (flags == 0 && chfuse_is_hidden_name(to) && chfuse_hidden_fd(to) < 0)
		return chfuse_hide(from, to); /* an open file loses its name (chfuse_hidden.c) */
	if (flags & RENAME_NOREPLACE) {
		struct stat st;
		if (chfs_lstat(to, &st) == 0)
			return -EEXIST;
	}
	if (chfs_rename(from, to) < 0)
		return neg_errno();
	chfuse_links_changed(to, 1); /* a linked file replaced: its other names' nlink */
	chfuse_links_changed(from, 1);
	return 0;
}

static int op_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	act_for_caller();
	if (chfs_chmod(path, mode) < 0)
		return neg_errno();
	chfuse_links_changed(path, 0);
	return 0;
}

static int op_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	act_for_caller();
	if (chfs_lchown(path, uid, gid) < 0)
		return neg_errno();
	chfuse_links_changed(path, 0);
	return 0;
}

/* Runs fn on the node-local backing file of `path` (fi's, if open with passthrough), if it
 * has one; returns fn's result, or 0 if the file is not node-local. */
static int on_backing(const char *path, struct fuse_file_info *fi, int (*fn)(int fd, const void *arg),
                      const void *arg)
{
	if (fi && file_of(fi)->bk)
		return fn(chfuse_backing_fd(file_of(fi)->bk), arg);
	int fd = fi ? file_of(fi)->fd : chfs_open(path, O_RDONLY);
	if (fd < 0)
		return 0; /* the CHFS call itself succeeded; nothing local to fix */
	char backing[PATH_MAX];
	int rc = 0;
	if (chfs_local_backing_path(fd, backing, sizeof backing) == 0) {
		int bfd = open(backing, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		rc = bfd < 0 ? neg_errno() : fn(bfd, arg);
		if (bfd >= 0)
			close(bfd);
	}
	if (!fi)
		chfs_close(fd);
	return rc;
}

static int truncate_fd(int fd, const void *arg)
{
	return ftruncate(fd, *(const off_t *)arg) < 0 ? neg_errno() : 0;
}

static int utimens_fd(int fd, const void *arg) { return futimens(fd, arg) < 0 ? neg_errno() : 0; }

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	act_for_caller();
	int rc = fi ? chfs_ftruncate(file_of(fi)->fd, size) : chfs_truncate(path, size);
	if (rc < 0)
		return neg_errno();
	chfuse_links_changed(path, 0);
	/* libchfs records an extending truncate in the metadata only (holes read as zeros through
	 * the pool), but the kernel reads, writes and mmaps a passthrough file's backing file
	 * itself: its length must be the file's, or reads stop short and mmap faults (SIGBUS). */
	return on_backing(path, fi, truncate_fd, &size);
}

static int op_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	act_for_caller();
	/* The kernel resolved every symlink already: a symlink's node here is the link itself. */
	if (chfs_lutimens(path, tv) < 0)
		return neg_errno();
	chfuse_links_changed(path, 0);
	/* The server derives a node-local file's times from its backing file: set them there. */
	return on_backing(path, fi, utimens_fd, tv);
}

/* Decides passthrough for a freshly opened CHFS descriptor and fills fi. */
static int finish_open(const char *path, int fd, struct fuse_file_info *fi)
{
	struct chfuse_file *f = calloc(1, sizeof *f);
	if (!f) {
		chfs_close(fd);
		return -ENOMEM;
	}
	f->fd = fd;
	chfuse_count(CHFUSE_OPEN, 1);
	char backing[PATH_MAX];
	if (chfs_local_backing_path(fd, backing, sizeof backing) == 0) {
		if (atomic_load(&chfuse_passthrough_active)) {
			int id, err;
			f->bk = chfuse_backing_get(session_fd(), backing, &id, &err);
			if (f->bk) {
				fi->backing_id = id;
				chfuse_count(CHFUSE_PASSTHROUGH, 1);
			} else {
				fprintf(stderr,
				        "chfuse: %s: passthrough to %s refused (%s); serving it "
				        "through the daemon\n",
				        path, backing, strerror(-err));
				fi->direct_io = 1; /* never mix cached I/O with another open's passthrough */
				chfuse_count(CHFUSE_LOCAL_NOPT, 1);
			}
		} else {
			chfuse_count(CHFUSE_LOCAL_NOPT, 1);
		}
	}
	fi->fh = (uint64_t)(uintptr_t)f;
	return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
	act_for_caller();
	int fd = chfs_open(path, fi->flags & (O_ACCMODE | O_TRUNC | O_APPEND | O_DIRECTORY));
	if (fd < 0)
		return neg_errno();
	return finish_open(path, fd, fi);
}

static int op_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	/* open-or-create-exclusive in one call: another node's concurrent create of the same
	 * name is opened, not truncated; a missing parent is ENOENT */
	act_for_caller();
	int32_t flags = O_CREAT | (fi->flags & (O_ACCMODE | O_EXCL | O_TRUNC | O_APPEND));
	if (chfuse_cfg.create_local)
		flags |= CHFS_O_LOCAL;
	int fd = chfs_open_posix(path, flags, mode, 0);
	if (fd < 0)
		return neg_errno();
	return finish_open(path, fd, fi);
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	chfuse_count(CHFUSE_READ, 1);
	ssize_t n = chfs_pread(file_of(fi)->fd, buf, size, off);
	if (n < 0)
		return neg_errno();
	chfuse_count(CHFUSE_READ_BYTES, n);
	return (int)n;
}

static int op_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	chfuse_count(CHFUSE_WRITE, 1);
	struct chfuse_file *f = file_of(fi);
	ssize_t n;
	if (fi->flags & O_APPEND) {
		/* The kernel sends the old EOF as offset only with a cached size; libchfs appends. */
		n = chfs_write(f->fd, buf, size);
	} else {
		n = chfs_pwrite(f->fd, buf, size, off);
	}
	if (n < 0)
		return neg_errno();
	atomic_store(&f->written, true);
	chfuse_count(CHFUSE_WRITE_BYTES, n);
	return (int)n;
}

static int op_statfs(const char *path, struct statvfs *sv)
{
	memset(sv, 0, sizeof *sv);
	const char *dir = chfuse_backing_dir();
	if (dir && statvfs(dir, sv) == 0) {
		unsigned long n = chfs_size() > 0 ? (unsigned long)chfs_size() : 1;
		sv->f_blocks *= n;
		sv->f_bfree *= n;
		sv->f_bavail *= n;
	} else {
		sv->f_bsize = sv->f_frsize = 4096; /* capacity unknown until a local file was seen */
	}
	sv->f_namemax = 255;
	return 0;
}

/* close(2) of the application. The release (where libchfs closes the descriptor and reports
 * the file's size) comes later and asynchronously, so a process that opens the file on another
 * node right after this close could see the old size: report it now, if anything was written
 * through the daemon (passthrough writes go straight to the backing file, which is where the
 * server reads the size of a node-local file from). chfs_fsync also pushes libchfs's write-back
 * buffer (CHFS_BUF_SIZE). */
static int op_flush(const char *path, struct fuse_file_info *fi)
{
	struct chfuse_file *f = file_of(fi);
	if (!atomic_exchange(&f->written, false))
		return 0;
	if (chfs_fsync(f->fd) < 0)
		return neg_errno();
	chfuse_links_changed(path, 0); /* the size the other names report */
	return 0;
}

static int op_release(const char *path, struct fuse_file_info *fi)
{
	struct chfuse_file *f = file_of(fi);
	if (f->bk)
		chfuse_backing_put(session_fd(), f->bk);
	int rc = chfs_close(f->fd);
	free(f);
	return rc < 0 ? neg_errno() : 0;
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct chfuse_file *f = file_of(fi);
	/* FUSE passthrough forwards reads, writes and mmap, not fsync: sync the backing file. */
	if (f->bk && (datasync ? fdatasync(chfuse_backing_fd(f->bk)) : fsync(chfuse_backing_fd(f->bk))) < 0)
		return neg_errno();
	return chfs_fsync(f->fd) < 0 ? neg_errno() : 0;
}

struct dir_fill {
	void *buf;
	fuse_fill_dir_t filler;
};

static int dir_fill_one(void *arg, const char *name, const struct stat *st, off_t off)
{
	struct dir_fill *d = arg;
	if (st && st->st_ino == 0) {  /* a listing has no file ids: d_ino "unknown", libfuse's own */
		struct stat cp = *st; /* value without use_ino (d_ino 0 would hide the entry) */
		cp.st_ino = 0xffffffff;
		return d->filler(d->buf, name, &cp, 0, 0);
	}
	return d->filler(d->buf, name, st, 0, 0);
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct dir_fill d = {buf, filler};
	act_for_caller();
	return chfs_readdir(path, &d, dir_fill_one) < 0 ? neg_errno() : 0;
}

const struct fuse_operations chfuse_ops = {
        .init = op_init,
        .destroy = op_destroy,
        .getattr = op_getattr,
        .access = op_access,
        .readlink = op_readlink,
        .mkdir = op_mkdir,
        .unlink = op_unlink,
        .mknod = op_mknod,
        .rmdir = op_rmdir,
        .symlink = op_symlink,
        .link = op_link,
        .rename = op_rename,
        .chmod = op_chmod,
        .chown = op_chown,
        .truncate = op_truncate,
        .utimens = op_utimens,
        .open = op_open,
        .create = op_create,
        .read = op_read,
        .write = op_write,
        .statfs = op_statfs,
        .flush = op_flush,
        .release = op_release,
        .fsync = op_fsync,
        .readdir = op_readdir,
};
