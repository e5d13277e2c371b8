/*
 * ns_import.c — the loader of the old one-file-per-entry namespace tree (see ns_import.h).
 *
 * This is the reading half of the earlier ns_store.c, kept only to import: the tree is walked
 * from an fd of DIR/ns with O_NOFOLLOW at every step (a symlink planted in the tree is skipped,
 * never followed), names without the '_' prefix (".meta", ".tmp.*" leftovers of an
 * interrupted write) are not entries, and a record file is decoded whole by record_codec.c
 * (one byte more than the longest record is read, so an overlong file fails the length check
 * instead of being cut to a valid prefix).
 */
#define _GNU_SOURCE
#include "ns_import.h"

#include "record_codec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OLD_DIR "ns"
#define OLD_RETIRED "ns.imported"
#define META ".meta"

int nsimp_present(int rootfd)
{
	struct stat sb;
	return fstatat(rootfd, OLD_DIR, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode);
}

int nsimp_retire(int rootfd)
{
	if (renameat(rootfd, OLD_DIR, rootfd, OLD_RETIRED) < 0)
		return -errno;
	fsync(rootfd);
	return 0;
}

static int rec_read_fd(int fd, struct chfs_md *md)
{
	uint8_t *buf = malloc(RECORD_MAX_LEN + 1);
	if (!buf)
		return -ENOMEM;
	ssize_t n = pread(fd, buf, RECORD_MAX_LEN + 1, 0);
	int rc = n < 0 ? -errno : record_decode(buf, (size_t)n, md) ? -EIO : 0;
	free(buf);
	return rc;
}

struct walk_ctx {
	nsimp_fn fn;
	void *arg;
	unsigned long bad;
	struct chfs_md md;
	char path[CHFS_PATH_MAX];
};

/* The record of entry `leaf` of dfd: 0, -ENOENT (implicit directory), or -EIO. */
static int entry_record(struct walk_ctx *c, int dfd, const char *leaf, int *isdir)
{
	int fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct stat sb;
	int rc = -EIO;
	*isdir = 0;
	if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		*isdir = 1;
		int mfd = openat(fd, META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		rc = mfd < 0 ? -errno : rec_read_fd(mfd, &c->md);
		if (mfd >= 0)
			close(mfd);
	} else if (S_ISREG(sb.st_mode)) {
		rc = rec_read_fd(fd, &c->md);
	}
	close(fd);
	return rc;
}

/* Visit the entries of directory fd, whose CHFS path is c->path[0..plen). Closes fd. */
static int walk_dir(struct walk_ctx *c, int fd, size_t plen, int depth)
{
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(dp)) != NULL) {
		if (de->d_name[0] != '_')
			continue;
		size_t n = strlen(de->d_name + 1);
		if (n == 0 || plen + 1 + n >= sizeof c->path)
			continue;
		size_t o = plen;
		if (plen)
			c->path[o++] = '/';
		memcpy(c->path + o, de->d_name + 1, n + 1);
		int isdir = 0, r = entry_record(c, dirfd(dp), de->d_name, &isdir);
		if (r == 0)
			rc = c->fn(c->arg, c->path, &c->md);
		else if (r != -ENOENT && r != -ELOOP)
			c->bad++;
		if (rc == 0 && isdir && depth < CHFS_PATH_MAX / 2) {
			int sub = openat(dirfd(dp), de->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				rc = walk_dir(c, sub, o + n, depth + 1);
		}
		c->path[plen] = '\0';
	}
	closedir(dp);
	return rc;
}

int nsimp_load(int rootfd, nsimp_fn fn, void *arg, unsigned long *bad)
{
	struct walk_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->fn = fn;
	c->arg = arg;
	int fd = openat(rootfd, OLD_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = fd < 0 ? -errno : walk_dir(c, fd, 0, 0);
	*bad = c->bad;
	free(c);
	return rc;
}
