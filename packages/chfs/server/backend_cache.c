/*
 * backend_cache.c — which chunks of a backend file (MD_BACKEND) this server holds, and the
 * fetch of the missing ones.
 *
 * A sparse backing file cannot tell a chunk never fetched from a chunk of zeros, so each backend
 * file with chunks here has a held-map, STORAGE/bcache/<fileid as 16 hex digits>: u64 floor
 * (little endian; UINT64_MAX = none), then one byte per chunk index (1 = held). The map lives
 * in the storage directory, so a restarted server neither fetches again nor overwrites what
 * was written since. A chunk is fetched — the bytes [i*cs, min((i+1)*cs, floor)) of the
 * backend file — before a read or a write touches it, then marked held; once held it is never
 * fetched again, so a write after the mark cannot be overwritten by a fetch. `floor` is the
 * smallest length the file was truncated to: bytes at or past it are gone from the CHFS file
 * and are never fetched (a later extension reads zeros there, as POSIX wants).
 *
 * Locking: the fetch-and-mark of chunk i of a file holds `gate` shared and one of STRIPES
 * mutexes chosen by (fileid, i), so different chunks fetch in parallel; a truncate holds `gate`
 * exclusively (it changes the floor every fetch reads) — one lock, not all the stripes (a
 * thread holding 64 mutexes at once also overflowed ThreadSanitizer's deadlock detector). Creating a map (writing its header) holds `create_lock`, so a new
 * header can never overwrite a floor a truncate just wrote.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "chfsd.h"
#include "io_copy.h"

#include "log.h"
#include "placement.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STRIPES 64
#define FETCH_PIECE (1u << 20)

static pthread_mutex_t stripes[STRIPES];
static pthread_rwlock_t gate = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static int mapdir = -1;

int bcache_init(struct chfsd *d)
{
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&stripes[i], NULL);
	int root = st_rootfd(d->st);
	if (mkdirat(root, "bcache", 0700) < 0 && errno != EEXIST)
		return -errno;
	mapdir = openat(root, "bcache", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return mapdir < 0 ? -errno : 0;
}

static pthread_mutex_t *stripe(uint64_t fileid, uint64_t index)
{
	uint64_t k = fileid ^ (index * 0x9e3779b97f4a7c15ull);
	return &stripes[(k ^ (k >> 29)) % STRIPES];
}

static void map_name(uint64_t fileid, char name[17])
{
	snprintf(name, 17, "%016llx", (unsigned long long)fileid);
}

static int put_u64(int fd, uint64_t v, off_t off)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return pwrite(fd, b, 8, off) == 8 ? 0 : -errno;
}

/* The held-map of fileid, created (floor none) if absent. */
static int map_open(uint64_t fileid)
{
	char name[17];
	map_name(fileid, name);
	int fd = openat(mapdir, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd < 0 ? -errno : fd;
	pthread_mutex_lock(&create_lock);
	fd = openat(mapdir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		int rc = put_u64(fd, UINT64_MAX, 0);
		if (rc) {
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
	return fd;
}

static uint64_t map_floor(int fd)
{
	uint8_t b[8];
	if (pread(fd, b, 8, 0) != 8)
		return UINT64_MAX;
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

static int map_held(int fd, uint64_t index)
{
	uint8_t b = 0;
	return pread(fd, &b, 1, (off_t)(8 + index)) == 1 && b == 1;
}

static int map_mark(int fd, uint64_t index)
{
	uint8_t b = 1;
	return pwrite(fd, &b, 1, (off_t)(8 + index)) == 1 ? 0 : -errno;
}

/* Copy [start, end) of the backend file into the backing file (stops at the backend's EOF). */
static int fetch(int bfd, int dfd, uint8_t *buf, size_t piece, uint64_t start, uint64_t end,
                 uint64_t *fetched)
{
	/* In the kernel first (as cp does: no copy through user space, reflinks where the file
	 * systems can); through buf where copy_file_range cannot (another file system type on an
	 * older kernel, or none at all). */
	for (loff_t in = (loff_t)start, out = (loff_t)start; (uint64_t)in < end;) {
		ssize_t k = copy_file_range(bfd, &in, dfd, &out, (size_t)(end - (uint64_t)in), 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0)
			return 0; /* the backend file ends here */
		if (k < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
			start = (uint64_t)in;
			break;
		}
		if (k < 0)
			return -errno;
		*fetched += (uint64_t)k;
		if ((uint64_t)in >= end)
			return 0;
	}
	return ioe_copy(bfd, dfd, buf, piece, start, end, fetched);
}

/* One pass over chunks first..last of a file: what it needs open, opened once. */
struct pass {
	struct chfsd *d;
	uint64_t fileid;
	const struct wire_tag *tag;
	const char *path;
	int map, bfd, dfd;
	uint8_t *buf;
	size_t piece;
	uint64_t fetched;
};

/* Fetch chunk i unless held, then mark it held. */
static int pass_chunk(struct pass *p, uint64_t i)
{
	uint64_t cs = p->tag->chunk_size;
	int rc = 0;
	pthread_mutex_t *l = stripe(p->fileid, i);
	pthread_rwlock_rdlock(&gate);
	pthread_mutex_lock(l);
	if (p->map < 0 && (p->map = map_open(p->fileid)) < 0)
		rc = p->map;
	else if (!map_held(p->map, i)) {
		uint64_t floor = map_floor(p->map), start = i * cs, end = start + cs;
		if (end > floor)
			end = floor;
		if (start < end && p->bfd < 0 && (p->bfd = backend_open_read(p->d->bk, p->path)) < 0)
			rc = p->bfd;
		if (rc == 0 && start < end && p->dfd < 0 &&
		    (p->dfd = st_data_open_tagged(p->d->st, p->fileid, p->tag)) < 0)
			rc = p->dfd;
		if (rc == 0 && start < end && !p->buf && !(p->buf = malloc(p->piece)))
			rc = -ENOMEM;
		if (rc == 0 && start < end)
			rc = fetch(p->bfd, p->dfd, p->buf, p->piece, start, end, &p->fetched);
		if (rc == 0)
			rc = map_mark(p->map, i);
	}
	pthread_mutex_unlock(l);
	pthread_rwlock_unlock(&gate);
	return rc;
}

/* Chunks first..last (only those this server owns if `owned`). The held-map is opened (made)
 * at the first chunk taken: a stage-in reaches every server with every file, and a server
 * owning no chunk of it (every server but one, for a file of one chunk) made an empty map —
 * a file created for nothing, where creating files is most of a small file's stage-in. */
static int pass_run(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                    uint64_t first, uint64_t last, int owned, uint32_t piece, uint64_t *fetched)
{
	struct pass p = {.d = d, .fileid = fileid, .tag = tag, .path = path, .map = -1, .bfd = -1, .dfd = -1};
	p.piece = piece ? (piece < 4096 ? 4096 : piece) : FETCH_PIECE;
	if (p.piece > tag->chunk_size)
		p.piece = tag->chunk_size;
	int rc = 0;
	for (uint64_t i = first; i <= last && rc == 0; i++)
		if (!owned || backend_owns(d, placement_chunk_key(tag->pkey, i)))
			rc = pass_chunk(&p, i);
	if (rc)
		log_warn("backend %s (file %016llx): fetching chunks %llu..%llu: %s", path,
		         (unsigned long long)fileid, (unsigned long long)first, (unsigned long long)last,
		         strerror(-rc));
	free(p.buf);
	if (p.bfd >= 0)
		close(p.bfd);
	if (p.dfd >= 0)
		close(p.dfd);
	if (p.map >= 0)
		close(p.map);
	if (fetched)
		*fetched = p.fetched;
	return rc;
}

int bcache_ensure(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                  uint64_t off, uint64_t len)
{
	if (!len || !d->bk || !(tag->flags & MD_BACKEND))
		return 0;
	uint64_t cs = tag->chunk_size;
	return pass_run(d, fileid, tag, path, off / cs, (off + len - 1) / cs, 0, 0, NULL);
}

int bcache_stage(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                 uint64_t size, uint32_t piece, uint64_t *fetched)
{
	*fetched = 0;
	if (!d->bk)
		return -EOPNOTSUPP;
	if (!size)
		return 0;
	return pass_run(d, fileid, tag, path, 0, (size - 1) / tag->chunk_size, 1, piece, fetched);
}

int bcache_truncate(struct chfsd *d, uint64_t fileid, uint64_t len)
{
	if (!d->bk)
		return 0;
	pthread_rwlock_wrlock(&gate);
	int map = map_open(fileid), rc = map < 0 ? map : 0;
	if (rc == 0 && len < map_floor(map))
		rc = put_u64(map, len, 0);
	if (map >= 0)
		close(map);
	pthread_rwlock_unlock(&gate);
	return rc;
}

void bcache_mark(struct chfsd *d, uint64_t fileid, uint64_t index)
{
	if (!d->bk)
		return;
	pthread_mutex_t *l = stripe(fileid, index);
	pthread_rwlock_rdlock(&gate);
	pthread_mutex_lock(l);
	int map = map_open(fileid);
	if (map >= 0) {
		map_mark(map, index);
		close(map);
	}
	pthread_mutex_unlock(l);
	pthread_rwlock_unlock(&gate);
}

int bcache_holds(struct chfsd *d, uint64_t fileid, uint64_t off)
{
	struct wire_tag tag;
	char name[17];
	if (!d->bk || st_data_tag(d->st, fileid, &tag) != 0 || !(tag.flags & MD_BACKEND))
		return 1;
	map_name(fileid, name);
	int map = openat(mapdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (map < 0)
		return 0;
	int held = map_held(map, off / tag.chunk_size);
	close(map);
	return held;
}

void bcache_remove(struct chfsd *d, uint64_t fileid)
{
	char name[17];
	if (!d->bk)
		return;
	map_name(fileid, name);
	unlinkat(mapdir, name, 0);
}
