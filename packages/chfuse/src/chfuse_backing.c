/*
 * chfuse_backing.c — FUSE passthrough for node-local CHFS files.
 *
 * When chfs_local_backing_path() names the local server's backing file of an open file, the
 * daemon opens that file and registers it with the kernel (ioctl FUSE_DEV_IOC_BACKING_OPEN on
 * /dev/fuse, what libfuse's fuse_passthrough_open() does for the low-level API); the open reply
 * then carries FOPEN_PASSTHROUGH and the backing id, and the kernel reads, writes and mmaps the
 * backing file itself. The kernel allows only ONE backing file object per FUSE inode at a time
 * (a second, different one makes the open fail with EBUSY), so all opens of one backing file
 * share one entry, found by the backing file's (st_dev, st_ino) — not by path, which a rename
 * may change — and reference-counted; the last release unregisters the id and closes the file.
 * The backing file is always opened read-write, because later opens of the same inode with a
 * different access mode must reuse it (the kernel applies the FUSE file's own mode).
 */
#include "chfuse.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Protocol 7.40 ioctls; libfuse does not install fuse_kernel.h and Debian 12's linux/fuse.h
 * (7.38) predates them. */
#ifndef FUSE_DEV_IOC_BACKING_OPEN
struct fuse_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define FUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct fuse_backing_map)
#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
#endif

struct chfuse_backing {
	struct chfuse_backing *next;
	dev_t dev;
	ino_t ino;
	int fd;
	int id;
	int refs;
};

atomic_bool chfuse_passthrough_active;
static struct chfuse_backing *entries;
static pthread_mutex_t entries_lock = PTHREAD_MUTEX_INITIALIZER;
static char backing_dir[4096];

static void remember_dir(const char *path)
{
	if (backing_dir[0])
		return;
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	if (n > 0 && n < sizeof backing_dir) {
		memcpy(backing_dir, path, n);
		backing_dir[n] = '\0';
	}
}

const char *chfuse_backing_dir(void) { return backing_dir[0] ? backing_dir : NULL; }

struct chfuse_backing *chfuse_backing_get(int session_fd, const char *path, int *backing_id, int *err)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		*err = -errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	pthread_mutex_lock(&entries_lock);
	remember_dir(path);
	struct chfuse_backing *b;
	for (b = entries; b; b = b->next)
		if (b->dev == st.st_dev && b->ino == st.st_ino)
			break;
	if (b) {
		b->refs++;
		close(fd);
	} else {
		struct fuse_backing_map map = {.fd = fd};
		int id = ioctl(session_fd, FUSE_DEV_IOC_BACKING_OPEN, &map);
		b = id > 0 ? calloc(1, sizeof *b) : NULL;
		if (!b) {
			*err = id > 0 ? -ENOMEM : -errno;
			if (id > 0) {
				uint32_t uid = (uint32_t)id;
				ioctl(session_fd, FUSE_DEV_IOC_BACKING_CLOSE, &uid);
			}
			pthread_mutex_unlock(&entries_lock);
			close(fd);
			return NULL;
		}
		*b = (struct chfuse_backing){
		        .next = entries, .dev = st.st_dev, .ino = st.st_ino, .fd = fd, .id = id, .refs = 1};
		entries = b;
	}
	*backing_id = b->id;
	pthread_mutex_unlock(&entries_lock);
	return b;
}

int chfuse_backing_fd(const struct chfuse_backing *b) { return b->fd; }

void chfuse_backing_put(int session_fd, struct chfuse_backing *b)
{
	pthread_mutex_lock(&entries_lock);
	if (--b->refs > 0) {
		pthread_mutex_unlock(&entries_lock);
		return;
	}
	struct chfuse_backing **pp = &entries;
	while (*pp != b)
		pp = &(*pp)->next;
	*pp = b->next;
	pthread_mutex_unlock(&entries_lock);
	uint32_t id = (uint32_t)b->id;
	ioctl(session_fd, FUSE_DEV_IOC_BACKING_CLOSE, &id);
	close(b->fd);
	free(b);
}
