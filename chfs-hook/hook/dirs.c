/*
 * dirs.c — directory listings and the working directory.
 *
 * getdents64 on a CHFS directory descriptor takes a snapshot of the directory with
 * chfs_readdir() on first use (and again after a rewind to 0) and serves it in order; the
 * position is the entry index, kept as the placeholder's file offset like any other offset.
 * chdir into a mount point sets the virtual cwd (the kernel's cwd does not move); chdir or
 * fchdir anywhere else goes to the kernel and clears it. A virtual cwd may be deeper than
 * PATH_MAX (reached step by step); getcwd then answers ENAMETOOLONG, as the kernel does.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

struct hook_dirent {
	uint64_t ino;
	unsigned char type;
	char *name;
};

struct hook_dirlist {
	struct hook_dirent *e;
	size_t n, cap;
};

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

void hook_dirlist_free(struct hook_dirlist *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->e[i].name);
	free(d->e);
	free(d);
}

static uint64_t name_ino(const char *dir, const char *name)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a of the full path: stable, never 0 */
	for (const char *p = dir; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ '/') * 1099511628211ULL;
	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return h ? h : 1;
}

struct fill_ctx {
	struct hook_dirlist *d;
	const char *dir;
	int oom;
};

static int fill(void *buf, const char *name, const struct stat *st, off_t off)
{
	struct fill_ctx *c = buf;
	struct hook_dirlist *d = c->d;
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		struct hook_dirent *e = realloc(d->e, cap * sizeof *e);
		if (!e)
			return c->oom = 1;
		d->e = e;
		d->cap = cap;
	}
	struct hook_dirent *e = &d->e[d->n];
	e->name = strdup(name);
	if (!e->name)
		return c->oom = 1;
	e->type = DT_UNKNOWN;
	e->ino = 0;
	if (st) {
		e->type = S_ISDIR(st->st_mode)   ? DT_DIR
		          : S_ISLNK(st->st_mode) ? DT_LNK
		          : S_ISREG(st->st_mode) ? DT_REG
		                                 : DT_UNKNOWN;
		if (st->st_mode == 0)
			e->type = DT_UNKNOWN;
		e->ino = st->st_ino;
	}
	if (!e->ino)
		e->ino = name_ino(c->dir, name);
	d->n++;
	return 0;
}

static int load(struct hook_file *h)
{
	struct hook_dirlist *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	struct fill_ctx c = {d, hook_file_cpath(h), 0};
	errno = 0;
	if (chfs_readdir(hook_file_cpath(h), &c, fill) != 0 || c.oom) {
		int rc = c.oom ? -ENOMEM : (errno ? -errno : -EIO);
		hook_dirlist_free(d);
		return rc;
	}
	hook_dirlist_free(h->dir);
	h->dir = d;
	return 0;
}

#define GETDENTS_MAX (256 * 1024) /* bytes of entries per call (glibc asks for 32 KiB) */

long hook_do_getdents64(int fd, void *buf, size_t count)
{
	struct hook_file *h = hook_file_of(fd);
	if (!h)
		return -EBADF;
	if (!h->is_dir)
		return -ENOTDIR;
	long pos = RAW3(SYS_lseek, fd, 0, SEEK_CUR);
	if (pos < 0)
		return pos;
	/* filled here, then copied out in one fault-safe write: a bad buffer is EFAULT, no crash */
	if (count > GETDENTS_MAX)
		count = GETDENTS_MAX;
	char *out = malloc(count);
	if (!out)
		return -ENOMEM;
	pthread_mutex_lock(&h->lock);
	long rc = 0;
	if (!h->dir || pos == 0)
		rc = load(h);
	size_t used = 0;
	size_t i = (size_t)pos;
	while (rc == 0 && h->dir && i < h->dir->n) {
		const struct hook_dirent *e = &h->dir->e[i];
		size_t len = strlen(e->name);
		size_t reclen = (offsetof(struct linux_dirent64, d_name) + len + 1 + 7) & ~(size_t)7;
		if (used + reclen > count) {
			if (used == 0)
				rc = -EINVAL;
			break;
		}
		struct linux_dirent64 *de = (struct linux_dirent64 *)(out + used);
		de->d_ino = e->ino;
		de->d_off = (int64_t)(i + 1);
		de->d_reclen = (unsigned short)reclen;
		de->d_type = e->type;
		memcpy(de->d_name, e->name, len + 1);
		used += reclen;
		i++;
	}
	pthread_mutex_unlock(&h->lock);
	if (rc == 0 && used && hook_user_put(buf, out, used) < 0)
		rc = -EFAULT;
	free(out);
	if (rc < 0)
		return rc;
	RAW3(SYS_lseek, fd, (long)i, SEEK_SET);
	return (long)used;
}

static long chdir_chfs(const char *vpath, const char *cpath)
{
	long rc = hook_chfs_ready();
	if (rc < 0)
		return rc;
	struct stat st;
	if (chfs_stat(cpath, &st) != 0)
		return hook_path_err(cpath);
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return hook_vcwd_set(vpath, st.st_ino);
}

/* The loader's getcwd(3) asks for the whole name, however long (gate.h CHFS_HOOK_GETCWD_LONG). */
static long getcwd_long(const struct chfs_sysargs *s)
{
	char *buf = (char *)s->a[0];
	size_t size = (size_t)s->a[1];
	char *cwd;
	ino_t ino;
	int r = hook_vcwd_dup(&cwd, &ino);
	if (r <= 0)
		return r == 0 ? hook_pass(s) : r; /* 0: the cwd is a local directory again */
	size_t n = strlen(cwd) + 1;
	long rc = n > size ? -ERANGE : hook_user_put(buf, cwd, n) < 0 ? -EFAULT : (long)n;
	free(cwd);
	return rc;
}

long hook_do_cwd(const struct chfs_sysargs *s)
{
	const long *a = s->a;
	switch (s->nr) {
	case SYS_chdir: {
		HOOK_TARGET(t);
		int rc = hook_resolve(AT_FDCWD, (const char *)a[0], &t);
		if (rc < 0)
			return rc;
		if (t.chfs)
			return chdir_chfs(t.vpath, t.path);
		long r = RAW1(SYS_chdir, t.path);
		if (r == 0)
			hook_vcwd_set(NULL, 0);
		return r;
	}
	case SYS_fchdir: {
		struct hook_file *h = hook_file_of(a[0]);
		if (h)
			return h->is_dir ? chdir_chfs(hook_file_vpath(h), hook_file_cpath(h)) : -ENOTDIR;
		long r = hook_pass(s);
		if (r == 0)
			hook_vcwd_set(NULL, 0);
		return r;
	}
	default: { /* getcwd */
		if (a[2] == CHFS_HOOK_GETCWD_LONG)
			return getcwd_long(s);
		/* copied out: the caller's buffer is written fault-safely (EFAULT, no crash) */
		char cwd[PATH_MAX];
		int r = hook_vcwd_get(cwd, sizeof cwd);
		if (r == -ENOENT)
			return hook_pass(s);
		/* the kernel's checks in its order: ENAMETOOLONG for a cwd of PATH_MAX bytes or more,
		 * whatever the size; then ERANGE for a buffer too small */
		if (r == -ERANGE)
			return -ENAMETOOLONG;
		if ((unsigned long)a[1] < (unsigned long)r)
			return -ERANGE;
		return hook_user_put((char *)a[0], cwd, (size_t)r) < 0 ? -EFAULT : r;
	}
	}
}
