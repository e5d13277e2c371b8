/*
 * paths.c — which names belong to CHFS, and what CHFS calls them.
 *
 * Names are resolved lexically, as CHFS itself does: "." and ".." and repeated slashes are
 * folded, so "/chfs/a/../b" is CHFS "/b" and "/chfs/.." is the kernel's "/". A relative name is
 * resolved against the directory descriptor or the cwd; the cwd is "virtual" while it is a
 * directory under a mount point (the kernel's cwd is left where it was, so relative names that
 * lead out of CHFS are handed to the kernel made absolute). A mount DIR=SUB maps DIR/x to the
 * CHFS path SUB/x.
 *
 * A CHFS name may be longer than PATH_MAX (up to HOOK_CHFS_PATH_MAX - 1 bytes from the CHFS
 * root): one argument never is, but its directory descriptor's or the cwd's name may be. Such a
 * name goes to the heap (hook_target); the short ones, nearly all, stay in the inline buffers.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

atomic_int hook_vcwd_active;
static char vcwd[HOOK_VPATH_MAX];
static ino_t vcwd_ino; /* its identity (st_ino) when known, else 0: see follow.c */
static pthread_mutex_t vcwd_lock = PTHREAD_MUTEX_INITIALIZER;

/* Appends the components of `in` to the normalised absolute name out[0..*o) (capacity size),
 * folding "." and ".." and repeated slashes. */
static int normalize_append(const char *in, char *out, size_t size, size_t *o)
{
	for (const char *p = in; *p;) {
		while (*p == '/')
			p++;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - s);
		if (len == 0 || (len == 1 && s[0] == '.'))
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			while (*o > 1 && out[*o - 1] != '/')
				(*o)--;
			if (*o > 1)
				(*o)--; /* drop the slash too */
			continue;
		}
		if (*o > 1)
			out[(*o)++] = '/';
		if (*o + len + 1 > size)
			return -ENAMETOOLONG;
		memcpy(out + *o, s, len);
		*o += len;
	}
	out[*o] = 0;
	return 0;
}

int hook_normalize(const char *in, char *out, size_t size)
{
	size_t o = 1;
	if (size < 2)
		return -ENAMETOOLONG;
	out[0] = '/';
	return normalize_append(in, out, size, &o);
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

/* The mount point vpath is under, or NULL. */
static const struct hook_mount *mount_of(const char *vpath)
{
	for (int m = 0; m < hook_cfg.nmounts; m++) {
		const struct hook_mount *mt = &hook_cfg.mounts[m];
		if (strncmp(vpath, mt->dir, mt->dirlen) == 0 &&
		    (vpath[mt->dirlen] == 0 || vpath[mt->dirlen] == '/'))
			return mt;
	}
	return NULL;
}

/* out = the CHFS path of vpath under mount mt (room for `need` bytes: chfs_name_size). */
static void chfs_name(const struct hook_mount *mt, const char *vpath, char *out)
{
	size_t n = strlen(mt->sub);
	memcpy(out, mt->sub, n);
	strcpy(out + n, vpath + mt->dirlen);
	if (out[0] == 0)
		strcpy(out, "/");
}

static size_t chfs_name_size(const struct hook_mount *mt, const char *vpath)
{
	return strlen(mt->sub) + strlen(vpath + mt->dirlen) + 2;
}

int hook_vpath_to_chfs(const char *vpath, char *out, size_t size)
{
	const struct hook_mount *mt = mount_of(vpath);
	if (!mt)
		return 0;
	if (chfs_name_size(mt, vpath) > size)
		return -ENAMETOOLONG;
	chfs_name(mt, vpath, out);
	return 1;
}

/* ---- hook_target: inline buffers, the heap for longer names ---- */

void hook_target_release(struct hook_target *t)
{
	if (t->path != t->path_buf)
		free(t->path);
	if (t->vpath != t->vpath_buf)
		free(t->vpath);
	hook_target_init(t);
}

/* Makes *slot (the inline buffer `inl` or a heap one) hold `need` bytes: the buffer, or NULL. */
static char *room(char **slot, char *inl, size_t need)
{
	if (*slot != inl) {
		free(*slot);
		*slot = inl;
	}
	if (need <= PATH_MAX)
		return inl;
	char *p = malloc(need);
	if (p)
		*slot = p;
	return p;
}

/* *slot (inline buffer inl, or the heap) = a copy of p. */
static int set_name(char **slot, char *inl, const char *p)
{
	size_t n = strlen(p) + 1;
	if (!room(slot, inl, n))
		return -ENOMEM;
	memcpy(*slot, p, n);
	return 0;
}

static int set_path(struct hook_target *t, const char *p) { return set_name(&t->path, t->path_buf, p); }
static int set_vpath(struct hook_target *t, const char *p) { return set_name(&t->vpath, t->vpath_buf, p); }

/* t->path = the CHFS path of t->vpath: 1, or 0 if it is not under a mount point, or
 * -ENAMETOOLONG beyond CHFS's bound. */
static int to_chfs(struct hook_target *t)
{
	const struct hook_mount *mt = mount_of(t->vpath);
	if (!mt)
		return 0;
	size_t need = chfs_name_size(mt, t->vpath); /* the name's length + 2 */
	if (need - 2 >= HOOK_CHFS_PATH_MAX)
		return -ENAMETOOLONG;
	char *out = room(&t->path, t->path_buf, need);
	if (!out)
		return -ENOMEM;
	chfs_name(mt, t->vpath, out);
	return 1;
}

/* t->vpath = base/rel, normalised (base is absolute). */
static int join(const char *base, const char *rel, struct hook_target *t)
{
	size_t need = strlen(base) + strlen(rel) + 2, o = 1;
	char *out = room(&t->vpath, t->vpath_buf, need);
	if (!out)
		return -ENOMEM;
	out[0] = '/';
	int rc = normalize_append(base, out, need, &o);
	return rc < 0 ? rc : normalize_append(rel, out, need, &o);
}

/* ---- the virtual cwd ---- */

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

int hook_vcwd_dup(char **vpath, ino_t *ino)
{
	pthread_mutex_lock(&vcwd_lock);
	int rc = 0;
	if (atomic_load(&hook_vcwd_active)) {
		*vpath = strdup(vcwd);
		*ino = vcwd_ino;
		rc = *vpath ? 1 : -ENOMEM;
	}
	pthread_mutex_unlock(&vcwd_lock);
	return rc;
}

int hook_vcwd_set(const char *vpath, ino_t ino)
{
	if (vpath && strlen(vpath) >= sizeof vcwd)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&vcwd_lock);
	if (vpath) {
		strcpy(vcwd, vpath);
		vcwd_ino = ino;
		atomic_store(&hook_vcwd_active, 1);
	} else {
		atomic_store(&hook_vcwd_active, 0);
	}
	pthread_mutex_unlock(&vcwd_lock);
	return 0;
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

/* t->vpath = vcwd/rel: 1, or 0 if there is no virtual cwd. */
static int join_vcwd(const char *rel, struct hook_target *t)
{
	pthread_mutex_lock(&vcwd_lock);
	int rc = 0;
	if (atomic_load(&hook_vcwd_active)) {
		rc = join(vcwd, rel, t);
		if (rc == 0)
			rc = 1;
	}
	pthread_mutex_unlock(&vcwd_lock);
	return rc;
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
	char inl[PATH_MAX];
	size_t n = strlen(cpath);
	char *prefix = n < sizeof inl ? inl : malloc(n + 1);
	if (!prefix)
		return -ENOENT;
	memcpy(prefix, cpath, n + 1);
	int rc = -ENOENT;
	for (size_t i = 1; i < n; i++) { /* each leading component, shortest first */
		if (prefix[i] != '/')
			continue;
		prefix[i] = 0;
		struct stat st;
		int r = chfs_stat(prefix, &st);
		prefix[i] = '/';
		if (r != 0)
			break;
		if (!S_ISDIR(st.st_mode)) {
			rc = -ENOTDIR;
			break;
		}
	}
	if (prefix != inl)
		free(prefix);
	return rc;
}

/* A relative name (t->arg) from a local directory: 1 with t->vpath set if it walks into a
 * mount point (enter.c), else 0 with t->path = the name for the kernel. */
static int from_local_dir(int dirfd, struct hook_target *t)
{
	const char *rest;
	const struct hook_mount *mt = hook_entered_mount(dirfd, t->arg, &rest);
	if (!mt) {
		int r = set_path(t, t->arg);
		return r < 0 ? r : 0;
	}
	int r = join(mt->dir, rest, t);
	return r < 0 ? r : 1;
}

int hook_resolve(int dirfd, const char *path, struct hook_target *t)
{
	/* a name of PATH_MAX bytes or more is ENAMETOOLONG, as from the kernel */
	long rc = hook_user_strcpy(path, t->arg, sizeof t->arg);
	if (rc < 0)
		return (int)rc;
	path = t->arg;
	t->chfs = 0;
	t->dir_only = ends_as_dir(path);
	if (path[0] == 0) /* "" is ENOENT unless AT_EMPTY_PATH, which callers handle first */
		return set_path(t, path);
	struct hook_file *self = hook_fd_path_file(path);
	if (self) { /* /proc/self/fd/N of a CHFS descriptor (glibc's fchmodat, bash's /dev/fd) */
		if ((rc = set_vpath(t, hook_file_vpath(self))) < 0 ||
		    (rc = set_path(t, hook_file_cpath(self))) < 0)
			return rc;
		t->chfs = 1;
		return 0;
	}
	if (path[0] == '/') {
		/* no longer than path: the inline buffer holds it */
		if ((rc = hook_normalize(path, room(&t->vpath, t->vpath_buf, PATH_MAX), PATH_MAX)) < 0)
			return rc;
		if ((rc = to_chfs(t)) < 0)
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
			int r = set_path(t, via_mount ? t->vpath : path);
			if (r < 0)
				return r;
		}
		t->chfs = (int)rc;
		return 0;
	}
	if (dirfd == AT_FDCWD) {
		if ((rc = join_vcwd(path, t)) < 0)
			return rc;
		if (rc == 0 && (rc = from_local_dir(dirfd, t)) <= 0)
			return rc; /* the kernel's cwd */
	} else {
		struct hook_file *h = hook_file_of(dirfd);
		if (!h) {
			if ((rc = from_local_dir(dirfd, t)) <= 0)
				return rc;
		} else if (!h->is_dir)
			return -ENOTDIR;
		else if ((rc = join(hook_file_vpath(h), path, t)) < 0)
			return rc;
	}
	if ((rc = to_chfs(t)) < 0)
		return rc;
	if (rc == 0) { /* left CHFS: give the kernel the absolute name */
		if (strlen(t->vpath) >= PATH_MAX)
			return -ENAMETOOLONG;
		int r = set_path(t, t->vpath);
		if (r < 0)
			return r;
	}
	t->chfs = (int)rc;
	return 0;
}
