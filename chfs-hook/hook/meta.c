/*
 * meta.c — metadata syscalls on CHFS names: stat family (stat/lstat/fstat/newfstatat/statx),
 * access, mkdir, rmdir, unlink, rename, symlink, readlink, truncate, chmod/chown/utimes,
 * statfs, xattrs, link, mknod.
 *
 * Every handler first resolves its name(s); a name outside CHFS goes to the kernel (made
 * absolute if it was relative to a virtual cwd). Crossing between CHFS and the kernel is
 * EXDEV for rename and link, as between two file systems, so mv falls back to copying.
 * Owners are CHFS's (chown/lchown/fchown/fchownat go to chfs_chown/chfs_lchown, which apply
 * POSIX's rules for the process's credentials). mknod makes FIFO and socket entries (a FIFO
 * opens as a node-local shadow, fifo.c; a socket's open is ENXIO as Linux's). link/linkat
 * are chfs_link (a final symlink is not followed: linking one, or with AT_SYMLINK_FOLLOW to
 * one, is EPERM). Device mknod makes a device entry for root (EPERM for others, as without
 * CAP_MKNOD; opening one is ENXIO: the hook does not open devices). CHFS has no xattrs: xattr
 * calls ENOTSUP.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHFS_SUPER_MAGIC 0x43484653 /* "CHFS" */

static int chfs_err(void) { return errno ? -errno : -EIO; }

static void to_statx(const struct stat *st, struct statx *sx)
{
	memset(sx, 0, sizeof *sx);
	sx->stx_mask = STATX_BASIC_STATS;
	sx->stx_blksize = (unsigned)st->st_blksize;
	sx->stx_nlink = (unsigned)st->st_nlink;
	sx->stx_uid = st->st_uid;
	sx->stx_gid = st->st_gid;
	sx->stx_mode = (unsigned short)st->st_mode;
	sx->stx_ino = st->st_ino;
	sx->stx_size = (unsigned long long)st->st_size;
	sx->stx_blocks = (unsigned long long)st->st_blocks;
	sx->stx_atime.tv_sec = st->st_atim.tv_sec;
	sx->stx_atime.tv_nsec = (unsigned)st->st_atim.tv_nsec;
	sx->stx_mtime.tv_sec = st->st_mtim.tv_sec;
	sx->stx_mtime.tv_nsec = (unsigned)st->st_mtim.tv_nsec;
	sx->stx_ctime.tv_sec = st->st_ctim.tv_sec;
	sx->stx_ctime.tv_nsec = (unsigned)st->st_ctim.tv_nsec;
	sx->stx_dev_major = major(st->st_dev);
	sx->stx_dev_minor = minor(st->st_dev);
}

/* Resolve argument pair (dirfd, path); fills t. */
#define RESOLVE(dirfd, path, t)                                             \
	do {                                                                \
		int rc_ = hook_resolve((dirfd), (const char *)(path), (t)); \
		if (rc_ < 0)                                                \
			return rc_;                                         \
	} while (0)

static long ready(void) { return hook_chfs_ready(); }

/* stat of a name or, with AT_EMPTY_PATH and "", of the descriptor itself */
static long stat_at(int dirfd, const char *path, int flags, struct stat *st, int *is_chfs)
{
	*is_chfs = 1;
	if ((flags & AT_EMPTY_PATH) && hook_empty_name(path)) {
		struct hook_file *h = hook_file_of(dirfd);
		if (!h) {
			*is_chfs = 0;
			return 0;
		}
		long rc = ready();
		return rc < 0 ? rc : hook_stat_chfs(h, st);
	}
	HOOK_TARGET(t);
	RESOLVE(dirfd, path, &t);
	if (!t.chfs) {
		*is_chfs = 0;
		return 0;
	}
	long rc = ready();
	if (rc < 0)
		return rc;
	/* a trailing slash follows a final symlink, as in the kernel */
	int nofollow = (flags & AT_SYMLINK_NOFOLLOW) && !t.dir_only;
	int r = nofollow ? chfs_lstat(t.path, st) : chfs_stat(t.path, st);
	if (r != 0)
		return hook_path_err(t.path);
	return (t.dir_only && !S_ISDIR(st->st_mode)) ? -ENOTDIR : 0;
}

static long do_stat(const struct chfs_sysargs *s, int dirfd, const char *path, int flags, struct stat *out)
{
	int is_chfs;
	struct stat st;
	long rc = stat_at(dirfd, path, flags, &st, &is_chfs);
	if (rc < 0)
		return rc;
	if (!is_chfs) {
		if ((flags & AT_EMPTY_PATH) && hook_empty_name(path))
			return hook_pass(s); /* a kernel descriptor itself */
		HOOK_TARGET(t);
		RESOLVE(dirfd, path, &t);
		return RAW4(SYS_newfstatat, dirfd, t.path, out, flags);
	}
	return hook_user_put(out, &st, sizeof st);
}

static long do_statx(const long *a)
{
	int dirfd = (int)a[0], flags = (int)a[2];
	const char *path = (const char *)a[1];
	int is_chfs;
	struct stat st;
	long rc = stat_at(dirfd, path, flags, &st, &is_chfs);
	if (rc < 0)
		return rc;
	if (!is_chfs) {
		if ((flags & AT_EMPTY_PATH) && hook_empty_name(path))
			return hook_raw(SYS_statx, dirfd, a[1], flags, a[3], a[4], 0);
		HOOK_TARGET(t);
		RESOLVE(dirfd, path, &t);
		return hook_raw(SYS_statx, dirfd, (long)t.path, flags, a[3], a[4], 0);
	}
	struct statx sx;
	to_statx(&st, &sx);
	return hook_user_put((void *)a[4], &sx, sizeof sx);
}

/* One-name operations: resolve; kernel call with the resolved name, or the CHFS call. */
enum name_op {
	OP_ACCESS,
	OP_MKDIR,
	OP_RMDIR,
	OP_UNLINK,
	OP_READLINK,
	OP_TRUNCATE,
	OP_CHMOD,
	OP_CHOWN,
	OP_LCHOWN,
	OP_UTIMENS,
	OP_LUTIMENS,
	OP_STATFS,
	OP_XATTR,
	OP_MKNOD
};

/* readlink of a CHFS name into the caller's buffer (through a copy: a bad buffer is EFAULT). */
static long readlink_out(const char *p, char *buf, size_t size)
{
	char *tmp = malloc(PATH_MAX);
	if (!tmp)
		return -ENOMEM;
	int r = chfs_readlink(p, tmp, PATH_MAX);
	long rc = r < 0 ? chfs_err() : 0;
	size_t n = r < 0 ? 0 : (size_t)r < size ? (size_t)r : size;
	if (rc == 0)
		rc = hook_user_put(buf, tmp, n);
	free(tmp);
	return rc < 0 ? rc : (long)n;
}

static long chfs_name_op(enum name_op op, const char *p, const long *x)
{
	long rc = ready();
	if (rc < 0)
		return rc;
	int r;
	errno = 0;
	switch (op) {
	case OP_ACCESS: r = chfs_access(p, (int)x[0]); break;
	case OP_MKDIR: r = chfs_mkdir(p, (mode_t)x[0] & ~atomic_load(&hook_umask) & 07777); break;
	case OP_RMDIR: r = chfs_rmdir(p); break;
	case OP_UNLINK: /* libchfs refuses directories with EISDIR, as Linux does */
		r = chfs_unlink(p);
		break;
	case OP_READLINK:
		if ((long)x[1] <= 0)
			return -EINVAL;
		return readlink_out(p, (char *)x[0], (size_t)x[1]);
	case OP_TRUNCATE:
		if (x[0] < 0)
			return -EINVAL;
		r = chfs_truncate(p, (off_t)x[0]);
		break;
	case OP_CHMOD: r = chfs_chmod(p, (mode_t)x[0] & 07777); break;
	case OP_CHOWN: r = chfs_chown(p, (uid_t)x[0], (gid_t)x[1]); break;
	case OP_LCHOWN: r = chfs_lchown(p, (uid_t)x[0], (gid_t)x[1]); break;
	case OP_UTIMENS: r = chfs_utimens(p, (const struct timespec *)x[0]); break;
	case OP_LUTIMENS: r = chfs_lutimens(p, (const struct timespec *)x[0]); break;
	case OP_STATFS: {
		struct stat st;
		if (chfs_stat(p, &st) != 0)
			return hook_path_err(p);
		struct statfs *sf = (struct statfs *)x[0];
		rc = RAW2(SYS_statfs, "/", sf); /* capacity: the node's; type: ours */
		if (rc == 0)
			sf->f_type = CHFS_SUPER_MAGIC;
		return rc;
	}
	case OP_XATTR: {
		struct stat st;
		if (chfs_lstat(p, &st) != 0)
			return chfs_err();
		return -ENOTSUP;
	}
	case OP_MKNOD: /* FIFOs, sockets and device nodes as entries (libchfs special.c) */
		r = chfs_mknod(p,
		               (mode_t)(x[0] & S_IFMT) | ((mode_t)x[0] & ~atomic_load(&hook_umask) & 07777),
		               (dev_t)x[1]);
		break;
	default: return -ENOSYS;
	}
	return r >= 0 ? 0 : chfs_err();
}

/* The name is argument 0 of the plain calls and argument 1 of the *at calls. */
static long name_op(const struct chfs_sysargs *s, enum name_op op, int dirfd, const char *path,
                    const long *extra)
{
	struct hook_file *self;
	if (op == OP_READLINK && path && (self = hook_fd_path_file(path)) != NULL) {
		/* /proc/self/fd/N is a magic link to the file's name, here its mount-point name; the
		 * kernel's is ENAMETOOLONG from PATH_MAX bytes on */
		size_t n = strlen(hook_file_vpath(self)), size = (size_t)extra[1];
		if ((long)extra[1] <= 0)
			return -EINVAL;
		if (n >= PATH_MAX)
			return -ENAMETOOLONG;
		long rc = hook_user_put((char *)extra[0], hook_file_vpath(self), n < size ? n : size);
		return rc < 0 ? rc : (long)(n < size ? n : size);
	}
	HOOK_TARGET(t);
	RESOLVE(dirfd, path, &t);
	if (t.chfs)
		return chfs_name_op(op, t.path, extra);
	/* Not CHFS after all: re-issue with the resolved name in place of the path argument. */
	struct chfs_sysargs k = *s;
	k.a[path == (const char *)s->a[0] ? 0 : 1] = (long)t.path;
	return hook_pass(&k);
}

/* futimesat/utimes/utime take timevals or utimbuf; CHFS takes timespecs. */
static long utimes_op(const struct chfs_sysargs *s)
{
	const long *a = s->a;
	struct timespec ts[2], *tp = ts;
	int dirfd = AT_FDCWD, flags = 0;
	const char *path;
	switch (s->nr) {
	case SYS_utimensat:
		dirfd = (int)a[0];
		path = (const char *)a[1];
		flags = (int)a[3];
		if (a[2]) {
			memcpy(ts, (const void *)a[2], sizeof ts);
		} else {
			tp = NULL;
		}
		if (!path) { /* futimens */
			struct hook_file *h = hook_file_of(dirfd);
			long rc = ready();
			if (rc < 0)
				return rc;
			return chfs_utimens(hook_file_cpath(h), tp) == 0 ? 0 : chfs_err();
		}
		break;
	case SYS_futimesat:
	case SYS_utimes: {
		int at = s->nr == SYS_futimesat;
		if (at)
			dirfd = (int)a[0];
		path = (const char *)a[at];
		const struct timeval *tv = (const struct timeval *)a[at + 1];
		if (tv) {
			for (int i = 0; i < 2; i++) {
				ts[i].tv_sec = tv[i].tv_sec;
				ts[i].tv_nsec = tv[i].tv_usec * 1000;
			}
		} else {
			tp = NULL;
		}
		break;
	}
	default: { /* utime */
		path = (const char *)a[0];
		const long *ub = (const long *)a[1];
		if (ub) {
			ts[0].tv_sec = ub[0];
			ts[1].tv_sec = ub[1];
			ts[0].tv_nsec = ts[1].tv_nsec = 0;
		} else {
			tp = NULL;
		}
	}
	}
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
		return -EINVAL;
	HOOK_TARGET(t);
	RESOLVE(dirfd, path, &t);
	if (!t.chfs) {
		struct chfs_sysargs k = *s;
		k.a[s->nr == SYS_utimensat || s->nr == SYS_futimesat ? 1 : 0] = (long)t.path;
		return hook_pass(&k);
	}
	long x[1] = {(long)tp};
	return chfs_name_op((flags & AT_SYMLINK_NOFOLLOW) && !t.dir_only ? OP_LUTIMENS : OP_UTIMENS, t.path,
	                    x);
}

static long two_names_at(const struct chfs_sysargs *s, int d1, const char *p1, int d2, const char *p2,
                         unsigned flags, struct hook_target *t1, struct hook_target *t2)
{
	RESOLVE(d1, p1, t1);
	RESOLVE(d2, p2, t2);
	int is_link = s->nr == SYS_link || s->nr == SYS_linkat;
	if (!t1->chfs && !t2->chfs) {
		/* a relative name stays relative to its own directory descriptor */
		if (is_link)
			return hook_raw(SYS_linkat, d1, (long)t1->path, d2, (long)t2->path,
			                s->nr == SYS_linkat ? s->a[4] : 0, 0);
		return hook_raw(SYS_renameat2, d1, (long)t1->path, d2, (long)t2->path, flags, 0);
	}
	if (t1->chfs != t2->chfs)
		return -EXDEV;
	long rc = ready();
	if (rc < 0)
		return rc;
	struct stat st;
	if (is_link && (flags & ~(unsigned)(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)))
		return -EINVAL;
	if (!is_link && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	if (!is_link && (flags & RENAME_NOREPLACE) && chfs_lstat(t2->path, &st) == 0)
		return -EEXIST;
	if ((is_link ? chfs_link(t1->path, t2->path) : chfs_rename(t1->path, t2->path)) == 0)
		return 0;
	rc = hook_path_err(t1->path);
	return rc == -ENOENT && chfs_lstat(t1->path, &st) == 0 ? hook_path_err(t2->path) : rc;
}

/* Two targets are more than a 16 KiB stack frame (the hook runs on application stacks and
 * sigaltstacks): they live on the heap. */
static long two_names(const struct chfs_sysargs *s, int d1, const char *p1, int d2, const char *p2,
                      unsigned flags)
{
	struct hook_target *t = malloc(2 * sizeof *t);
	if (!t)
		return -ENOMEM;
	hook_target_init(&t[0]);
	hook_target_init(&t[1]);
	long rc = two_names_at(s, d1, p1, d2, p2, flags, &t[0], &t[1]);
	hook_target_release(&t[0]);
	hook_target_release(&t[1]);
	free(t);
	return rc;
}

static long symlink_op(const struct chfs_sysargs *s, const char *target, int dirfd, const char *path)
{
	HOOK_TARGET(t);
	RESOLVE(dirfd, path, &t);
	if (!t.chfs)
		return RAW3(SYS_symlinkat, target, dirfd, t.path);
	long rc = ready();
	if (rc < 0)
		return rc;
	/* the target is a name as the kernel reads it: EFAULT, or ENAMETOOLONG from PATH_MAX on
	 * (libchfs would take CHFS-long ones) */
	char *copy = malloc(PATH_MAX);
	if (!copy)
		return -ENOMEM;
	rc = hook_user_strcpy(target, copy, PATH_MAX);
	if (rc >= 0)
		rc = chfs_symlink(copy, t.path) == 0 ? 0 : chfs_err();
	free(copy);
	return rc;
}

static long fd_meta(const struct chfs_sysargs *s, struct hook_file *h)
{
	long rc = ready();
	if (rc < 0)
		return rc;
	switch (s->nr) {
	case SYS_fstat: {
		struct stat st;
		rc = hook_stat_chfs(h, &st);
		return rc < 0 ? rc : hook_user_put((void *)s->a[1], &st, sizeof st);
	}
	case SYS_fstatfs: {
		struct statfs *sf = (struct statfs *)s->a[1];
		rc = RAW2(SYS_statfs, "/", sf);
		if (rc == 0)
			sf->f_type = CHFS_SUPER_MAGIC;
		return rc;
	}
	case SYS_fchmod: return chfs_chmod(hook_file_cpath(h), (mode_t)s->a[1] & 07777) == 0 ? 0 : chfs_err();
	case SYS_fchown:
		return chfs_chown(hook_file_cpath(h), (uid_t)s->a[1], (gid_t)s->a[2]) == 0 ? 0 : chfs_err();
	default: /* f*xattr */ return -ENOTSUP;
	}
}

long hook_do_meta(const struct chfs_sysargs *s)
{
	const long *a = s->a;
	long x[2] = {0, 0};
	switch (s->nr) {
	case SYS_stat: return do_stat(s, AT_FDCWD, (const char *)a[0], 0, (struct stat *)a[1]);
	case SYS_lstat:
		return do_stat(s, AT_FDCWD, (const char *)a[0], AT_SYMLINK_NOFOLLOW, (struct stat *)a[1]);
	case SYS_newfstatat: return do_stat(s, (int)a[0], (const char *)a[1], (int)a[3], (struct stat *)a[2]);
	case SYS_statx: return do_statx(a);
	case SYS_fstat:
	case SYS_fstatfs:
	case SYS_fchmod:
	case SYS_fchown:
	case SYS_fgetxattr:
	case SYS_fsetxattr:
	case SYS_flistxattr:
	case SYS_fremovexattr: {
		struct hook_file *h = hook_file_of(a[0]);
		return h ? fd_meta(s, h) : hook_pass(s);
	}
	case SYS_access: x[0] = a[1]; return name_op(s, OP_ACCESS, AT_FDCWD, (const char *)a[0], x);
	case SYS_faccessat:
	case SYS_faccessat2: x[0] = a[2]; return name_op(s, OP_ACCESS, (int)a[0], (const char *)a[1], x);
	case SYS_mkdir: x[0] = a[1]; return name_op(s, OP_MKDIR, AT_FDCWD, (const char *)a[0], x);
	case SYS_mkdirat: x[0] = a[2]; return name_op(s, OP_MKDIR, (int)a[0], (const char *)a[1], x);
	case SYS_rmdir: return name_op(s, OP_RMDIR, AT_FDCWD, (const char *)a[0], x);
	case SYS_unlink: return name_op(s, OP_UNLINK, AT_FDCWD, (const char *)a[0], x);
	case SYS_unlinkat:
		if (a[2] & ~AT_REMOVEDIR)
			return -EINVAL;
		return name_op(s, (a[2] & AT_REMOVEDIR) ? OP_RMDIR : OP_UNLINK, (int)a[0], (const char *)a[1],
		               x);
	case SYS_readlink:
		x[0] = a[1];
		x[1] = a[2];
		return name_op(s, OP_READLINK, AT_FDCWD, (const char *)a[0], x);
	case SYS_readlinkat:
		x[0] = a[2];
		x[1] = a[3];
		return name_op(s, OP_READLINK, (int)a[0], (const char *)a[1], x);
	case SYS_truncate: x[0] = a[1]; return name_op(s, OP_TRUNCATE, AT_FDCWD, (const char *)a[0], x);
	case SYS_chmod: x[0] = a[1]; return name_op(s, OP_CHMOD, AT_FDCWD, (const char *)a[0], x);
	case SYS_fchmodat: x[0] = a[2]; return name_op(s, OP_CHMOD, (int)a[0], (const char *)a[1], x);
	case SYS_chown:
	case SYS_lchown:
		x[0] = a[1];
		x[1] = a[2];
		return name_op(s, s->nr == SYS_lchown ? OP_LCHOWN : OP_CHOWN, AT_FDCWD, (const char *)a[0],
		               x);
	case SYS_fchownat:
		if (a[4] & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
			return -EINVAL;
		if ((a[4] & AT_EMPTY_PATH) && a[1] && !*(const char *)a[1]) { /* fchown of dirfd */
			struct hook_file *h = hook_file_of((int)a[0]);
			if (!h)
				return hook_pass(s);
			long rc = ready();
			if (rc < 0)
				return rc;
			return chfs_lchown(hook_file_cpath(h), (uid_t)a[2], (gid_t)a[3]) == 0 ? 0
			                                                                      : chfs_err();
		}
		x[0] = a[2];
		x[1] = a[3];
		return name_op(s, (a[4] & AT_SYMLINK_NOFOLLOW) ? OP_LCHOWN : OP_CHOWN, (int)a[0],
		               (const char *)a[1], x);
	case SYS_statfs: x[0] = a[1]; return name_op(s, OP_STATFS, AT_FDCWD, (const char *)a[0], x);
	case SYS_getxattr:
	case SYS_lgetxattr:
	case SYS_setxattr:
	case SYS_lsetxattr:
	case SYS_listxattr:
	case SYS_llistxattr:
	case SYS_removexattr:
	case SYS_lremovexattr: return name_op(s, OP_XATTR, AT_FDCWD, (const char *)a[0], x);
	case SYS_mknod:
		x[0] = a[1];
		x[1] = a[2];
		return name_op(s, OP_MKNOD, AT_FDCWD, (const char *)a[0], x);
	case SYS_mknodat:
		x[0] = a[2];
		x[1] = a[3];
		return name_op(s, OP_MKNOD, (int)a[0], (const char *)a[1], x);
	case SYS_utime:
	case SYS_utimes:
	case SYS_futimesat:
	case SYS_utimensat: return utimes_op(s);
	case SYS_rename: return two_names(s, AT_FDCWD, (const char *)a[0], AT_FDCWD, (const char *)a[1], 0);
	case SYS_renameat:
		return two_names(s, (int)a[0], (const char *)a[1], (int)a[2], (const char *)a[3], 0);
	case SYS_renameat2:
		return two_names(s, (int)a[0], (const char *)a[1], (int)a[2], (const char *)a[3],
		                 (unsigned)a[4]);
	case SYS_link: return two_names(s, AT_FDCWD, (const char *)a[0], AT_FDCWD, (const char *)a[1], 0);
	case SYS_linkat:
		return two_names(s, (int)a[0], (const char *)a[1], (int)a[2], (const char *)a[3],
		                 (unsigned)a[4]);
	case SYS_symlink: return symlink_op(s, (const char *)a[0], AT_FDCWD, (const char *)a[1]);
	case SYS_symlinkat: return symlink_op(s, (const char *)a[0], (int)a[1], (const char *)a[2]);
	case SYS_openat2: {
		const struct {
			unsigned long long flags, mode, resolve;
		} *how = (const void *)a[2];
		HOOK_TARGET(t);
		RESOLVE((int)a[0], (const char *)a[1], &t);
		if (!t.chfs) {
			struct chfs_sysargs k = *s;
			k.a[1] = (long)t.path;
			return hook_pass(&k);
		}
		return hook_do_open((int)a[0], (const char *)a[1], (int)how->flags, (mode_t)how->mode, s);
	}
	default: return hook_pass(s);
	}
}
