/*
 * paths.c — which names belong to CHFS, and what CHFS calls them.
 *
 * Names are resolved lexically, as CHFS itself does: "." and ".." and repeated slashes are
 * folded, so "/chfs/a/../b" is CHFS "/b" and "/chfs/.." is the kernel's "/". A relative name is
 * resolved against the directory descriptor or the cwd; the cwd is "virtual" while it is a
 * directory under a mount point (the kernel's cwd is left where it was, so relative names that
 * lead out of CHFS are handed to the kernel made absolute). A mount DIR=SUB maps DIR/x to the
 * CHFS path SUB/x.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>

atomic_int hook_vcwd_active;
static char vcwd[PATH_MAX];
static ino_t vcwd_ino; /* its identity (st_ino) when known, else 0: see follow.c */
static pthread_mutex_t vcwd_lock = PTHREAD_MUTEX_INITIALIZER;

int hook_normalize(const char *in, char *out, size_t size)
{
	size_t o = 0;
	const char *p = in;
	if (size < 2)
		return -ENAMETOOLONG;
	out[o++] = '/';
	while (*p) {
		while (*p == '/')
			p++;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - s);
		if (len == 0 || (len == 1 && s[0] == '.'))
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 1 && out[o - 1] != '/')
				o--;
			if (o > 1)
				o--; /* drop the slash too */
			continue;
		}
		if (o > 1)
			out[o++] = '/';
		if (o + len + 1 > size)
			return -ENAMETOOLONG;
		memcpy(out + o, s, len);
		o += len;
	}
	out[o] = 0;
	return 0;
}

static const char *fd_path_tail(const char *p)
{
	if (strncmp(p, "/proc/self/fd/", 14) == 0)
		return p + 14;
	if (strncmp(p, "/dev/fd/", 8) == 0)
		return p + 8;
	return NULL;
}

struct hook_file *hook_fd_path_file(const char *path)
{
	const char *d = fd_path_tail(path);
	if (!d || !*d)
		return NULL;
	long fd = 0;
	for (; *d; d++) {
		if (*d < '0' || *d > '9' || fd > (1L << 30))
			return NULL;
		fd = fd * 10 + (*d - '0');
	}
	return hook_file_of(fd);
}

int hook_vpath_to_chfs(const char *vpath, char *out, size_t size)
{
	for (int m = 0; m < hook_cfg.nmounts; m++) {
		const struct hook_mount *mt = &hook_cfg.mounts[m];
		if (strncmp(vpath, mt->dir, mt->dirlen) != 0 ||
		    (vpath[mt->dirlen] != 0 && vpath[mt->dirlen] != '/'))
			continue;
		const char *rest = vpath + mt->dirlen;
		int n = (int)strlen(mt->sub);
		if ((size_t)n + strlen(rest) + 2 > size)
			return -ENAMETOOLONG;
		memcpy(out, mt->sub, (size_t)n);
		strcpy(out + n, rest);
		if (out[0] == 0)
			strcpy(out, "/");
		return 1;
	}
	return 0;
}

int hook_vcwd_get_id(char *buf, size_t size, ino_t *ino)
{
	pthread_mutex_lock(&vcwd_lock);
	int rc = -ENOENT;
	if (atomic_load(&hook_vcwd_active)) {
		size_t n = strlen(vcwd);
		rc = n + 1 > size ? -ERANGE : (int)n + 1;
		if (rc > 0)
			memcpy(buf, vcwd, n + 1);
		if (ino)
			*ino = vcwd_ino;
	}
	pthread_mutex_unlock(&vcwd_lock);
	return rc;
}

int hook_vcwd_get(char *buf, size_t size) { return hook_vcwd_get_id(buf, size, NULL); }

void hook_paths_after_fork(void) { pthread_mutex_init(&vcwd_lock, NULL); }

void hook_vcwd_set(const char *vpath, ino_t ino)
{
	pthread_mutex_lock(&vcwd_lock);
	if (vpath) {
		strcpy(vcwd, vpath);
		vcwd_ino = ino;
		atomic_store(&hook_vcwd_active, 1);
	} else {
		atomic_store(&hook_vcwd_active, 0);
	}
	pthread_mutex_unlock(&vcwd_lock);
}

int hook_vcwd_moved(const char *old, const char *vpath)
{
	pthread_mutex_lock(&vcwd_lock);
	int ok = atomic_load(&hook_vcwd_active) && strcmp(vcwd, old) == 0 && strlen(vpath) < sizeof vcwd;
	if (ok)
		strcpy(vcwd, vpath);
	pthread_mutex_unlock(&vcwd_lock);
	return ok;
}

static int join(const char *base, const char *rel, char *out, size_t size)
{
	char tmp[2 * PATH_MAX + 2];
	size_t b = strlen(base), r = strlen(rel);
	if (b + r + 2 > sizeof tmp)
		return -ENAMETOOLONG;
	memcpy(tmp, base, b);
	tmp[b] = '/';
	memcpy(tmp + b + 1, rel, r + 1);
	return hook_normalize(tmp, out, size);
}

static int ends_as_dir(const char *p)
{
	size_t n = strlen(p);
	return (n > 0 && p[n - 1] == '/') || (n >= 2 && p[n - 1] == '.' && p[n - 2] == '/') ||
	       strcmp(p, ".") == 0;
}

int hook_path_err(const char *cpath)
{
	int e = errno ? errno : EIO;
	if (e != ENOENT)
		return -e;
	char prefix[PATH_MAX];
	size_t n = strlen(cpath);
	if (n >= sizeof prefix)
		return -ENOENT;
	memcpy(prefix, cpath, n + 1);
	for (size_t i = 1; i < n; i++) { /* each leading component, shortest first */
		if (prefix[i] != '/')
			continue;
		prefix[i] = 0;
		struct stat st;
		int r = chfs_stat(prefix, &st);
		prefix[i] = '/';
		if (r != 0)
			return -ENOENT;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
	return -ENOENT;
}

int hook_resolve(int dirfd, const char *path, struct hook_target *t)
{
	long rc = hook_user_strcpy(path, t->arg, sizeof t->arg);
	if (rc < 0)
		return (int)rc;
	path = t->arg;
	t->chfs = 0;
	t->dir_only = ends_as_dir(path);
	if (path[0] == 0) { /* "" is ENOENT unless AT_EMPTY_PATH, which callers handle first */
		strcpy(t->path, path);
		return 0;
	}
	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	struct hook_file *self = hook_fd_path_file(path);
	if (self) { /* /proc/self/fd/N of a CHFS descriptor (glibc's fchmodat, bash's /dev/fd) */
		strcpy(t->vpath, hook_file_vpath(self));
		strcpy(t->path, hook_file_cpath(self));
		t->chfs = 1;
		return 0;
	}
	if (path[0] == '/') {
		if ((rc = hook_normalize(path, t->vpath, sizeof t->vpath)) < 0)
			return rc;
		rc = hook_vpath_to_chfs(t->vpath, t->path, sizeof t->path);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			/* The kernel's own name, symlinks and all — unless it starts inside a mount point
       * ("/chfs/../etc"): the kernel has no such directory, so give it the folded name. */
			int via_mount = 0;
			for (int m = 0; m < hook_cfg.nmounts && !via_mount; m++) {
				size_t n = hook_cfg.mounts[m].dirlen;
				via_mount = strncmp(path, hook_cfg.mounts[m].dir, n) == 0 &&
				            (path[n] == '/' || !path[n]);
			}
			strcpy(t->path, via_mount ? t->vpath : path);
		}
		t->chfs = rc;
		return 0;
	}
	char base[PATH_MAX];
	if (dirfd == AT_FDCWD) {
		if (hook_vcwd_get(base, sizeof base) < 0) {
			strcpy(t->path, path);
			return 0;
		}
	} else {
		struct hook_file *h = hook_file_of(dirfd);
		if (!h) {
			strcpy(t->path, path);
			return 0;
		}
		if (!h->is_dir)
			return -ENOTDIR;
		strcpy(base, hook_file_vpath(h));
	}
	if ((rc = join(base, path, t->vpath, sizeof t->vpath)) < 0)
		return rc;
	rc = hook_vpath_to_chfs(t->vpath, t->path, sizeof t->path);
	if (rc < 0)
		return rc;
	if (rc == 0)
		strcpy(t->path, t->vpath); /* left CHFS: give the kernel the absolute name */
	t->chfs = rc;
	return 0;
}
