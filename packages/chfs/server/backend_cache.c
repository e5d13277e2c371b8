/*
 * backend_cache.c — which chunks of a backend file (MD_BACKEND) this server holds, and the
 * fetch of the missing ones.
 *
 * A sparse backing file cannot tell a chunk never fetched from a chunk of zeros, so each backend
 * file with chunks here has a held-map (bcache_map.c: an xattr of the backing file, a map file
 * for what it cannot hold): which chunks are held, and the floor. A chunk is fetched — the bytes
 * [i*cs, min((i+1)*cs, floor)) of the backend file — before a read or a write touches it, then
 * marked held; once held it is never fetched again, so a write after the mark cannot be
 * overwritten by a fetch. `floor` is the smallest length the file was truncated to: bytes at
 * or past it are gone from the CHFS file and are never fetched (a later extension reads zeros
 * there, as POSIX wants).
 *
 * Locking: the fetch-and-mark of chunk i of a file holds `gate` shared and one of STRIPES
 * mutexes chosen by (fileid, i), so different chunks fetch in parallel; a truncate holds `gate`
 * exclusively (it changes the floor every fetch reads) — one lock, not all the stripes (a
 * thread holding 64 mutexes at once also overflowed ThreadSanitizer's deadlock detector).
 */
#define _GNU_SOURCE
#include "backend.h"
#include "bcache_map.h"
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

int bcache_init(struct chfsd *d)
{
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&stripes[i], NULL);
	return hmap_dir_init(st_rootfd(d->st));
}

static pthread_mutex_t *stripe(uint64_t fileid, uint64_t index)
{
	uint64_t k = fileid ^ (index * 0x9e3779b97f4a7c15ull);
	return &stripes[(k ^ (k >> 29)) % STRIPES];
}

/* The backing file of fileid if it exists (-1 if not), for the map's xattr. */
static int data_fd(struct chfsd *d, uint64_t fileid)
{
	int fd = st_data_open(d->st, fileid, 0);
	return fd < 0 ? -1 : fd;
}

/* One pass over chunks first..last of a file: what it needs open, opened once. */
struct pass {
	struct chfsd *d;
	uint64_t fileid;
	const struct wire_tag *tag;
	const char *path;
	struct hmap map;
	int bfd, dfd;
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
	uint64_t floor;
	if (p->dfd < 0) /* (the map is mostly its xattr: the file may have been made meanwhile) */
		p->map.dfd = p->dfd = data_fd(p->d, p->fileid);
	if (!hmap_held(&p->map, i, &floor)) {
		uint64_t start = i * cs, end = start + cs;
		if (end > floor)
			end = floor;
		if (start < end && p->bfd < 0 && (p->bfd = backend_open_read(p->d->bk, p->path)) < 0)
			rc = p->bfd;
		if (rc == 0 && start < end && p->dfd < 0 &&
		    (p->dfd = st_data_open_tagged(p->d->st, p->fileid, p->tag)) < 0)
			rc = p->dfd;
		p->map.dfd = p->dfd;
		if (rc == 0 && start < end && !p->buf && !(p->buf = malloc(p->piece)))
			rc = -ENOMEM;
		if (rc == 0 && start < end)
			rc = ioe_copy_range(p->bfd, p->dfd, p->buf, p->piece, start, end, &p->fetched);
		if (rc == 0)
			rc = hmap_mark(&p->map, i);
	}
	pthread_mutex_unlock(l);
	pthread_rwlock_unlock(&gate);
	return rc;
}

/* Chunks first..last (only those this server owns if `owned`). Nothing is opened before the
 * first chunk taken: a stage-in reaches every server with every file, and a server owning no
 * chunk of it (every server but one, for a file of one chunk) made an empty map file — a file
 * created for nothing, where creating files is most of a small file's stage-in. */
static int pass_run(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                    uint64_t first, uint64_t last, int owned, uint32_t piece, uint64_t *fetched)
{
	struct pass p = {.d = d, .fileid = fileid, .tag = tag, .path = path, .bfd = -1, .dfd = -1};
	hmap_init(&p.map, fileid, -1);
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
	hmap_close(&p.map);
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
	struct hmap m;
	pthread_rwlock_wrlock(&gate);
	hmap_init(&m, fileid, data_fd(d, fileid));
	int rc = hmap_lower_floor(&m, len);
	hmap_close(&m);
	if (m.dfd >= 0)
		close(m.dfd);
	pthread_rwlock_unlock(&gate);
	return rc;
}

void bcache_mark(struct chfsd *d, uint64_t fileid, uint64_t index)
{
	if (!d->bk)
		return;
	struct hmap m;
	pthread_mutex_t *l = stripe(fileid, index);
	pthread_rwlock_rdlock(&gate);
	pthread_mutex_lock(l);
	hmap_init(&m, fileid, data_fd(d, fileid));
	hmap_mark(&m, index);
	hmap_close(&m);
	if (m.dfd >= 0)
		close(m.dfd);
	pthread_mutex_unlock(l);
	pthread_rwlock_unlock(&gate);
}

int bcache_holds(struct chfsd *d, uint64_t fileid, uint64_t off)
{
	struct wire_tag tag;
	struct hmap m;
	if (!d->bk || st_data_tag(d->st, fileid, &tag) != 0 || !(tag.flags & MD_BACKEND))
		return 1;
	hmap_init(&m, fileid, data_fd(d, fileid));
	int held = hmap_held(&m, off / tag.chunk_size, NULL);
	hmap_close(&m);
	if (m.dfd >= 0)
		close(m.dfd);
	return held;
}

void bcache_remove(struct chfsd *d, uint64_t fileid)
{
	struct hmap m;
	if (!d->bk)
		return;
	hmap_init(&m, fileid, data_fd(d, fileid));
	hmap_remove(&m);
	if (m.dfd >= 0)
		close(m.dfd);
}
