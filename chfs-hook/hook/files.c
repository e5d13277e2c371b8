/*
 * files.c — open, close, read, write, seek, dup, fcntl and copies on CHFS descriptors.
 *
 * Offsets live in the kernel placeholder (see fdtable.c): a read is lseek(SEEK_CUR), a
 * chfs_pread at that offset, and an lseek(SEEK_SET) past what was read. O_APPEND writes go to
 * the size chfs_fstat reports. Access modes are checked here so a write on an O_RDONLY
 * descriptor is EBADF exactly as on a local file system. copy_file_range, sendfile and splice
 * involving CHFS are emulated with read/write through a bounce buffer.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int chfs_err(void) { return errno ? -errno : -EIO; }

int hook_stat_chfs(struct hook_file *h, struct stat *st)
{
	return chfs_fstat(h->cfd, st) == 0 ? 0 : chfs_err();
}

/* Open the backing file directly when the file's data is all on this node's server. Not
 * inlined: its name buffer and the caller's hook_target would make one frame above 16 KiB. */
__attribute__((noinline)) static int open_backing(int cfd, int flags, int cloexec)
{
	char path[PATH_MAX];
	if (!hook_cfg.local_fast_path || chfs_local_backing_path(cfd, path, sizeof path) != 0)
		return -1;
	int kfl = (flags & (O_ACCMODE | O_APPEND)) | (cloexec ? O_CLOEXEC : 0);
	long fd = RAW2(SYS_open, path, kfl);
	return fd < 0 ? -1 : (int)fd;
}

static long open_chfs(const struct hook_target *t, int flags, mode_t mode)
{
	int rc = hook_chfs_ready();
	if (rc < 0)
		return rc;
	int acc = flags & O_ACCMODE;
	if (acc == O_ACCMODE)
		return -EINVAL;
	if ((flags & O_CREAT) && (flags & O_DIRECTORY))
		return -EINVAL;
	if ((flags & O_CREAT) && t->dir_only)
		return -EISDIR;
	if (flags & O_NOFOLLOW) {
		struct stat st;
		if (chfs_lstat(t->path, &st) == 0 && S_ISLNK(st.st_mode))
			return -ELOOP;
	}
	errno = 0;
	mode_t m = mode & ~atomic_load(&hook_umask) & 07777;
	/* one call: opens the existing file or creates it exclusively (a concurrent creator's
   * bytes are never truncated), ENOENT for a missing parent as a local file system */
	int cfd = chfs_open_posix(
	        t->path, flags & (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_DIRECTORY), m, 0);
	if (cfd < 0 && errno == ENXIO) /* a FIFO or a socket (fifo.c) */
		return hook_open_fifo(t->path, flags);
	if (cfd < 0)
		return hook_path_err(t->path);
	int fmode = chfs_mode_of(cfd); /* the type the open found: no second lookup */
	if (fmode < 0) {
		rc = chfs_err();
		chfs_close(cfd);
		return rc;
	}
	int is_dir = S_ISDIR((mode_t)fmode);
	rc = 0;
	if (is_dir && acc != O_RDONLY)
		rc = -EISDIR;
	else if (!is_dir && ((flags & O_DIRECTORY) || t->dir_only))
		rc = -ENOTDIR;
	if (rc < 0) {
		chfs_close(cfd);
		return rc;
	}
	int cloexec = (flags & O_CLOEXEC) != 0;
	int kfd = is_dir ? -1 : open_backing(cfd, flags, cloexec);
	int local = kfd >= 0;
	if (!local)
		kfd = hook_placeholder_open(flags & (O_ACCMODE | O_APPEND), t->vpath, cloexec);
	if (kfd < 0) {
		chfs_close(cfd);
		return kfd;
	}
	struct hook_file *h =
	        hook_file_new(cfd, flags & (O_ACCMODE | O_APPEND | O_NONBLOCK), is_dir, t->vpath, t->path);
	if (!h) {
		chfs_close(cfd);
		RAW1(SYS_close, kfd);
		return -ENOMEM;
	}
	h->local = local;
	hook_fd_install(kfd, h);
	return kfd;
}

long hook_do_open(int dirfd, const char *path, int flags, mode_t mode, const struct chfs_sysargs *s)
{
	HOOK_TARGET(t);
	int rc = hook_resolve(dirfd, path, &t);
	if (rc < 0)
		return rc;
	if (t.chfs)
		return open_chfs(&t, flags, mode);
	if (s->nr == SYS_openat)
		return RAW4(SYS_openat, dirfd, t.path, flags, mode);
	return RAW4(SYS_openat, AT_FDCWD, t.path, flags, mode); /* open, creat */
}

long hook_do_close(int fd)
{
	long rc = RAW1(SYS_close, fd);
	hook_fd_forget(fd); /* Linux frees the number even when close reports an error */
	return rc;
}

/* ---- data ------------------------------------------------------------------------------ */

static long cur_offset(int fd) { return RAW3(SYS_lseek, fd, 0, SEEK_CUR); }

long hook_do_read(int fd, void *buf, size_t n, off_t off)
{
	struct hook_file *h = hook_file_of(fd);
	if (!h)
		return -EBADF;
	if (h->is_dir)
		return -EISDIR;
	if ((h->flags & O_ACCMODE) == O_WRONLY)
		return -EBADF;
	if (h->local) /* positioned read on a fast-path descriptor */
		return off < 0 ? RAW3(SYS_read, fd, buf, n) : RAW4(SYS_pread64, fd, buf, n, off);
	int advance = off < 0;
	if (advance && (off = cur_offset(fd)) < 0)
		return off;
	ssize_t r = chfs_pread(h->cfd, buf, n, off);
	if (r < 0)
		return chfs_err();
	if (advance && r > 0)
		RAW3(SYS_lseek, fd, off + r, SEEK_SET);
	return r;
}

long hook_do_write(int fd, const void *buf, size_t n, off_t off)
{
	struct hook_file *h = hook_file_of(fd);
	if (!h)
		return -EBADF;
	if (h->is_dir || (h->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (h->local)
		return off < 0 ? RAW3(SYS_write, fd, buf, n) : RAW4(SYS_pwrite64, fd, buf, n, off);
	int advance = off < 0;
	if (advance) {
		if (h->flags & O_APPEND) {
			struct stat st;
			int rc = hook_stat_chfs(h, &st);
			if (rc < 0)
				return rc;
			off = st.st_size;
		} else if ((off = cur_offset(fd)) < 0) {
			return off;
		}
	}
	ssize_t w = chfs_pwrite(h->cfd, buf, n, off);
	if (w < 0)
		return chfs_err();
	if (advance)
		RAW3(SYS_lseek, fd, off + w, SEEK_SET);
	return w;
}

/* Sum of the lengths; EINVAL when it exceeds SSIZE_MAX (POSIX readv/writev), checked before
 * adding so a sum that wraps size_t cannot pass as a small one. */
static long iov_total(const struct iovec *iov, int cnt, size_t *total)
{
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	*total = 0;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - *total)
			return -EINVAL;
		*total += iov[i].iov_len;
	}
	return 0;
}

/* Vectored I/O gathers into one buffer so a CHFS file sees one request, not one per piece. */
long hook_do_readv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	size_t total;
	long rc = iov_total(iov, cnt, &total);
	if (rc < 0)
		return rc;
	if (cnt == 1)
		return hook_do_read(fd, iov[0].iov_base, iov[0].iov_len, off);
	char *buf = malloc(total ? total : 1);
	if (!buf)
		return -ENOMEM;
	long r = hook_do_read(fd, buf, total, off);
	size_t done = 0;
	for (int i = 0; r > 0 && i < cnt && done < (size_t)r; i++) {
		size_t k = iov[i].iov_len < (size_t)r - done ? iov[i].iov_len : (size_t)r - done;
		memcpy(iov[i].iov_base, buf + done, k);
		done += k;
	}
	free(buf);
	return r;
}

long hook_do_writev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	size_t total;
	long rc = iov_total(iov, cnt, &total);
	if (rc < 0)
		return rc;
	if (cnt == 1)
		return hook_do_write(fd, iov[0].iov_base, iov[0].iov_len, off);
	char *buf = malloc(total ? total : 1);
	if (!buf)
		return -ENOMEM;
	size_t done = 0;
	for (int i = 0; i < cnt; i++) {
		memcpy(buf + done, iov[i].iov_base, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	long w = hook_do_write(fd, buf, total, off);
	free(buf);
	return w;
}

long hook_do_lseek(int fd, off_t off, int whence)
{
	struct hook_file *h = hook_file_of(fd);
	if (!h)
		return -EBADF;
	if (h->is_dir) { /* rewinddir/seekdir: positions are entry indexes */
		if (whence != SEEK_SET && whence != SEEK_CUR)
			return -EINVAL;
		return RAW3(SYS_lseek, fd, off, whence);
	}
	if (whence == SEEK_SET || whence == SEEK_CUR)
		return RAW3(SYS_lseek, fd, off, whence);
	struct stat st;
	int rc = hook_stat_chfs(h, &st);
	if (rc < 0)
		return rc;
	switch (whence) {
	case SEEK_END:
		if (st.st_size + off < 0)
			return -EINVAL;
		return RAW3(SYS_lseek, fd, st.st_size + off, SEEK_SET);
	case SEEK_DATA: /* no holes are reported: data runs to the end */
	case SEEK_HOLE:
		if (off < 0 || off >= st.st_size)
			return -ENXIO;
		return RAW3(SYS_lseek, fd, whence == SEEK_DATA ? off : st.st_size, SEEK_SET);
	default: return -EINVAL;
	}
}

/* ---- descriptors ----------------------------------------------------------------------- */

long hook_do_dup(const struct chfs_sysargs *s)
{
	int oldfd = (int)s->a[0];
	long nfd = hook_pass(s);
	if (nfd < 0 || nfd == oldfd)
		return nfd;
	struct hook_file *h = hook_file_of(oldfd);
	if (h)
		hook_fd_install((int)nfd, h);
	else
		hook_fd_forget((int)nfd); /* a kernel file replaced a CHFS descriptor (dup2 onto it) */
	return nfd;
}

long hook_do_fcntl(int fd, int cmd, long arg)
{
	struct hook_file *h = hook_file_of(fd);
	long rc;
	if (!h) /* closed by another thread since the filter looked */
		return RAW3(SYS_fcntl, fd, cmd, arg);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		rc = RAW3(SYS_fcntl, fd, cmd, arg);
		if (rc >= 0 && h)
			hook_fd_install((int)rc, h);
		return rc;
	case F_GETFD:
	case F_SETFD: return RAW3(SYS_fcntl, fd, cmd, arg);
	case F_GETFL: return h->flags | (h->local ? 0 : O_LARGEFILE);
	case F_SETFL: {
		int change = O_APPEND | O_NONBLOCK;
		rc = RAW3(SYS_fcntl, fd, F_SETFL, arg & change);
		if (rc == 0)
			h->flags = (h->flags & ~change) | ((int)arg & change);
		return rc;
	}
	case F_GETLK:
	case F_SETLK:
	case F_SETLKW:
	case F_OFD_GETLK:
	case F_OFD_SETLK:
	case F_OFD_SETLKW:
		/* Advisory locks on the placeholder: they exclude processes of this node only. */
		return RAW3(SYS_fcntl, fd, cmd, arg);
	default: return -EINVAL;
	}
}

long hook_do_close_range(const struct chfs_sysargs *s)
{
	unsigned first = (unsigned)s->a[0], last = (unsigned)s->a[1];
	long rc = hook_pass(s);
	if (rc < 0 || (s->a[2] & CLOSE_RANGE_CLOEXEC))
		return rc;
	for (unsigned fd = first; fd <= last && (int)fd <= hook_fd_max; fd++) {
		if (hook_fdtab[fd])
			hook_fd_forget((int)fd);
		if (atomic_load(&hook_nfiles) == 0)
			break;
	}
	return rc;
}

/* ---- copies ---------------------------------------------------------------------------- */

static long any_read(int fd, void *buf, size_t n, off_t off)
{
	if (hook_file_of(fd))
		return hook_do_read(fd, buf, n, off);
	return off < 0 ? RAW3(SYS_read, fd, buf, n) : RAW4(SYS_pread64, fd, buf, n, off);
}

static long any_write(int fd, const void *buf, size_t n, off_t off)
{
	if (hook_file_of(fd))
		return hook_do_write(fd, buf, n, off);
	return off < 0 ? RAW3(SYS_write, fd, buf, n) : RAW4(SYS_pwrite64, fd, buf, n, off);
}

/* Copies up to len bytes; the offsets inoff and outoff (if not NULL) are used and advanced instead of the
 * descriptors' offsets. Returns bytes copied, or -errno if nothing was. */
static long copy_range(int in, loff_t *inoff, int out, loff_t *outoff, size_t len)
{
	size_t bufsize = len < (1 << 20) ? (len ? len : 1) : (1 << 20);
	char *buf = malloc(bufsize);
	if (!buf)
		return -ENOMEM;
	long done = 0, err = 0;
	while ((size_t)done < len) {
		size_t want = len - (size_t)done < bufsize ? len - (size_t)done : bufsize;
		long r = any_read(in, buf, want, inoff ? *inoff : -1);
		if (r <= 0) {
			err = r;
			break;
		}
		long w = 0;
		while (w < r) {
			long k = any_write(out, buf + w, (size_t)(r - w), outoff ? *outoff + w : -1);
			if (k <= 0) {
				err = k ? k : -EIO;
				break;
			}
			w += k;
		}
		if (inoff)
			*inoff += w;
		if (outoff)
			*outoff += w;
		done += w;
		if (w < r) /* the reader's offset moved past what was written: put it back */
		{
			if (!inoff)
				RAW3(SYS_lseek, in, -(r - w), SEEK_CUR);
			break;
		}
	}
	free(buf);
	return done > 0 ? done : err;
}

long hook_do_copy(const struct chfs_sysargs *s)
{
	const long *a = s->a;
	if (s->nr == SYS_sendfile) /* sendfile(out, in, *offset, count) */
		return copy_range((int)a[1], (loff_t *)a[2], (int)a[0], NULL, (size_t)a[3]);
	if (s->nr == SYS_copy_file_range && a[5] != 0)
		return -EINVAL;
	/* copy_file_range / splice (in, *off_in, out, *off_out, len, flags) */
	return copy_range((int)a[0], (loff_t *)a[1], (int)a[2], (loff_t *)a[3], (size_t)a[4]);
}

long hook_do_fdop(const struct chfs_sysargs *s)
{
	int fd = (int)s->a[0];
	struct hook_file *h = hook_file_of(fd);
	if (!h)
		return hook_pass(s);
	switch (s->nr) {
	case SYS_fsync:
	case SYS_fdatasync: return chfs_fsync(h->cfd) == 0 ? 0 : chfs_err();
	case SYS_ftruncate:
		if (s->a[1] < 0)
			return -EINVAL;
		if (h->is_dir)
			return -EISDIR;
		if ((h->flags & O_ACCMODE) == O_RDONLY)
			return -EINVAL;
		return chfs_ftruncate(h->cfd, s->a[1]) == 0 ? 0 : chfs_err();
	case SYS_fallocate: {
		if (s->a[1] != 0)
			return -EOPNOTSUPP;
		if ((h->flags & O_ACCMODE) == O_RDONLY)
			return -EBADF;
		struct stat st;
		int rc = hook_stat_chfs(h, &st);
		if (rc < 0)
			return rc;
		off_t end = s->a[2] + s->a[3];
		if (end > st.st_size && chfs_ftruncate(h->cfd, end) != 0)
			return chfs_err();
		return 0;
	}
	default: /* fadvise64, readahead and sync_file_range are advice only */ return 0;
	}
}
