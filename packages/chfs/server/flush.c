/*
 * flush.c — write-back to the backend (chfsd -b): every chunk written here reaches DIR/path.
 *
 * With a backend, CREATE flags new files MD_FLUSH with md.link = their path (handlers.c), so
 * each WRITE carries the backend path and the server holding a chunk knows where it goes. A
 * write marks its chunks dirty in STORAGE/bdirty/<fileid>: a header (magic, placement tag,
 * backend path) in the first MAP_OFF bytes, then one byte per chunk (1 = dirty). The map is
 * written before the WRITE is answered, so a server killed with dirty data finds it at
 * start-up and flushes it then.
 *
 * Flushing a file: under the lock, each dirty byte is cleared; outside it, the chunk's bytes
 * are copied from the backing file to the backend file at the same offset, then the backend
 * file is fsync'ed. A write racing with the copy marks its chunk again after writing, so it is
 * flushed once more, never lost. On an error (ENOSPC, EACCES, ...) the chunk's byte is set
 * again and the file keeps the error: the data stays in CHFS, the status line counts it,
 * bflush_wait (chfs_sync) names the path, and the flush threads retry it every
 * RETRY_S seconds. A file whose map is all clear and saw no write meanwhile is forgotten.
 *
 * I/O-aware delay (-U): a flush thread takes a file only once `delay` seconds passed since its
 * last write (negative: at once), so a file being written is flushed when the writer pauses.
 * bflush_wait and shutdown ignore the delay.
 *
 * A local-placement file has no chunk bytes: its clients write its backing file directly, so
 * its entry stays for as long as the file exists and is dirty while the backing file's size or
 * mtime differ from its last flush, which copies the whole file (flush_local.c). A rename that
 * reached the backend moves an entry to the file's new name (relink.c). Nothing is flushed
 * before bflush_release, once the server is in the pool: a rename may have reached the
 * backend while it was down, and it first asks the others for such new names (relink_owed.c);
 * nor, after a stop (SIGSTOP), before it asked again (relink_gap.c).
 *
 * Changes of names and attributes (flush_meta.c) are applied after the data: by bflush_wait's
 * meta phase (chfs_sync asks every server for the data phase first) and at shutdown.
 *
 * A file that lost its last name while descriptors keep its data (an open-unlinked file,
 * WOP_DATA_UNNAMED from the client that removed the name) keeps an entry with an empty path,
 * in its map too, and is never flushed: its backend file went with the name, and a flush (of a
 * write through a descriptor, or of the map at a restart) brought it back. DATA_REMOVE, when
 * the last descriptor is closed, forgets it. The empty name also goes into the relink table
 * (relink.c), which a joining server is handed: its entries of the file start unnamed.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "chfsd.h"
#include "flush_meta.h"
#include "io_copy.h"
#include "relink.h"

#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAP_OFF 4608          /* header: 24 bytes + path (< CHFS_LINK_MAX: a backend name) */
#define MAP_MAGIC 0x54524442u /* "BDRT" */
#define RETRY_S 5.0
#define COPY_PIECE (1u << 20)
#define HOT_S 0.05

struct dirty {
	uint64_t fileid;
	struct wire_tag tag;
	char *path;
	int fd;               /* the map */
	double last_io;       /* monotonic seconds */
	double failed_at;     /* of the last failed flush */
	int err;              /* its errno (0: none) */
	int busy;             /* being flushed */
	unsigned round;       /* last bflush_wait round that flushed it */
	uint64_t gen;         /* bumped by every write */
	uint64_t dirty_bytes; /* written since the last successful flush (status) */
	int local;            /* local placement: the whole backing file is copied (flush_local.c) */
	int clean;            /* local: the backend holds the backing file as of fsize/fmtime */
	uint64_t fsize;       /* local: the backing file's size and mtime at the last flush */
	int64_t fmtime;
	int64_t fset; /* local: the mtime its last flush gave the backend file (0: none yet) */
	struct dirty *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct dirty *head;
	struct chfsd *d;
	int dirfd, stopping, nthreads;
	int held; /* until bflush_release: no flush (this server may still miss backend names) */
	unsigned round;
	double delay;
	pthread_t *threads;
} fl = {.lock = PTHREAD_MUTEX_INITIALIZER,
        .work = PTHREAD_COND_INITIALIZER,
        .done = PTHREAD_COND_INITIALIZER,
        .dirfd = -1};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A local-placement file is dirty while its backing file's size or mtime differ from those of
 * its last flush (clients write it directly: no WRITE tells us). *hot: monotonic seconds until
 * which it counts as being written (its mtime plus HOT_S: a write within the file system's
 * timestamp granularity of a flush leaves the same mtime, so a file flushed that close to its
 * last write is looked at again). Lock held. */
static int local_dirty(struct dirty *e, double *hot, uint64_t *size)
{
	uint64_t sz = 0;
	int64_t mt = 0;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	if (st_data_stat(fl.d->st, e->fileid, &sz, &mt) < 0)
		return 1;
	double age = (double)rt.tv_sec + rt.tv_nsec / 1e9 - (double)mt / 1e9;
	if (hot) /* (an mtime in the future, set explicitly, does not postpone the flush) */
		*hot = now_s() - (age > 0 ? age : 0) + HOT_S;
	if (size)
		*size = sz;
	return !e->clean || sz != e->fsize || mt != e->fmtime;
}

static int unnamed(const struct dirty *e) { return !*e->path; }

static void map_name(uint64_t fileid, char name[17])
{
	snprintf(name, 17, "%016llx", (unsigned long long)fileid);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static struct dirty *find(uint64_t fileid)
{
	for (struct dirty *e = fl.head; e; e = e->next)
		if (e->fileid == fileid)
			return e;
	return NULL;
}

/* The entry of fileid once no flush thread is working on it (fl.lock held; it waits). */
static struct dirty *find_idle(uint64_t fileid)
{
	struct dirty *e;
	while ((e = find(fileid)) && e->busy)
		pthread_cond_wait(&fl.done, &fl.lock);
	return e;
}

static void drop(struct dirty *e)
{
	struct dirty **pp = &fl.head;
	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	char name[17];
	map_name(e->fileid, name);
	unlinkat(fl.dirfd, name, 0);
	close(e->fd);
	free(e->path);
	free(e);
}

/* A new entry with its map created (lock held). */
static struct dirty *add(uint64_t fileid, const struct wire_tag *tag, const char *path)
{
	struct dirty *e = calloc(1, sizeof *e);
	uint8_t *hdr = calloc(1, MAP_OFF);
	char name[17];
	size_t n = strlen(path);
	map_name(fileid, name);
	if (!e || !hdr || !(e->path = strdup(path)) || n >= MAP_OFF - 24)
		goto fail;
	put32(hdr, MAP_MAGIC);
	put32(hdr + 4, tag->pkey);
	put32(hdr + 8, tag->chunk_size);
	put32(hdr + 12, tag->flags);
	put32(hdr + 16, (uint32_t)n);
	memcpy(hdr + 24, path, n);
	e->fd = openat(fl.dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (e->fd < 0)
		goto fail;
	if (pwrite(e->fd, hdr, MAP_OFF, 0) != MAP_OFF) {
		close(e->fd);
		goto fail;
	}
	free(hdr);
	e->fileid = fileid;
	e->tag = *tag;
	e->local = (tag->flags & MD_LOCAL) != 0;
	/* No write noted yet: a local file is timed by its backing file's mtime alone (local_dirty);
	 * 0 here meant "the boot" on this clock, so an mtime older than the boot waited for -U of
	 * uptime. (A WRITE sets last_io right after.) */
	e->last_io = -INFINITY;
	e->next = fl.head;
	fl.head = e;
	return e;
fail:
	if (e)
		free(e->path);
	free(e);
	free(hdr);
	return NULL;
}

int bflush_note_write(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path,
                      const struct wire_seg *seg, uint32_t nseg)
{
	if (!d->bk || !(tag->flags & MD_FLUSH) || !*path)
		return 0;
	int rc = 0;
	uint8_t one = 1;
	pthread_mutex_lock(&fl.lock);
	struct dirty *e = find(fileid);
	/* A new entry only: its name may have gone before this server joined (relink.c's lock is a
	 * leaf, taken inside this one) */
	if (!e && !(e = add(fileid, tag, brelink_unnamed(fileid) ? "" : path)))
		rc = -EIO;
	for (uint32_t s = 0; s < nseg && rc == 0 && e->local; s++)
		e->dirty_bytes += seg[s].len; /* (no map: the whole file is compared and copied) */
	for (uint32_t s = 0; s < nseg && rc == 0 && !e->local; s++) {
		uint64_t first = seg[s].off / tag->chunk_size,
		         last = (seg[s].off + seg[s].len - 1) / tag->chunk_size;
		for (uint64_t i = first; i <= last && rc == 0; i++)
			if (pwrite(e->fd, &one, 1, (off_t)(MAP_OFF + i)) != 1)
				rc = -errno;
		e->dirty_bytes += seg[s].len;
	}
	if (e) {
		e->gen++;
		e->last_io = now_s();
		e->clean = 0;
	}
	pthread_cond_broadcast(&fl.work);
	pthread_mutex_unlock(&fl.lock);
	if (rc)
		log_err("write-back map of %s (file %016llx): %s; this write may not reach the backend", path,
		        (unsigned long long)fileid, strerror(-rc));
	return rc;
}

int bflush_note_local(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, const char *path)
{
	if (!d->bk || (tag->flags & (MD_LOCAL | MD_FLUSH)) != (MD_LOCAL | MD_FLUSH) || !*path)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&fl.lock);
	if (!find(fileid) && !add(fileid, tag, brelink_unnamed(fileid) ? "" : path))
		rc = -EIO;
	pthread_cond_broadcast(&fl.work);
	pthread_mutex_unlock(&fl.lock);
	if (rc)
		log_err("write-back map of %s (file %016llx): %s; direct writes may not reach the backend",
		        path, (unsigned long long)fileid, strerror(-rc));
	return rc;
}

/* Flush e (busy, lock not held). Returns 0 or -errno. */
static int flush_one(struct dirty *e)
{
	struct chfsd *d = fl.d;
	uint64_t cs = e->tag.chunk_size;
	struct stat sb;
	int rc = 0, dfd = -1, bfd = -1;
	uint8_t *buf = malloc(COPY_PIECE);
	if (!buf || fstat(e->fd, &sb) < 0)
		rc = buf ? -errno : -ENOMEM;
	uint64_t nmap = rc == 0 && sb.st_size > MAP_OFF ? (uint64_t)sb.st_size - MAP_OFF : 0;
	uint64_t dsize = 0;
	if (rc == 0 && nmap) {
		dfd = st_data_open(d->st, e->fileid, 0);
		if (dfd >= 0 && fstat(dfd, &sb) == 0)
			dsize = (uint64_t)sb.st_size;
		else if (dfd != -ENOENT)
			rc = dfd < 0 ? dfd : -errno;
		if (rc == 0 && (bfd = backend_open_write(d->bk, e->path)) < 0)
			rc = bfd;
	}
	for (uint64_t i = 0; i < nmap && rc == 0; i++) {
		uint8_t b = 0, zero = 0, one = 1;
		pthread_mutex_lock(&fl.lock);
		if (pread(e->fd, &b, 1, (off_t)(MAP_OFF + i)) == 1 && b == 1 &&
		    pwrite(e->fd, &zero, 1, (off_t)(MAP_OFF + i)) != 1)
			rc = -errno;
		pthread_mutex_unlock(&fl.lock);
		if (rc || b != 1)
			continue;
		uint64_t start = i * cs, end = start + cs > dsize ? dsize : start + cs;
		/* A chunk that is all hole was handed to another server (punched) or cut: nothing
		 * of it is here to flush, and writing zeros would destroy the backend's copy. */
		off_t data = dfd >= 0 && start < end ? lseek(dfd, (off_t)start, SEEK_DATA) : -1;
		if (data >= 0 && (uint64_t)data < end)
			rc = ioe_copy_range(dfd, bfd, buf, COPY_PIECE, start, end, NULL);
		if (rc) {
			pthread_mutex_lock(&fl.lock);
			pwrite(e->fd, &one, 1, (off_t)(MAP_OFF + i)); /* still dirty */
			pthread_mutex_unlock(&fl.lock);
		}
	}
	return ioe_copy_end(dfd, bfd, buf, rc);
}

/* Flush e (lock held, e not busy); the lock is released meanwhile. 1 if e was forgotten. */
static int flush_entry(struct dirty *e)
{
	uint64_t gen = e->gen, fsize = 0;
	int64_t fmtime = 0;
	int clean = 0;
	if (unnamed(e))
		return 0; /* no name to flush to (kept until DATA_REMOVE) */
	e->busy = 1;
	pthread_mutex_unlock(&fl.lock);
	int rc = e->local ? bflocal_copy(fl.d, e->fileid, e->path, &fsize, &fmtime, &clean, &e->fset)
	                  : flush_one(e);
	pthread_mutex_lock(&fl.lock);
	e->busy = 0;
	pthread_cond_broadcast(&fl.done);
	if (rc) {
		if (e->err != -rc)
			log_err("flush of %s to the backend failed: %s (the data stays in CHFS; retried)",
			        e->path, strerror(-rc));
		e->err = -rc;
		e->failed_at = now_s();
		return 0;
	}
	if (e->err)
		log_notice("flush of %s to the backend succeeded after an error", e->path);
	e->err = 0;
	if (e->local) { /* kept: its clients may write the backing file again at any time */
		e->fsize = fsize;
		e->fmtime = fmtime;
		e->clean = clean && e->gen == gen;
		e->dirty_bytes = 0;
		return 0;
	}
	if (e->gen == gen) { /* nothing written meanwhile: every chunk is on the backend */
		drop(e);
		return 1;
	}
	return 0;
}

static void *flusher(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&fl.lock);
	while (!fl.stopping) {
		if (fl.held) {
			pthread_cond_wait(&fl.work, &fl.lock);
			continue;
		}
		double now = now_s(), next = now + 1.0;
		struct dirty *pick = NULL;
		for (struct dirty *e = fl.head; e && !pick; e = e->next) {
			/* Monotonic seconds start near 0 at boot, so 0 is not "long ago": a map loaded
			 * at start-up (last_io far in the past) waited until the machine had been up
			 * for -U seconds when 0 stood for "no local write" here. */
			double hot = -INFINITY;
			if (e->busy || unnamed(e) || (e->local && !local_dirty(e, &hot, NULL)))
				continue;
			double due = (hot > e->last_io ? hot : e->last_io) + (fl.delay > 0 ? fl.delay : 0);
			if (e->err && e->failed_at + RETRY_S > due)
				due = e->failed_at + RETRY_S;
			if (due <= now)
				pick = e;
			else if (due < next)
				next = due;
		}
		if (pick && !brelink_fresh()) { /* resumed after a stop: names it missed first */
			pthread_mutex_unlock(&fl.lock);
			brelink_await();
			pthread_mutex_lock(&fl.lock);
			continue;
		}
		if (pick) {
			flush_entry(pick);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		double wait = next - now;
		ts.tv_sec += (time_t)wait;
		ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fl.work, &fl.lock, &ts);
	}
	pthread_mutex_unlock(&fl.lock);
	return NULL;
}

/* Flush every file once (delay ignored), waiting for busy ones (lock held). */
static void flush_all(void)
{
	while (fl.held && !fl.stopping)
		pthread_cond_wait(&fl.work, &fl.lock);
	unsigned round = ++fl.round;
	for (;;) {
		struct dirty *e = fl.head;
		while (e && e->round == round)
			e = e->next;
		if (!e)
			return;
		if (e->busy) {
			pthread_cond_wait(&fl.done, &fl.lock);
			continue;
		}
		if (!brelink_fresh()) { /* resumed after a stop: names it missed first */
			pthread_mutex_unlock(&fl.lock);
			brelink_await();
			pthread_mutex_lock(&fl.lock);
			continue;
		}
		e->round = round;
		if (!e->local || local_dirty(e, NULL, NULL))
			flush_entry(e);
	}
}

/* The failed files' "path: error" lines into a reply (fl.lock held); their number. */
static uint32_t put_errors(struct wenc *e, size_t budget)
{
	uint32_t n = 0;
	size_t cap = CHFS_PATH_MAX + 64;
	char *line = malloc(cap);
	for (struct dirty *x = fl.head; line && x; x = x->next) {
		if (!x->err)
			continue;
		snprintf(line, cap, "%s: %s", x->path, strerror(x->err));
		if (e->len + strlen(line) + 8 > budget)
			break;
		wenc_str(e, line);
		n++;
	}
	free(line);
	return n;
}

/* u32 n reserved in e, then the lines of the failed files and changes; with flush, first the
 * data of everything dirty (unless phase is BFLUSH_META), then the pending changes of names and
 * attributes, after the data (unless phase is BFLUSH_DATA; flush_meta.c). */
static int reply_errors(struct chfsd *d, struct wenc *e, size_t budget, int flush, int phase)
{
	uint8_t *np = wenc_reserve(e, 4);
	if (!np)
		return -EMSGSIZE;
	put32(np, 0);
	if (!d->bk)
		return 0;
	if (flush)
		brelink_deliver(d, NULL, NULL); /* backend names a member missed (relink_owed.c) */
	pthread_mutex_lock(&fl.lock);
	if (flush && phase != BFLUSH_META)
		flush_all();
	uint32_t n = put_errors(e, budget);
	pthread_mutex_unlock(&fl.lock);
	if (flush && phase != BFLUSH_DATA)
		bmeta_apply(d);
	bmeta_report(e, budget, &n);
	put32(np, n);
	return 0;
}

int bflush_wait(struct chfsd *d, struct wenc *e, size_t budget, int phase)
{
	return reply_errors(d, e, budget, 1, phase);
}

int bflush_errors(struct chfsd *d, struct wenc *e, size_t budget)
{
	return reply_errors(d, e, budget, 0, BFLUSH_ALL);
}

void bflush_file_now(struct chfsd *d, uint64_t fileid)
{
	if (!d->bk)
		return;
	brelink_await();
	pthread_mutex_lock(&fl.lock);
	struct dirty *e = find_idle(fileid);
	if (e)
		flush_entry(e);
	pthread_mutex_unlock(&fl.lock);
}

void bflush_relink(struct chfsd *d, uint64_t fileid, const char *path)
{
	size_t n = strlen(path);
	char *p = d->bk && n < MAP_OFF - 24 ? strdup(path) : NULL;
	uint8_t *hdr = p ? calloc(1, 8 + n) : NULL; /* the header from its path length on */
	if (hdr) {
		put32(hdr, (uint32_t)n);
		memcpy(hdr + 8, path, n);
	}
	pthread_mutex_lock(&fl.lock);
	struct dirty *e = find_idle(fileid);
	if (e && hdr && !unnamed(e) && strcmp(e->path, p) != 0) { /* (no name comes back) */
		if (pwrite(e->fd, hdr, 8 + n, 16) != (ssize_t)(8 + n))
			log_err("write-back map of %s: %s; after a restart it may be flushed under its old name",
			        path, strerror(errno));
		free(e->path);
		e->path = p;
		p = NULL;
	}
	pthread_mutex_unlock(&fl.lock);
	free(hdr);
	free(p);
}

void bflush_unnamed(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag)
{
	if (!d->bk || !(tag->flags & MD_FLUSH))
		return;
	uint8_t len0[4] = {0};
	int rc = 0;
	pthread_mutex_lock(&fl.lock);
	struct dirty *e = find_idle(fileid);
	if (!e && !add(fileid, tag, "")) /* a write through a descriptor may still come */
		rc = -EIO;
	else if (e && !unnamed(e)) {
		if (pwrite(e->fd, len0, sizeof len0, 16) != (ssize_t)sizeof len0)
			rc = errno ? -errno : -EIO;
		e->path[0] = '\0';
	}
	pthread_mutex_unlock(&fl.lock);
	if (rc)
		log_err("write-back map of file %016llx: %s; after a restart its data may be flushed under "
		        "the name it lost",
		        (unsigned long long)fileid, strerror(-rc));
	/* In the relink table too: a server that joins is owed the table (relink_join.c), and
	 * writes through the descriptors to the chunks it takes carry the old name. */
	if ((rc = brelink_note(d, fileid, "")) != 0)
		log_err("backend names of file %016llx: %s; a server that joins may flush it under the "
		        "name it lost",
		        (unsigned long long)fileid, strerror(-rc));
}

void bflush_forget(struct chfsd *d, uint64_t fileid)
{
	if (!d->bk)
		return;
	pthread_mutex_lock(&fl.lock);
	struct dirty *e = find_idle(fileid);
	if (e)
		drop(e);
	pthread_mutex_unlock(&fl.lock);
}

void bflush_status(struct chfsd *d, char *buf, size_t size)
{
	unsigned long long files = 0, bytes = 0, failed = 0;
	if (d->bk) {
		pthread_mutex_lock(&fl.lock);
		for (struct dirty *e = fl.head; e; e = e->next) {
			uint64_t size = 0;
			if (unnamed(e) || (e->local && !local_dirty(e, NULL, &size)))
				continue;
			files++;
			bytes += e->local && size > e->dirty_bytes ? size : e->dirty_bytes;
			failed += e->err != 0;
		}
		pthread_mutex_unlock(&fl.lock);
		failed += bmeta_failed(); /* changes of names and attributes (flush_meta.c) */
	}
	size_t n = strlen(buf);
	if (n < size)
		snprintf(buf + n, size - n, " dirty_files=%llu dirty_bytes=%llu flush_failed=%llu", files,
		         bytes, failed);
}

/* A map left by a previous run: an entry due at once. */
static void load_one(const char *name)
{
	uint8_t hdr[24];
	char *path = malloc(MAP_OFF);
	int fd = openat(fl.dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct dirty *e = calloc(1, sizeof *e);
	uint32_t n = 0;
	if (fd < 0 || !path || !e || pread(fd, hdr, 24, 0) != 24 || get32(hdr) != MAP_MAGIC ||
	    (n = get32(hdr + 16)) >= MAP_OFF - 24 || pread(fd, path, n, 24) != (ssize_t)n ||
	    !get32(hdr + 8)) {
		log_warn("write-back map %s/bdirty/%s unreadable: ignored", st_root(fl.d->st), name);
		if (fd >= 0)
			close(fd);
		free(path);
		free(e);
		return;
	}
	path[n] = '\0';
	e->fileid = strtoull(name, NULL, 16);
	e->tag = (struct wire_tag){
	        .pkey = get32(hdr + 4), .chunk_size = get32(hdr + 8), .flags = get32(hdr + 12)};
	e->path = path;
	e->fd = fd;
	e->local = (e->tag.flags & MD_LOCAL) != 0;
	e->last_io = -INFINITY; /* due at once, whatever -U and the machine's uptime */
	e->next = fl.head;
	fl.head = e;
	if (n)
		log_notice("write-back: %s still to flush from before the restart", path);
}

void bflush_release(struct chfsd *d)
{
	if (!d->bk || fl.dirfd < 0)
		return;
	brelink_pull(d);                /* renames that reached the backend while this server was down */
	if (brelink_watch_start(d) < 0) /* (and after a stop: relink_gap.c) */
		log_warn("backend names: no watch for stops of this server; after a SIGSTOP it learns "
		         "the renames it missed at the next sync only");
	pthread_mutex_lock(&fl.lock);
	fl.held = 0;
	pthread_cond_broadcast(&fl.work);
	pthread_mutex_unlock(&fl.lock);
}

int bflush_init(struct chfsd *d, int nthreads, double delay_s)
{
	fl.d = d;
	fl.delay = delay_s;
	fl.held = 1;
	int root = st_rootfd(d->st);
	if (mkdirat(root, "bdirty", 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((fl.dirfd = openat(root, "bdirty", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	int dup = openat(fl.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = dup >= 0 ? fdopendir(dup) : NULL;
	struct dirent *de;
	while (dp && (de = readdir(dp)) != NULL)
		if (strlen(de->d_name) == 16 && strspn(de->d_name, "0123456789abcdef") == 16)
			load_one(de->d_name);
	if (dp)
		closedir(dp);
	int rc = brelink_init(d, fl.dirfd); /* backend names after renames (relink.c) */
	if (rc == 0)
		rc = bmeta_init(d, fl.dirfd, nthreads > 0); /* names and attributes (flush_meta.c) */
	if (rc)
		return rc;
	if (nthreads > 0 && !(fl.threads = calloc((size_t)nthreads, sizeof *fl.threads)))
		return -ENOMEM;
	for (int i = 0; i < nthreads; i++) {
		if (pthread_create(&fl.threads[i], NULL, flusher, NULL) != 0)
			return -EAGAIN;
		fl.nthreads++;
	}
	return 0;
}

void bflush_stop(struct chfsd *d)
{
	if (!d->bk || fl.dirfd < 0)
		return;
	brelink_watch_stop(); /* (it asks for missed names first if a stop just ended) */
	pthread_mutex_lock(&fl.lock);
	fl.stopping = 1;
	pthread_cond_broadcast(&fl.work);
	unsigned failed = 0;
	flush_all();
	for (struct dirty *e = fl.head; e; e = e->next)
		failed += e->err != 0;
	pthread_mutex_unlock(&fl.lock);
	bmeta_stop();
	bmeta_apply(d); /* names and attributes after the data (flush_meta.c) */
	failed += bmeta_failed();
	for (int i = 0; i < fl.nthreads; i++)
		pthread_join(fl.threads[i], NULL);
	if (failed)
		log_err("shutdown: %u file(s) or change(s) could not be flushed to the backend; they stay dirty in %s and "
		        "are flushed when the server runs again",
		        failed, st_root(d->st));
	else
		log_notice("shutdown: every written chunk is on the backend");
}
