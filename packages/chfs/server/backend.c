/*
 * backend.c — confined access to the backend directory (chfsd -b DIR).
 *
 * DIR is typically a parallel file system shared by every server. Every path a client names is
 * resolved beneath an fd of DIR with openat2(RESOLVE_BENEATH): "..", absolute components and
 * symlinks that would leave DIR fail (EXDEV, reported as ENOENT: nothing outside DIR is
 * visible), while symlinks that stay inside DIR work as they do on DIR itself. Paths are CHFS
 * canonical paths (no ".", "..", empty or leading-slash components; "" is DIR itself), so the
 * kernel check is a second fence, not the only one. Writing goes through backend_open_write
 * and backend_parent only (the flushes, flush.c and flush_meta.c), which make missing parent
 * directories beneath DIR.
 */
#define _GNU_SOURCE
#include "backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct backend {
	char root[4096];
	int rootfd;
};

static int open_beneath(int dirfd, const char *rel, int flags)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
	                       .mode = (flags & O_CREAT) ? 0644 : 0,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
	long fd = syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof how);
	if (fd >= 0)
		return (int)fd;
	return errno == EXDEV ? -ENOENT : -errno; /* an escape: nothing outside DIR exists */
}

int backend_open(const char *dir, struct backend **out)
{
	struct backend *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	if (!realpath(dir, b->root) || (b->rootfd = open(b->root, O_DIRECTORY | O_RDONLY | O_CLOEXEC)) < 0) {
		int e = -errno;
		free(b);
		return e;
	}
	*out = b;
	return 0;
}

void backend_close(struct backend *b)
{
	if (!b)
		return;
	close(b->rootfd);
	free(b);
}

const char *backend_root(const struct backend *b) { return b->root; }

/* An O_PATH fd of the parent directory of path and its last component (*leaf points into
 * path). The root has no parent: fd of DIR and leaf ".". */
static int open_parent(struct backend *b, const char *path, const char **leaf)
{
	const char *slash = strrchr(path, '/');
	if (!*path) {
		*leaf = ".";
		return open_beneath(b->rootfd, "", O_PATH | O_DIRECTORY);
	}
	if (!slash) {
		*leaf = path;
		return open_beneath(b->rootfd, "", O_PATH | O_DIRECTORY);
	}
	char parent[CHFS_LINK_MAX]; /* a backend name: one system call, the kernel's bound */
	size_t n = (size_t)(slash - path);
	if (n >= sizeof parent)
		return -ENAMETOOLONG;
	memcpy(parent, path, n);
	parent[n] = '\0';
	*leaf = slash + 1;
	return open_beneath(b->rootfd, parent, O_PATH | O_DIRECTORY);
}

int backend_lstat(struct backend *b, const char *path, struct stat *st)
{
	const char *leaf;
	int pfd = open_parent(b, path, &leaf);
	if (pfd < 0)
		return pfd == -ENOTDIR ? -ENOENT : pfd;
	int rc = fstatat(pfd, leaf, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	close(pfd);
	return rc;
}

int backend_readlink(struct backend *b, const char *path, char *buf, size_t size)
{
	const char *leaf;
	int pfd = open_parent(b, path, &leaf);
	if (pfd < 0)
		return pfd;
	ssize_t n = readlinkat(pfd, leaf, buf, size);
	int rc = n < 0 ? -errno : (size_t)n >= size ? -ENAMETOOLONG : 0;
	if (rc == 0)
		buf[n] = '\0';
	close(pfd);
	return rc;
}

int backend_open_read(struct backend *b, const char *path) { return open_beneath(b->rootfd, path, O_RDONLY); }

/* Make the directories above path (each created beneath DIR, existing ones kept). */
static int make_parents(struct backend *b, const char *path)
{
	char dir[CHFS_LINK_MAX]; /* a backend name: one system call, the kernel's bound */
	if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
		return -ENAMETOOLONG;
	for (char *p = strchr(dir, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		const char *leaf;
		int pfd = open_parent(b, dir, &leaf);
		int rc = pfd < 0 ? pfd : mkdirat(pfd, leaf, 0755) < 0 && errno != EEXIST ? -errno : 0;
		if (pfd >= 0)
			close(pfd);
		*p = '/';
		if (rc)
			return rc;
	}
	return 0;
}

int backend_open_write(struct backend *b, const char *path)
{
	int fd = open_beneath(b->rootfd, path, O_WRONLY | O_CREAT);
	if (fd == -ENOENT && make_parents(b, path) == 0)
		fd = open_beneath(b->rootfd, path, O_WRONLY | O_CREAT);
	return fd;
}

int backend_parent(struct backend *b, const char *path, int make, const char **leaf)
{
	int fd = open_parent(b, path, leaf);
	if (fd == -ENOENT && make && make_parents(b, path) == 0)
		fd = open_parent(b, path, leaf);
	return fd;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int backend_list(struct backend *b, const char *path, const char *after, char ***names, size_t *n)
{
	*names = NULL;
	*n = 0;
	int fd = open_beneath(b->rootfd, path, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -ENOMEM;
	}
	size_t cap = 0, k = 0;
	char **v = NULL;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(dp)) != NULL) {
		const char *nm = de->d_name;
		if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || strcmp(nm, after) <= 0 ||
		    strlen(nm) > CHFS_NAME_MAX)
			continue;
		if (k == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof *v);
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		if (!(v[k] = strdup(nm))) {
			rc = -ENOMEM;
			break;
		}
		k++;
	}
	closedir(dp);
	if (rc) {
		while (k)
			free(v[--k]);
		free(v);
		return rc;
	}
	if (k)
		qsort(v, k, sizeof *v, name_cmp);
	*names = v;
	*n = k;
	return 0;
}
