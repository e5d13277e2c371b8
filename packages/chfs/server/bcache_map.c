/*
 * bcache_map.c — the held-map of a backend file (see bcache_map.h, backend_cache.c).
 *
 * Two stores, read as one. The xattr user.chfs.held of the backing file: u64 floor (little
 * endian; UINT64_MAX = none), then a bitmap of chunks 0..XATTR_CHUNKS-1 (bit i%8 of byte i/8),
 * only as long as the highest chunk marked. The map file STORAGE/bcache/<fileid as 16 hex
 * digits>: u64 floor, then one byte per chunk (1 = held) — for chunks at or past XATTR_CHUNKS, a
 * mark or floor with no backing file at hand, file systems without user xattrs, and the maps of
 * earlier builds. A chunk is held if either store says so; the floor is the smaller of the two.
 * Marks are never taken back and the floor only falls, so the union is always right and nothing
 * ever moves from one store to the other. Most maps are xattrs of a few bytes inside the
 * backing file's inode: a staged file no longer costs a second file on each server holding
 * some of it (creating files was most of a small file's stage-in). Both stores live in the
 * storage directory, so a restarted server neither fetches again nor overwrites what was
 * written since.
 *
 * Locking is the caller's (backend_cache.c: a chunk's mark under its stripe mutex, the floor
 * under the gate); a change of the xattr (read, change, write back) also holds one of XLOCKS
 * mutexes chosen by file id, innermost, since two chunks of one file are marked at once.
 * Creating a map file (writing its header) holds create_lock, so a new header can never
 * overwrite a floor just written.
 */
#define _GNU_SOURCE
#include "bcache_map.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define HELD_XATTR "user.chfs.held"
#define XATTR_CHUNKS 8192u /* a bitmap of 1 KiB at most: within one xattr block */
#define XLOCKS 64

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t xlocks[XLOCKS];
static int mapdir = -1;

int hmap_dir_init(int rootfd)
{
	for (int i = 0; i < XLOCKS; i++)
		pthread_mutex_init(&xlocks[i], NULL);
	if (mkdirat(rootfd, "bcache", 0700) < 0 && errno != EEXIST)
		return -errno;
	mapdir = openat(rootfd, "bcache", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return mapdir < 0 ? -errno : 0;
}

void hmap_init(struct hmap *m, uint64_t fileid, int dfd)
{
	*m = (struct hmap){.fileid = fileid, .fd = -1, .dfd = dfd};
}

void hmap_close(struct hmap *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
}

static void map_name(uint64_t fileid, char name[17])
{
	snprintf(name, 17, "%016llx", (unsigned long long)fileid);
}

static void put64(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

/* ---- the map file ---- */

/* m->fd: the map file, opened if it exists (created, floor none, if `create`). */
static int file_open(struct hmap *m, int create)
{
	if (m->fd >= 0)
		return m->fd;
	char name[17];
	map_name(m->fileid, name);
	int fd = openat(mapdir, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT || !create)
		return fd < 0 ? -errno : (m->fd = fd);
	pthread_mutex_lock(&create_lock);
	fd = openat(mapdir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		uint8_t b[8];
		put64(b, UINT64_MAX);
		if (pwrite(fd, b, 8, 0) != 8) {
			int rc = -errno;
			close(fd);
			unlinkat(mapdir, name, 0);
			fd = rc;
		}
	} else if (errno == EEXIST) {
		fd = openat(mapdir, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	} else {
		fd = -errno;
	}
	pthread_mutex_unlock(&create_lock);
	return fd < 0 ? fd : (m->fd = fd);
}

static uint64_t file_floor(struct hmap *m)
{
	uint8_t b[8];
	return file_open(m, 0) >= 0 && pread(m->fd, b, 8, 0) == 8 ? get64(b) : UINT64_MAX;
}

/* ---- the xattr of the backing file ---- */

static pthread_mutex_t *xlock(uint64_t fileid) { return &xlocks[(fileid ^ (fileid >> 29)) % XLOCKS]; }

/* The xattr into v (8 + XATTR_CHUNKS / 8 bytes): its length, 0 if absent or unusable. */
static size_t xget(struct hmap *m, uint8_t *v)
{
	if (m->dfd < 0)
		return 0;
	ssize_t n = fgetxattr(m->dfd, HELD_XATTR, v, 8 + XATTR_CHUNKS / 8);
	return n >= 8 ? (size_t)n : 0;
}

/* Sets bit i (i < XATTR_CHUNKS) or lowers the floor to len. 0, or -errno (-ENOTSUP: no user
 * xattrs here, the caller uses the map file). */
static int xchange(struct hmap *m, int64_t i, uint64_t len)
{
	uint8_t *v = malloc(8 + XATTR_CHUNKS / 8);
	if (!v)
		return -ENOMEM;
	pthread_mutex_t *l = xlock(m->fileid);
	pthread_mutex_lock(l);
	size_t n = xget(m, v);
	if (!n) {
		put64(v, UINT64_MAX);
		n = 8;
	}
	int rc = 0;
	if (i >= 0) {
		size_t need = 8 + (size_t)i / 8 + 1;
		if (need > n) {
			memset(v + n, 0, need - n);
			n = need;
		}
		v[8 + i / 8] |= (uint8_t)(1u << (i % 8));
	} else if (len < get64(v)) {
		put64(v, len);
	}
	if (fsetxattr(m->dfd, HELD_XATTR, v, n, 0) < 0)
		rc = errno == EOPNOTSUPP ? -ENOTSUP : -errno;
	pthread_mutex_unlock(l);
	free(v);
	return rc;
}

/* ---- the union ---- */

int hmap_held(struct hmap *m, uint64_t i, uint64_t *floor)
{
	uint8_t v[8 + XATTR_CHUNKS / 8];
	size_t n = xget(m, v);
	uint64_t x = n ? get64(v) : UINT64_MAX, f = UINT64_MAX;
	int held = i < XATTR_CHUNKS && 8 + i / 8 < n && (v[8 + i / 8] >> (i % 8) & 1);
	uint8_t b[8];
	if (file_open(m, 0) >= 0) {
		if (!held && pread(m->fd, b, 1, (off_t)(8 + i)) == 1 && b[0] == 1)
			held = 1;
		if (floor && pread(m->fd, b, 8, 0) == 8)
			f = get64(b);
	}
	if (floor)
		*floor = x < f ? x : f;
	return held;
}

int hmap_mark(struct hmap *m, uint64_t i)
{
	int rc = m->dfd >= 0 && i < XATTR_CHUNKS ? xchange(m, (int64_t)i, 0) : -ENOTSUP;
	if (rc != -ENOTSUP && rc != -E2BIG && rc != -ENOSPC && rc != -ERANGE)
		return rc;
	uint8_t b = 1;
	if ((rc = file_open(m, 1)) < 0)
		return rc;
	return pwrite(m->fd, &b, 1, (off_t)(8 + i)) == 1 ? 0 : -errno;
}

int hmap_lower_floor(struct hmap *m, uint64_t len)
{
	int rc = m->dfd >= 0 ? xchange(m, -1, len) : -ENOTSUP;
	if (rc != -ENOTSUP && rc != -E2BIG && rc != -ENOSPC && rc != -ERANGE)
		return rc;
	if ((rc = file_open(m, 1)) < 0)
		return rc;
	uint8_t b[8];
	if (len >= file_floor(m))
		return 0;
	put64(b, len);
	return pwrite(m->fd, b, 8, 0) == 8 ? 0 : -errno;
}

void hmap_remove(struct hmap *m)
{
	char name[17];
	map_name(m->fileid, name);
	unlinkat(mapdir, name, 0);
	if (m->dfd >= 0)
		fremovexattr(m->dfd, HELD_XATTR);
}
