/*
 * follow.c — a working directory or descriptor whose directory another process renamed.
 *
 * The kernel's cwd and directory descriptors are the directory itself, so they follow a rename
 * of it or of a directory above it; ours (the virtual cwd, a hook_file) are names. When a call
 * relative to one of them fails with ENOENT, the dispatcher asks here whether that directory
 * still has the name we know; if another process moved it, libchfs finds its new name by its
 * identity (chfs_follow: the servers' rename notes), the cwd or descriptor takes that name and
 * the call is made once more. Calls that succeed pay nothing; a call that fails pays one
 * lookup per relative base (a rename notes query only when the base really is gone). A rename
 * that a server no longer remembers (its notes are a bounded ring, lost on restart) is not
 * followed: the call keeps its ENOENT, as before. getcwd reports the new name once a call has
 * followed it.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

/* The mount point name (vpath) of CHFS path cpath under the mount that vpath `was` is under. */
static int vpath_in_mount_of(const char *was, const char *cpath, char *out, size_t size)
{
	for (int m = 0; m < hook_cfg.nmounts; m++) {
		const struct hook_mount *mt = &hook_cfg.mounts[m];
		size_t sub = strlen(mt->sub);
		if (strncmp(was, mt->dir, mt->dirlen) != 0 || (was[mt->dirlen] && was[mt->dirlen] != '/'))
			continue;
		if (strncmp(cpath, mt->sub, sub) != 0 || (cpath[sub] && cpath[sub] != '/'))
			return -ENOENT; /* moved out of what this mount shows */
		const char *rest = cpath + sub;
		if (strcmp(rest, "/") == 0)
			rest = "";
		if (mt->dirlen + strlen(rest) + 1 > size)
			return -ENAMETOOLONG;
		memcpy(out, mt->dir, mt->dirlen);
		strcpy(out + mt->dirlen, rest);
		return 0;
	}
	return -ENOENT;
}

/* Names as long as the hook keeps them (a CHFS path may be longer than PATH_MAX). */
struct names {
	char vpath[HOOK_VPATH_MAX];
	char cpath[HOOK_CHFS_PATH_MAX];
};

/* The current names (in n) of what vpath/cpath with identity ino named; 1 if they changed. */
static int moved(const char *vpath, const char *cpath, ino_t ino, struct names *n)
{
	if (!ino || chfs_follow(cpath, ino, n->cpath, sizeof n->cpath) != 0 || strcmp(n->cpath, cpath) == 0)
		return 0;
	return vpath_in_mount_of(vpath, n->cpath, n->vpath, sizeof n->vpath) == 0;
}

static int follow_cwd(void)
{
	struct names *now = malloc(sizeof *now);
	char *vp = NULL, *cp = malloc(HOOK_CHFS_PATH_MAX);
	ino_t ino = 0;
	int rc = now && cp && hook_vcwd_dup(&vp, &ino) > 0 &&
	         hook_vpath_to_chfs(vp, cp, HOOK_CHFS_PATH_MAX) == 1 && moved(vp, cp, ino, now) &&
	         hook_vcwd_moved(vp, now->vpath);
	free(vp);
	free(cp);
	free(now);
	return rc;
}

static int follow_file(struct hook_file *h)
{
	struct names *now = malloc(sizeof *now);
	if (!now)
		return 0;
	ino_t ino = chfs_ino_of(h->cfd);
	int rc = moved(hook_file_vpath(h), hook_file_cpath(h), ino, now) &&
	         hook_file_rename(h, now->vpath, now->cpath) == 0;
	free(now);
	return rc;
}

/* Follows the base of (dirfd, name) if the name is relative to a CHFS cwd or directory. */
static int follow_base(long dirfd, long name)
{
	const char *p = (const char *)name;
	if (p && (!hook_user_readable(p, 1) || p[0] == '/'))
		return 0;
	if ((int)dirfd == AT_FDCWD)
		return atomic_load(&hook_vcwd_active) && follow_cwd();
	struct hook_file *h = hook_file_of(dirfd);
	if (!h || (p && p[0] && !h->is_dir))
		return 0;
	atomic_fetch_add(&h->refs, 1); /* a concurrent close must not free it under us */
	int rc = follow_file(h);
	hook_file_unref(h);
	return rc;
}

int hook_follow_bases(const struct chfs_sysargs *s)
{
	const long *a = s->a;
	switch (s->nr) {
	case SYS_rename:
	case SYS_link: return follow_base(AT_FDCWD, a[0]) | follow_base(AT_FDCWD, a[1]);
	case SYS_symlink: return follow_base(AT_FDCWD, a[1]);
	case SYS_renameat:
	case SYS_renameat2:
	case SYS_linkat: return follow_base(a[0], a[1]) | follow_base(a[2], a[3]);
	case SYS_symlinkat: return follow_base(a[1], a[2]);
	case SYS_openat:
	case SYS_openat2:
	case SYS_newfstatat:
	case SYS_statx:
	case SYS_faccessat:
	case SYS_faccessat2:
	case SYS_mkdirat:
	case SYS_unlinkat:
	case SYS_readlinkat:
	case SYS_fchmodat:
	case SYS_fchownat:
	case SYS_futimesat:
	case SYS_mknodat:
	case SYS_utimensat: return follow_base(a[0], a[1]);
	case SYS_getdents64:
	case SYS_fchdir:
	case SYS_fstat:
	case SYS_fchmod:
	case SYS_fchown: return follow_base(a[0], 0);
	case SYS_open:
	case SYS_creat:
	case SYS_stat:
	case SYS_lstat:
	case SYS_access:
	case SYS_truncate:
	case SYS_mkdir:
	case SYS_rmdir:
	case SYS_unlink:
	case SYS_readlink:
	case SYS_chmod:
	case SYS_chown:
	case SYS_lchown:
	case SYS_utime:
	case SYS_utimes:
	case SYS_chdir:
	case SYS_mknod: return follow_base(AT_FDCWD, a[0]);
	default: return 0;
	}
}
