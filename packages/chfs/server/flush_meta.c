/*
 * flush_meta.c — names and attributes to the backend (chfsd -b): what flush.c does for data,
 * for unlink, rename, mkdir, rmdir, symlink, truncation and mode/time changes.
 *
 * The handler that changes an entry this server owns records the change here before it
 * answers: appended to STORAGE/bdirty/meta.log (one record: length, done byte, op, two paths)
 * and queued in memory in the order of the changes. A server killed with changes pending finds
 * the records not marked done at start-up and queues them again.
 *
 * The changes are applied to the backend in that order by bmeta_apply: at chfs_sync after every
 * server flushed its data (the client sends WOP_FLUSH phase "data" to every server, then phase
 * "meta"; see lib/sync.c) and at shutdown after the data. Applying after the data is what makes
 * a rename right: data chunks are flushed to the name the file had when they were written
 * (md.link), and the rename then moves that file to its new name. Attribute records (a new
 * file, a chmod, a utimens, a rename's new name, a write: its client's size report moved the
 * mtime, which the data flush's copy does not carry) copy the entry's current mode and times from
 * CHFS, so whichever order the records of one path from several servers are applied in, the
 * last one leaves what CHFS shows. Once a rename is on the backend, the entry's md.link (where
 * its data go and come from) becomes the new name.
 *
 * Tombstones: while an unlink, an rmdir or a rename away from a path is pending, that path is
 * hidden from read-through (bmeta_hidden), so an unlinked backend file is not looked up and
 * listed again before its removal reaches the backend. A create at a hidden path first applies
 * what is pending for it (bmeta_settle), so the older removal never hits the newer file.
 *
 * A change the backend refuses (EACCES, ENOTEMPTY, ...) stays queued with its error: counted in
 * flush_failed, its path named in chfs_sync's reply, retried at the next sync. Later changes of
 * the same path wait behind it; other paths go on. Once nothing is pending the log is emptied.
 */
#define _GNU_SOURCE
#include "flush_meta.h"

#include "backend.h"
#include "chfsd.h"
#include "log.h"
#include "relink.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC_HDR 16 /* u32 length, u8 done, u8 op, u16 0, u32 len(path), u32 len(path2) */

struct mop {
	off_t off; /* of the record in the log */
	int op, err;
	int busy; /* being applied (its entry may have been read already) */
	char *path, *path2;
	struct mop *next;
};

static struct {
	pthread_mutex_t lock;
	struct mop *head, **tail;
	struct chfsd *d;
	int fd;
	off_t end;
	size_t n, nhide; /* records queued, of which hide a path */
	unsigned ready;  /* records the background thread may apply, noted since its last pass */
	pthread_cond_t wake;
	pthread_t thread;
	int running, stopping;
	/* lock guards the list, the counters, m->err and the log; it is never held while calling
	 * out (readdir asks bmeta_hidden under the namespace lock). alock makes one applier at a
	 * time: only its holder removes records, so it walks the list taking lock per step. */
	pthread_mutex_t alock;
} mq = {.wake = PTHREAD_COND_INITIALIZER,
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .alock = PTHREAD_MUTEX_INITIALIZER,
        .tail = &mq.head,
        .fd = -1};

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Renames (both halves: the old name stays hidden until then), file attributes and rmdirs go
 * after the data: at chfs_sync's meta phase and at shutdown. An rmdir too, since the directory
 * may be a renamed one's old name: the data flush puts a file's unflushed data under its old
 * name (md.link) first, and only its rename, recorded by another server, empties it again. */
static int after_data(int op)
{
	return op == BM_RENAME || op == BM_HIDE || op == BM_FATTR || op == BM_TRUNC || op == BM_CHOWN ||
	       op == BM_RMDIR;
}

/* Does op make an entry at its path (so the missing parent directories are made first)? Not a
 * removal, not the old name of a rename: making its parent would bring back a directory removed
 * (or renamed away) meanwhile. */
static int makes_entry(int op)
{
	return op != BM_UNLINK && op != BM_RMDIR && op != BM_RENAME && op != BM_HIDE;
}

/* A record of an entry that left CHFS since: a later record says where it went. Attribute
 * records, and the directories and symlinks a record makes: applied late (a sync's records
 * of several servers go concurrently), a mkdir or symlink at a name a rename moved away made
 * that name again on DIR, with the missing directories above it, after the server owning the
 * directory above had removed it (a tree renamed twice before a sync left an empty directory
 * under its first new name, whose parent's rmdir then failed at every sync). */
static int gone_from_chfs(struct chfsd *d, const struct mop *m)
{
	int attr = m->op == BM_ATTR || m->op == BM_FATTR || m->op == BM_TRUNC || m->op == BM_CHOWN;
	if (!attr && m->op != BM_MKDIR && m->op != BM_SYMLINK)
		return 0;
	struct chfs_md *md = malloc(sizeof *md);
	int rc = md ? st_lookup(d->st, m->path, md) : -ENOMEM, gone = rc == -ENOENT;
	if (rc == 0 && m->op == BM_MKDIR)
		gone = !S_ISDIR(md->mode);
	if (rc == 0 && m->op == BM_SYMLINK)
		gone = !S_ISLNK(md->mode);
	free(md);
	return gone;
}

static int hides_any(const struct mop *m)
{
	return m->op == BM_UNLINK || m->op == BM_RMDIR || m->op == BM_RENAME || m->op == BM_HIDE;
}

static struct mop *queue(int op, const char *path, const char *path2, off_t off)
{
	struct mop *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(path)) || !(m->path2 = strdup(path2 ? path2 : ""))) {
		if (m)
			free(m->path);
		free(m);
		return NULL;
	}
	m->op = op;
	m->off = off;
	*mq.tail = m;
	mq.tail = &m->next;
	mq.n++;
	mq.nhide += hides_any(m);
	if (!after_data(op))
		mq.ready++;
	return m;
}

void bmeta_note(struct chfsd *d, int op, const char *path, const char *path2)
{
	if (!d->bk || mq.fd < 0)
		return;
	size_t n1 = strlen(path), n2 = path2 ? strlen(path2) : 0, len = REC_HDR + n1 + n2;
	uint8_t *rec = calloc(1, len);
	int rc = -ENOMEM;
	pthread_mutex_lock(&mq.lock);
	if (rec) {
		put32(rec, (uint32_t)len);
		rec[5] = (uint8_t)op;
		put32(rec + 8, (uint32_t)n1);
		put32(rec + 12, (uint32_t)n2);
		memcpy(rec + REC_HDR, path, n1);
		if (n2)
			memcpy(rec + REC_HDR + n1, path2, n2);
		ssize_t w = pwrite(mq.fd, rec, len, mq.end);
		rc = w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
	}
	if (rc == 0 && !queue(op, path, path2, mq.end))
		rc = -ENOMEM;
	if (rc == 0)
		mq.end += (off_t)len;
	if (rc == 0 && mq.ready)
		pthread_cond_signal(&mq.wake);
	pthread_mutex_unlock(&mq.lock);
	free(rec);
	if (rc)
		log_err("backend change log (%s of %s): %s; this change may not reach the backend",
		        bmeta_op_name(op), path, strerror(-rc));
}

void bmeta_note_written(struct chfsd *d, const char *path)
{
	if (!d->bk || mq.fd < 0)
		return;
	/* The last record queued already copies path's attributes (its create, a utimens, the
	 * previous write report) and is not being applied: it will read the new mtime too. */
	pthread_mutex_lock(&mq.lock);
	const struct mop *last =
	        mq.tail == &mq.head
	                ? NULL
	                : (const struct mop *)((const char *)mq.tail - offsetof(struct mop, next));
	int covered = last && !last->busy && (last->op == BM_FATTR || last->op == BM_TRUNC) &&
	              strcmp(last->path, path) == 0;
	pthread_mutex_unlock(&mq.lock);
	if (!covered)
		bmeta_note(d, BM_FATTR, path, NULL);
}

void bmeta_note_create(struct chfsd *d, const char *path, const struct chfs_md *md)
{
	if (S_ISLNK(md->mode))
		bmeta_note(d, BM_SYMLINK, path, NULL);
	else if (S_ISREG(md->mode))
		bmeta_note(d, BM_FATTR, path, NULL); /* an empty file and its mode reach the backend too */
}

void bmeta_note_rename(struct chfsd *d, const char *from, const char *to, const struct chfs_md *md)
{
	if (S_ISREG(md->mode) && (md->flags & MD_PATHED)) {
		/* the data went (and go) to md.link: that backend file is the one to move */
		if (to)
			bmeta_note(d, BM_RENAME, md->link, to);
		if (from && (!to || strcmp(from, md->link)))
			bmeta_note(d, BM_HIDE, from, NULL);
	} else if (S_ISLNK(md->mode) || S_ISDIR(md->mode)) {
		if (from)
			bmeta_note(d, S_ISLNK(md->mode) ? BM_UNLINK : BM_RMDIR, from, NULL);
		if (to)
			bmeta_note(d, S_ISLNK(md->mode) ? BM_SYMLINK : BM_MKDIR, to, NULL);
	}
}

const char *bmeta_op_name(int op)
{
	static const char *const names[] = {"?",          "unlink",   "rename",     "mkdir",
	                                    "rmdir",      "symlink",  "attributes", "rename",
	                                    "attributes", "truncate", "chown"};
	return op > 0 && op <= BM_MAX ? names[op] : "?";
}

/* 1 if m removes or moves away the backend entry at path. */
static int hides(const struct mop *m, const char *path) { return hides_any(m) && strcmp(m->path, path) == 0; }

int bmeta_hidden(struct chfsd *d, const char *path)
{
	int hidden = 0;
	if (!d->bk)
		return 0;
	pthread_mutex_lock(&mq.lock);
	for (struct mop *m = mq.nhide ? mq.head : NULL; m && !hidden; m = m->next)
		hidden = hides(m, path);
	pthread_mutex_unlock(&mq.lock);
	return hidden;
}

/* 1 if a BM_CHOWN record of path is queued. */
static int chown_queued(const char *path)
{
	int found = 0;
	pthread_mutex_lock(&mq.lock);
	for (struct mop *m = mq.head; m && !found; m = m->next)
		found = m->op == BM_CHOWN && strcmp(m->path, path) == 0;
	pthread_mutex_unlock(&mq.lock);
	return found;
}

/* The entry's owner and group onto the backend entry, when they differ from its own (a chfsd
 * that is not root may give a file only to itself: EPERM otherwise). */
static int apply_owner(const struct chfs_md *md, int pfd, const char *leaf)
{
	struct stat sb;
	if (fstatat(pfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (sb.st_uid == md->uid && sb.st_gid == md->gid)
		return 0;
	return fchownat(pfd, leaf, md->uid, md->gid, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* A local-placement file's mtime as its stat shows it: the metadata's, unless its backing file
 * changed after the last change of the metadata (then the backing file's: handlers.c's merge
 * rule, so an explicit utimens sticks). Asked of its home (DATA_STAT) when that is another
 * server; the metadata's when the home cannot say. */
static int64_t local_mtime(struct chfsd *d, const struct chfs_md *md)
{
	uint64_t size;
	int64_t mtime = md->mtime_ns;
	if (strcmp(md->home, d->self) == 0) {
		int64_t b;
		if (st_data_stat(d->st, md->fileid, &size, &b) == 0 && b > md->mtime_ns && b > md->ctime_ns)
			mtime = b;
		return mtime;
	}
	uint8_t msg[WIRE_HDR_LEN + 32], rep[WIRE_HDR_LEN + 16];
	struct wenc e;
	struct wdec body;
	wenc_init(&e, msg, sizeof msg);
	chfsd_req_hdr(d, &e, WOP_DATA_STAT);
	wenc_u64(&e, md->fileid);
	wenc_u64(&e, md->size);
	wenc_i64(&e, md->mtime_ns);
	wenc_i64(&e, md->ctime_ns);
	if (chfsd_call(d, md->home, &e, rep, sizeof rep, &body, d->timeout_ms) == 0) {
		wdec_u64(&body);
		int64_t merged = wdec_i64(&body);
		if (!body.err)
			mtime = merged;
	}
	return mtime;
}

/* The entry's owner, mode and times onto backend path (it must exist for a directory or
 * symlink; a regular file is created if the flush never wrote it, e.g. an empty file), with cut
 * its size too. A local-placement file's size is its backing file's, which its data flush
 * copies (flush_local.c), and its mtime the one its stat shows (local_mtime). An owner the backend refuses does not hold back the rest: it
 * becomes a BM_CHOWN record of its own (queued, counted, retried); chown_only applies just
 * that record. */
static int apply_attr(struct chfsd *d, const char *path, int pfd, const char *leaf, int cut, int chown_only)
{
	struct chfs_md *md = malloc(sizeof *md);
	int rc = md ? st_lookup(d->st, path, md) : -ENOMEM;
	if (rc) {
		free(md);
		return rc == -ENOENT ? 0 : rc; /* gone from CHFS since: a later record says where */
	}
	int local = S_ISREG(md->mode) && (md->flags & MD_LOCAL);
	if (S_ISREG(md->mode) && !chown_only) {
		int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || (cut && !local && ftruncate(fd, (off_t)md->size) < 0))
			rc = -errno;
		if (fd >= 0)
			close(fd);
	}
	int orc = rc == 0 ? apply_owner(md, pfd, leaf) : 0; /* before the mode: it clears set-ID bits */
	int refused = orc == -EPERM || orc == -EINVAL;      /* not root; an id not mapped in its namespace */
	if (chown_only || (orc && !refused))
		rc = orc;
	if (rc == 0 && refused && !chown_queued(path))
		bmeta_note(d, BM_CHOWN, path, NULL);
	if (rc == 0 && !chown_only && !S_ISLNK(md->mode) &&
	    fchmodat(pfd, leaf, md->mode & 07777, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	/* A local file's times too: its data flush (flush_local.c) gives the backend the backing
	 * file's mtime, which an explicit utimens since then overrides. */
	int64_t mt = local && rc == 0 && !chown_only ? local_mtime(d, md) : md->mtime_ns;
	struct timespec ts[2] = {{.tv_sec = md->atime_ns / 1000000000, .tv_nsec = md->atime_ns % 1000000000},
	                         {.tv_sec = mt / 1000000000, .tv_nsec = mt % 1000000000}};
	if (rc == 0 && !chown_only && utimensat(pfd, leaf, ts, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	if (rc == -ENOENT && !S_ISREG(md->mode))
		rc = 0; /* a directory never made on the backend (implicit): nothing to set */
	free(md);
	return rc;
}

static int apply_symlink(struct chfsd *d, const char *path, int pfd, const char *leaf)
{
	struct chfs_md *md = malloc(sizeof *md);
	int rc = md ? st_lookup(d->st, path, md) : -ENOMEM;
	if (rc == 0 && S_ISLNK(md->mode)) {
		if (unlinkat(pfd, leaf, 0) < 0 && errno != ENOENT)
			rc = -errno;
		else if (symlinkat(md->link, pfd, leaf) < 0)
			rc = -errno;
	}
	free(md);
	return rc == -ENOENT ? 0 : rc;
}

/* 1 if a record after m removes m's new name (its entry was unlinked after the rename). */
static int unlinked_later(const struct mop *m)
{
	int found = 0;
	pthread_mutex_lock(&mq.lock);
	for (const struct mop *x = m->next; x && !found; x = x->next)
		found = x->op == BM_UNLINK && strcmp(x->path, m->path2) == 0;
	pthread_mutex_unlock(&mq.lock);
	return found;
}

/* Move the backend file m->path (the file's backend name when it was renamed) to m->path2,
 * unless the rename is superseded: the entry at path2 is no longer that file (renamed on
 * again: the server of the later name moves m->path there; replaced) — then this server's
 * records must not take the file. After the move the file's data go to the new name: CHFS's
 * entry (st_relink) and every server's dirty chunks and later requests (relink.c). */
static int apply_rename(struct chfsd *d, const struct mop *m, int pfd, const char *leaf)
{
	const char *leaf2;
	struct chfs_md *md = malloc(sizeof *md);
	if (!md)
		return -ENOMEM;
	int current = st_lookup(d->st, m->path2, md) == 0 && S_ISREG(md->mode) && (md->flags & MD_PATHED) &&
	              strcmp(md->link, m->path) == 0;
	if (!current && !unlinked_later(m)) {
		free(md);
		return 0;
	}
	int pfd2 = backend_parent(d->bk, m->path2, 1, &leaf2);
	int rc = pfd2 < 0  ? pfd2
	         : pfd < 0 ? 0 /* the old name's directory is not there: nothing to move */
	         : renameat(pfd, leaf, pfd2, leaf2) < 0 && errno != ENOENT ? -errno
	                                                                   : 0;
	if (rc == 0)
		rc = apply_attr(d, m->path2, pfd2, leaf2, 0, 0);
	if (rc == 0 && current) { /* later opens write to (and read through from) the new name */
		st_relink(d->st, m->path2, m->path, m->path2);
		brelink_announce(d, md->fileid, m->path2);
	}
	if (pfd2 >= 0)
		close(pfd2);
	free(md);
	return rc;
}

static int apply_one(struct chfsd *d, const struct mop *m)
{
	const char *leaf = NULL;
	if (m->op == BM_HIDE || gone_from_chfs(d, m))
		return 0; /* nothing to do on the backend */
	int pfd = backend_parent(d->bk, m->path, makes_entry(m->op), &leaf);
	int rc = pfd < 0 ? pfd : 0;
	if (rc == -ENOENT && m->op == BM_RENAME)
		return apply_rename(d, m, -1, leaf); /* the new name still gets its attributes */
	if (rc == -ENOENT && (m->op == BM_UNLINK || m->op == BM_RMDIR))
		return 0;
	if (rc)
		return rc;
	switch (m->op) {
	case BM_UNLINK: rc = unlinkat(pfd, leaf, 0) < 0 && errno != ENOENT ? -errno : 0; break;
	case BM_RMDIR: rc = unlinkat(pfd, leaf, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0; break;
	case BM_MKDIR:
		rc = mkdirat(pfd, leaf, 0700) < 0 && errno != EEXIST ? -errno : 0;
		if (rc == 0)
			rc = apply_attr(d, m->path, pfd, leaf, 0, 0);
		break;
	case BM_SYMLINK: rc = apply_symlink(d, m->path, pfd, leaf); break;
	case BM_ATTR:
	case BM_FATTR:
	case BM_TRUNC: rc = apply_attr(d, m->path, pfd, leaf, m->op == BM_TRUNC, 0); break;
	case BM_CHOWN: rc = apply_attr(d, m->path, pfd, leaf, 0, 1); break;
	case BM_RENAME: rc = apply_rename(d, m, pfd, leaf); break;
	default: rc = -EINVAL;
	}
	close(pfd);
	return rc;
}

/* The paths of records left in the queue during one pass (hashes, open addressing): a later
 * record touching one of them waits, so the changes of each path stay in order. */
struct held {
	uint64_t *h;
	size_t mask, used;
};

static uint64_t phash(const char *p)
{
	uint64_t h = 1469598103934665603ull;
	while (*p)
		h = (h ^ (uint8_t)*p++) * 1099511628211ull;
	return h ? h : 1;
}

static void held_add(struct held *s, const char *p)
{
	uint64_t h = phash(p);
	size_t i = h & s->mask;
	while (s->h[i] && s->h[i] != h)
		i = (i + 1) & s->mask;
	s->used += !s->h[i];
	s->h[i] = h;
}

static int held_has(const struct held *s, const char *p)
{
	uint64_t h = phash(p);
	for (size_t i = h & s->mask; s->h[i]; i = (i + 1) & s->mask)
		if (s->h[i] == h)
			return 1;
	return 0;
}

static int touches(const struct mop *m, const char *p) { return !strcmp(m->path, p) || !strcmp(m->path2, p); }

/* Apply the pending records in order (those touching `only`, if given; in the background, not
 * renames and file attributes: they wait for chfs_sync's meta phase, after the data); a record
 * left in the queue holds back the later ones of its paths. alock held, lock not. */
static void apply(struct chfsd *d, const char *only, int background)
{
	struct mop **pp = &mq.head, *m;
	struct held held = {0};
	size_t cap = 16;
	pthread_mutex_lock(&mq.lock);
	while (cap < 4 * mq.n)
		cap *= 2;
	pthread_mutex_unlock(&mq.lock);
	if (!(held.h = calloc(cap, sizeof *held.h)))
		return; /* retried at the next pass */
	held.mask = cap - 1;
	uint8_t one = 1;
	for (;;) {
		pthread_mutex_lock(&mq.lock);
		m = *pp;
		int skip = m && ((only && !touches(m, only)) || (background && after_data(m->op)) ||
		                 held_has(&held, m->path) || (*m->path2 && held_has(&held, m->path2)));
		if (m && !skip)
			m->busy = 1; /* a write reported from now on notes a record of its own */
		pthread_mutex_unlock(&mq.lock);
		if (!m)
			break;
		int rc = skip ? 1 : apply_one(d, m);
		if (rc < 0 && m->err != -rc)
			log_err("%s of %s on the backend failed: %s (kept; retried at the next sync)",
			        bmeta_op_name(m->op), m->path, strerror(-rc));
		pthread_mutex_lock(&mq.lock);
		m->busy = 0;
		if (rc < 0)
			m->err = -rc;
		if (rc && m->op == BM_CHOWN) { /* a refused owner holds nothing else back */
			pthread_mutex_unlock(&mq.lock);
			pp = &m->next;
			continue;
		}
		if (rc) {
			pthread_mutex_unlock(&mq.lock);
			if (held.used + 2 > cap / 2)
				break; /* records came in meanwhile: the rest at the next pass */
			held_add(&held, m->path);
			if (*m->path2)
				held_add(&held, m->path2);
			pp = &m->next;
			continue;
		}
		pwrite(mq.fd, &one, 1, m->off + 4); /* done */
		*pp = m->next;
		if (mq.tail == &m->next)
			mq.tail = pp;
		mq.n--;
		mq.nhide -= hides_any(m);
		pthread_mutex_unlock(&mq.lock);
		free(m->path);
		free(m->path2);
		free(m);
	}
	free(held.h);
	pthread_mutex_lock(&mq.lock);
	if (!mq.head && mq.end) {
		ftruncate(mq.fd, 0);
		mq.end = 0;
	}
	pthread_mutex_unlock(&mq.lock);
}

void bmeta_settle_here(struct chfsd *d, const char *path)
{
	if (!d->bk || mq.fd < 0)
		return;
	pthread_mutex_lock(&mq.alock);
	if (bmeta_hidden(d, path))
		apply(d, path, 0);
	pthread_mutex_unlock(&mq.alock);
}

/* 1 if a BM_HIDE of path is queued: path was renamed to a name another server owns, whose
 * BM_RENAME record (moving backend path away) is there. */
static int renamed_away(const char *path)
{
	int found = 0;
	pthread_mutex_lock(&mq.lock);
	for (struct mop *m = mq.nhide ? mq.head : NULL; m && !found; m = m->next)
		found = m->op == BM_HIDE && strcmp(m->path, path) == 0;
	pthread_mutex_unlock(&mq.lock);
	return found;
}

void bmeta_settle(struct chfsd *d, const char *path)
{
	if (!d->bk || mq.fd < 0)
		return;
	/* The other servers first, outside alock: one settling towards us at the same time then
	 * cannot wait for our alock while we wait for its reply. */
	if (renamed_away(path))
		bmeta_settle_peers(d, path);
	bmeta_settle_here(d, path);
}

void bmeta_apply(struct chfsd *d)
{
	if (!d->bk || mq.fd < 0)
		return;
	pthread_mutex_lock(&mq.alock);
	apply(d, NULL, 0);
	pthread_mutex_unlock(&mq.alock);
}

int bmeta_report(struct wenc *e, size_t budget, uint32_t *n)
{
	size_t cap = CHFS_PATH_MAX + 64;
	char *line = malloc(cap);
	if (!line)
		return -ENOMEM;
	pthread_mutex_lock(&mq.lock);
	for (struct mop *m = mq.head; m; m = m->next) {
		if (!m->err)
			continue;
		snprintf(line, cap, "%s (%s): %s", m->path, bmeta_op_name(m->op), strerror(m->err));
		if (e->len + strlen(line) + 8 > budget)
			break;
		wenc_str(e, line);
		(*n)++;
	}
	pthread_mutex_unlock(&mq.lock);
	free(line);
	return 0;
}

unsigned bmeta_failed(void)
{
	unsigned n = 0;
	pthread_mutex_lock(&mq.lock);
	for (struct mop *m = mq.head; m; m = m->next)
		n += m->err != 0;
	pthread_mutex_unlock(&mq.lock);
	return n;
}

/* Queue the records of a previous run not marked done. */
static void load(void)
{
	struct stat sb;
	uint8_t *buf = NULL;
	if (fstat(mq.fd, &sb) < 0 || sb.st_size == 0 || !(buf = malloc((size_t)sb.st_size)) ||
	    pread(mq.fd, buf, (size_t)sb.st_size, 0) != sb.st_size) {
		free(buf);
		return;
	}
	off_t off = 0;
	unsigned pending = 0;
	char *p1 = malloc(CHFS_PATH_MAX), *p2 = malloc(CHFS_PATH_MAX);
	while (p1 && p2 && off + REC_HDR <= sb.st_size) {
		const uint8_t *r = buf + off;
		uint32_t len = get32(r), n1 = get32(r + 8), n2 = get32(r + 12);
		if (n1 >= CHFS_PATH_MAX || n2 >= CHFS_PATH_MAX || len != REC_HDR + n1 + n2 ||
		    off + len > sb.st_size || r[5] < 1 || r[5] > BM_MAX)
			break; /* a record cut by the crash: it was never answered */
		memcpy(p1, r + REC_HDR, n1);
		p1[n1] = '\0';
		memcpy(p2, r + REC_HDR + n1, n2);
		p2[n2] = '\0';
		if (!r[4] && queue(r[5], p1, p2, off))
			pending++;
		off += len;
	}
	mq.end = off;
	if (pending)
		log_notice(
		        "backend: %u change(s) of names or attributes still to apply from before the restart",
		        pending);
	free(p1);
	free(p2);
	free(buf);
}

/* The background pass: whatever can go before the data, within a second of being noted. */
static void *applier(void *arg)
{
	struct chfsd *d = arg;
	pthread_mutex_lock(&mq.lock);
	while (!mq.stopping) {
		if (!mq.ready) {
			pthread_cond_wait(&mq.wake, &mq.lock);
			continue;
		}
		mq.ready = 0;
		pthread_mutex_unlock(&mq.lock);
		pthread_mutex_lock(&mq.alock);
		apply(d, NULL, 1);
		pthread_mutex_unlock(&mq.alock);
		pthread_mutex_lock(&mq.lock);
	}
	pthread_mutex_unlock(&mq.lock);
	return NULL;
}

int bmeta_init(struct chfsd *d, int bdirty_fd, int background)
{
	mq.d = d;
	mq.fd = openat(bdirty_fd, "meta.log", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (mq.fd < 0)
		return -errno;
	load();
	if (background && pthread_create(&mq.thread, NULL, applier, d) != 0)
		return -EAGAIN;
	mq.running = background;
	return 0;
}

void bmeta_stop(void)
{
	if (!mq.running)
		return;
	pthread_mutex_lock(&mq.lock);
	mq.stopping = 1;
	pthread_cond_signal(&mq.wake);
	pthread_mutex_unlock(&mq.lock);
	pthread_join(mq.thread, NULL);
	mq.running = 0;
}
