/*
 * relink.c — a file's backend name after its rename reached the backend.
 *
 * Data requests carry the backend path the client found in the file's metadata (md.link) when
 * it opened the file, and the servers holding chunks flush them there (flush.c). When
 * flush_meta.c moves the backend file to the new name at a sync, a descriptor opened before
 * still sends the old name, and a server's dirty entry (a local-placement file's lives as long
 * as the file) still holds it: their next flush would make a new file under the old name. So
 * the server that applied the rename tells every member the file's new backend name
 * (WOP_RELINK); each keeps fileid → name in a table, rewrites its dirty entry, and maps the
 * path of later data requests of that file through the table. A member that was down is told
 * when it starts again, before it flushes (relink_owed.c); one that joins later is owed the
 * whole table (relink_join.c).
 *
 * A file that lost its last name while descriptors keep its data has an empty name here
 * (flush.c, WOP_DATA_UNNAMED): never flushed again, also by a server that joins since. So has
 * a removed file on a member that a client's DATA_REMOVE or DATA_UNNAMED did not reach: the
 * client tells a member it reached (WOP_UNNAMED_OWED), which owes the empty name to the one
 * that missed it (relink_owed.c). An empty name is final: no later name replaces it.
 *
 * The table is appended to STORAGE/bdirty/relink.log (u64 fileid, u32 length, name; the last
 * record of a file wins) before WOP_RELINK is answered, so a restarted server still maps old
 * names. Entries of removed files leave memory; the log is not compacted (a record per rename
 * that reached the backend).
 */
#define _GNU_SOURCE
#include "relink.h"
#include "le.h"

#include "backend.h"
#include "chfsd.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBUCKET 1024

struct link {
	uint64_t fileid;
	char *path;
	struct link *next;
};

static struct {
	pthread_mutex_t lock;
	struct link *b[NBUCKET];
	int fd;
	off_t end;
} rl = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static struct link **slot(uint64_t fileid)
{
	struct link **pp = &rl.b[(fileid ^ fileid >> 29) % NBUCKET];
	while (*pp && (*pp)->fileid != fileid)
		pp = &(*pp)->next;
	return pp;
}

/* Set fileid's name (lock held). */
static int set(uint64_t fileid, const char *path, size_t n)
{
	struct link **pp = slot(fileid);
	char *p = strndup(path, n);
	if (!p)
		return -ENOMEM;
	if (!*pp && !(*pp = calloc(1, sizeof **pp))) {
		free(p);
		return -ENOMEM;
	}
	free((*pp)->path);
	(*pp)->fileid = fileid;
	(*pp)->path = p;
	return 0;
}

int brelink_init(struct chfsd *d, int bdirty_fd)
{
	(void)d;
	struct stat sb;
	rl.fd = openat(bdirty_fd, "relink.log", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (rl.fd < 0 || fstat(rl.fd, &sb) < 0)
		return -errno;
	uint8_t *buf = sb.st_size ? malloc((size_t)sb.st_size) : NULL;
	if (sb.st_size && (!buf || pread(rl.fd, buf, (size_t)sb.st_size, 0) != sb.st_size)) {
		free(buf);
		return buf ? -EIO : -ENOMEM;
	}
	off_t off = 0;
	while (off + 12 <= sb.st_size) {
		uint64_t id = get_le(buf + off, 8);
		uint32_t n = (uint32_t)get_le(buf + off + 8, 4);
		if (n >= CHFS_PATH_MAX || off + 12 + n > sb.st_size || set(id, (char *)buf + off + 12, n))
			break; /* a record cut by a crash was never answered */
		off += 12 + n;
	}
	rl.end = off;
	free(buf);
	return bowed_init(bdirty_fd); /* what other members missed (relink_owed.c) */
}

int brelink_note(struct chfsd *d, uint64_t fileid, const char *path)
{
	if (!d->bk || rl.fd < 0)
		return -EOPNOTSUPP;
	size_t n = strlen(path);
	uint8_t *rec = malloc(12 + n);
	if (!rec)
		return -ENOMEM;
	put_le(rec, fileid, 8);
	put_le(rec + 8, n, 4);
	memcpy(rec + 12, path, n);
	pthread_mutex_lock(&rl.lock);
	struct link *l = *slot(fileid);
	if (l && !*l->path && n) { /* no name comes back: a rename's debt delivered after the
	                            * removal's (relink_owed.c), both owed while this server was down */
		pthread_mutex_unlock(&rl.lock);
		free(rec);
		return 0;
	}
	ssize_t w = pwrite(rl.fd, rec, 12 + n, rl.end);
	int rc = w == (ssize_t)(12 + n) ? 0 : w < 0 ? -errno : -EIO;
	if (rc == 0) {
		rl.end += (off_t)(12 + n);
		rc = set(fileid, path, n);
	}
	pthread_mutex_unlock(&rl.lock);
	free(rec);
	if (rc == 0)
		bflush_relink(d, fileid, path);
	return rc;
}

void brelink_map(struct chfsd *d, uint64_t fileid, char *path, size_t size)
{
	if (!d->bk || !*path)
		return;
	pthread_mutex_lock(&rl.lock);
	struct link *l = *slot(fileid);
	if (l && *l->path && strlen(l->path) < size)
		strcpy(path, l->path);
	pthread_mutex_unlock(&rl.lock);
}

int brelink_unnamed(uint64_t fileid)
{
	pthread_mutex_lock(&rl.lock);
	struct link *l = *slot(fileid);
	int unnamed = l && !*l->path;
	pthread_mutex_unlock(&rl.lock);
	return unnamed;
}

void brelink_forget(struct chfsd *d, uint64_t fileid)
{
	if (!d->bk)
		return;
	pthread_mutex_lock(&rl.lock);
	struct link **pp = slot(fileid), *l = *pp;
	if (l) {
		*pp = l->next;
		free(l->path);
		free(l);
	}
	pthread_mutex_unlock(&rl.lock);
}

int brelink_name(struct chfsd *d, uint64_t fileid, char *path, size_t size)
{
	(void)d;
	pthread_mutex_lock(&rl.lock);
	struct link *l = *slot(fileid);
	int rc = !l ? -ENOENT : strlen(l->path) >= size ? -ENAMETOOLONG : 0;
	if (rc == 0)
		strcpy(path, l->path);
	pthread_mutex_unlock(&rl.lock);
	return rc;
}

uint64_t *brelink_ids(size_t *n)
{
	pthread_mutex_lock(&rl.lock);
	size_t k = 0, cap = 64;
	uint64_t *v = malloc(cap * sizeof *v);
	for (unsigned b = 0; v && b < NBUCKET; b++)
		for (struct link *l = rl.b[b]; v && l; l = l->next) {
			if (k == cap) {
				uint64_t *more = realloc(v, (cap *= 2) * sizeof *v);
				if (!more) {
					free(v);
					v = NULL;
					break;
				}
				v = more;
			}
			v[k++] = l->fileid;
		}
	pthread_mutex_unlock(&rl.lock);
	*n = v ? k : 0;
	return v;
}

static void not_told(struct chfsd *d, const char *id, const char *addr, int rc, void *arg)
{
	uint64_t fileid = *(const uint64_t *)arg;
	log_err("backend rename (file %016llx): server %s not told (%s); it is told when it starts "
	        "again or at the next sync",
	        (unsigned long long)fileid, addr, strerror(-rc));
	bowed_add(d, id, addr, fileid);
}

void brelink_announce(struct chfsd *d, uint64_t fileid, const char *path)
{
	size_t cap = WIRE_HDR_LEN + 16 + strlen(path);
	uint8_t *msg = malloc(cap);
	int rc = brelink_note(d, fileid, path);
	if (rc)
		log_err("backend name of %s (file %016llx): %s", path, (unsigned long long)fileid,
		        strerror(-rc));
	struct wenc e;
	if (msg) {
		wenc_init(&e, msg, cap);
		chfsd_req_hdr(d, &e, WOP_RELINK);
		wenc_u64(&e, fileid);
		wenc_str(&e, path);
	}
	if (!msg || chfsd_call_peers(d, &e, not_told, &fileid) != 0)
		log_err("backend rename of %s: out of memory; other servers may flush it under its old name",
		        path);
	free(msg);
}
