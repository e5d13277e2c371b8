/*
 * data_store.c — backing files (see data_store.h). Every name is built here from a file id
 * (16 hex digits), never from client text, and opened relative to the data directory's fd with
 * O_NOFOLLOW, so a planted symlink cannot redirect a write.
 */
#define _GNU_SOURCE
#include "data_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct data_store {
	int datafd;
	char dir[4096 + 8]; /* ROOT/data */
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
	*out = ds;
	return 0;
}

void ds_close_store(struct data_store *ds)
{
	if (!ds)
		return;
	close(ds->datafd);
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
	else if ((uint64_t)sb.st_size != len && ftruncate(fd, (off_t)len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int ds_remove(struct data_store *ds, uint64_t fileid)
{
	char name[17];
	data_name(fileid, name);
	if (unlinkat(ds->datafd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
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

int ds_path(struct data_store *ds, uint64_t fileid, char *buf, size_t size)
{
	char name[17];
	int fd = ds_open(ds, fileid, 1);
	if (fd < 0)
		return fd;
	close(fd);
	data_name(fileid, name);
	if ((size_t)snprintf(buf, size, "%s/%s", ds->dir, name) >= size)
		return -ENAMETOOLONG;
	return 0;
}
