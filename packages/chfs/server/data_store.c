/*
 * data_store.c — backing files (see data_store.h). Every name is built here from a file id
 * (16 hex digits), never from client text, and opened relative to the data directory's fd with
 * O_NOFOLLOW, so a planted symlink cannot redirect a write.
 */
#define _GNU_SOURCE
#include "data_store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

struct data_store {
	int datafd;
	char dir[4096 + 8];      /* ROOT/data */
	pthread_rwlock_t shrink; /* held shared by ds_shrink_hold, exclusively to shorten a file */
};

uint64_t ds_new_fileid(void)
{
	uint64_t id = 0;
	while (id == 0)
		if (getrandom(&id, sizeof id, 0) != sizeof id) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			id = ((uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec) ^
			     ((uint64_t)getpid() << 32);
		}
	return id;
}

int ds_open_store(int rootfd, const char *root, struct data_store **out)
{
	struct data_store *ds = calloc(1, sizeof *ds);
	if (!ds)
		return -ENOMEM;
	int rc = 0;
	if ((size_t)snprintf(ds->dir, sizeof ds->dir, "%s/data", root) >= sizeof ds->dir)
		rc = -ENAMETOOLONG;
	else if (mkdirat(rootfd, "data", 0700) < 0 && errno != EEXIST)
		rc = -errno;
	else if ((ds->datafd = openat(rootfd, "data", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		rc = -errno;
	if (rc) {
		free(ds);
		return rc;
	}
	/* Writer first: a steady stream of reads must not hold a truncate back for ever. */
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ds->shrink, &a);
	pthread_rwlockattr_destroy(&a);
	*out = ds;
	return 0;
}

void ds_shrink_hold(struct data_store *ds) { pthread_rwlock_rdlock(&ds->shrink); }

void ds_shrink_release(struct data_store *ds) { pthread_rwlock_unlock(&ds->shrink); }

void ds_close_store(struct data_store *ds)
{
	if (!ds)
		return;
	close(ds->datafd);
	pthread_rwlock_destroy(&ds->shrink);
	free(ds);
}

static void data_name(uint64_t fileid, char *buf)
{
	snprintf(buf, 17, "%016llx", (unsigned long long)fileid);
}

int ds_open(struct data_store *ds, uint64_t fileid, int create)
{
	char name[17];
	if (!fileid)
		return -EINVAL;
	data_name(fileid, name);
	int fd = openat(ds->datafd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
	return fd < 0 ? -errno : fd;
}

int ds_truncate(struct data_store *ds, uint64_t fileid, uint64_t len)
{
	int fd = ds_open(ds, fileid, 0);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	struct stat sb;
	int rc = 0;
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	/* Exact size both ways: a node-local file's backing file is read directly (FUSE
	 * passthrough, hook fast path), so an extending truncate must extend it too. For striped
	 * files the sparse extension reads as the zeros the file holds there anyway. */
	else if ((uint64_t)sb.st_size > len) { /* a mapping of the file may be read: see .h */
		pthread_rwlock_wrlock(&ds->shrink);
		if (ftruncate(fd, (off_t)len) < 0)
			rc = -errno;
		pthread_rwlock_unlock(&ds->shrink);
	} else if ((uint64_t)sb.st_size < len && ftruncate(fd, (off_t)len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int ds_remove(struct data_store *ds, uint64_t fileid)
{
	char name[17], side[20];
	data_name(fileid, name);
	snprintf(side, sizeof side, "%s.t", name);
	unlinkat(ds->datafd, side, 0);
	if (unlinkat(ds->datafd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* ---- the placement tag: 12 bytes (pkey, chunk size, flags, little endian) in the xattr
 * user.chfs.tag, or in a side file "<name>.t" where the file system has no user xattrs ---- */
#define TAG_XATTR "user.chfs.tag"

static void tag_put(uint8_t *b, const struct wire_tag *t)
{
	const uint32_t v[3] = {t->pkey, t->chunk_size, t->flags};
	for (int i = 0; i < 12; i++)
		b[i] = (uint8_t)(v[i / 4] >> (8 * (i % 4)));
}

static void tag_get(const uint8_t *b, struct wire_tag *t)
{
	uint32_t v[3] = {0, 0, 0};
	for (int i = 0; i < 12; i++)
		v[i / 4] |= (uint32_t)b[i] << (8 * (i % 4));
	*t = (struct wire_tag){.pkey = v[0], .chunk_size = v[1], .flags = v[2]};
}

static int tag_set(struct data_store *ds, int fd, uint64_t fileid, const struct wire_tag *t)
{
	uint8_t b[12];
	tag_put(b, t);
	if (fsetxattr(fd, TAG_XATTR, b, sizeof b, 0) == 0)
		return 0;
	if (errno != ENOTSUP && errno != EOPNOTSUPP)
		return -errno;
	char side[20];
	data_name(fileid, side);
	strcat(side, ".t");
	int sfd = openat(ds->datafd, side, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (sfd < 0)
		return -errno;
	int rc = write(sfd, b, sizeof b) == (ssize_t)sizeof b ? 0 : -EIO;
	close(sfd);
	return rc;
}

int ds_open_tagged(struct data_store *ds, uint64_t fileid, const struct wire_tag *tag)
{
	int fd = ds_open(ds, fileid, 0);
	if (fd != -ENOENT)
		return fd;
	char name[17];
	data_name(fileid, name);
	fd = openat(ds->datafd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? ds_open(ds, fileid, 0) : -errno;
	int rc = tag_set(ds, fd, fileid, tag);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int ds_get_tag(struct data_store *ds, uint64_t fileid, struct wire_tag *tag)
{
	uint8_t b[12];
	int fd = ds_open(ds, fileid, 0);
	if (fd < 0)
		return fd;
	ssize_t n = fgetxattr(fd, TAG_XATTR, b, sizeof b);
	close(fd);
	if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP)) {
		char side[20];
		data_name(fileid, side);
		strcat(side, ".t");
		int sfd = openat(ds->datafd, side, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (sfd < 0)
			return errno == ENOENT ? -ENODATA : -errno;
		n = read(sfd, b, sizeof b);
		close(sfd);
	}
	if (n != (ssize_t)sizeof b)
		return -ENODATA;
	tag_get(b, tag);
	return 0;
}

int ds_walk(struct data_store *ds, int (*fn)(void *arg, uint64_t fileid), void *arg)
{
	int fd = openat(ds->datafd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(dp)) != NULL) {
		if (strlen(de->d_name) != 16 || strspn(de->d_name, "0123456789abcdef") != 16)
			continue;
		uint64_t id = strtoull(de->d_name, NULL, 16);
		if (id)
			rc = fn(arg, id);
	}
	closedir(dp);
	return rc;
}

int ds_usage(struct data_store *ds, uint64_t *files, uint64_t *bytes)
{
	*files = *bytes = 0;
	int fd = openat(ds->datafd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	struct dirent *de;
	struct stat sb;
	while ((de = readdir(dp)) != NULL) {
		if (strlen(de->d_name) != 16 || strspn(de->d_name, "0123456789abcdef") != 16)
			continue;
		if (fstatat(ds->datafd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
			(*files)++;
			*bytes += (uint64_t)sb.st_blocks * 512;
		}
	}
	closedir(dp);
	return 0;
}

int ds_punch(struct data_store *ds, uint64_t fileid, uint64_t off, uint64_t len)
{
	int fd = ds_open(ds, fileid, 0);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	int rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0
	                 ? -errno
	                 : 0;
	close(fd);
	return rc;
}

int ds_stat(struct data_store *ds, uint64_t fileid, uint64_t *size, int64_t *mtime_ns)
{
	char name[17];
	struct stat sb;
	data_name(fileid, name);
	if (fstatat(ds->datafd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		*size = 0;
		*mtime_ns = 0;
		return errno == ENOENT ? 0 : -errno;
	}
	*size = (uint64_t)sb.st_size;
	*mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
	return 0;
}

int ds_path(struct data_store *ds, uint64_t fileid, const struct wire_tag *tag, char *buf, size_t size)
{
	char name[17];
	int fd = ds_open_tagged(ds, fileid, tag);
	if (fd < 0)
		return fd;
	close(fd);
	data_name(fileid, name);
	if ((size_t)snprintf(buf, size, "%s/%s", ds->dir, name) >= size)
		return -ENAMETOOLONG;
	return 0;
}
