/*
 * ns_store.c — the namespace records of one server (ns_store.h), composed of three modules:
 *
 *   ns_index.c    every entry in memory: hash table by path, children in name order
 *   ns_journal.c  durability: snapshot + append-only journal, replayed at open, compacted
 *   ns_import.c   one-time import of the old one-file-per-entry tree (DIR/ns/)
 *
 * A change is journalled first (one pwrite of one frame), then applied to the index, then
 * acknowledged, all under the write side of one reader-writer lock; lookups, readdir and
 * ns_dir_has_entries take the read side. One lock replaces the old per-path locks: every
 * operation is a few hash look-ups and at most one write(), so writers hold it for
 * microseconds, and the lock prefers writers so a stream of stats cannot starve creates. The
 * journal is compacted inside the write lock when it has grown past its threshold
 * (ns_journal.c), so a mutation occasionally waits for a snapshot to be written.
 *
 * Records are held as their encoded bytes (record_codec.c) — the same bytes the journal
 * carries — and decoded on every read, which keeps an entry at its real size rather than a
 * struct chfs_md with its 4 KiB link buffer. Confinement is by construction: no client path
 * is ever resolved in the file system.
 */
#define _GNU_SOURCE
#include "ns_store.h"

#include "data_store.h"
#include "log.h"
#include "ns_import.h"
#include "ns_index.h"
#include "ns_journal.h"
#include "record_codec.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct ptouch {
	char path[CHFS_PATH_MAX];
	uint8_t rec[RECORD_MAX_LEN];
	size_t len;
	uint32_t mode;
	int set;
};

struct ns_store {
	pthread_rwlock_t lock;
	struct ns_index *idx;
	struct nsj *j;
	uint8_t rec[RECORD_MAX_LEN]; /* encoding buffer, used under the write lock */
	struct ptouch pt[2];         /* directory records touched by a change (write lock) */
	struct chfs_md scratch;      /* a decoded record (write lock) */
	struct chfs_md scratch2;     /* ns_insert's copy of the entry (write lock) */
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void root_md(struct chfs_md *md)
{
	memset(md, 0, sizeof *md);
	md->mode = S_IFDIR | 01777;
	md->chunk_size = 65536;
}

/* The record of node e (NULL: absent) into md: -ENOENT for none or an implicit directory. */
static int md_of(const struct ns_ent *e, struct chfs_md *md)
{
	size_t len;
	const uint8_t *rec = e ? nsi_rec(e, &len) : NULL;
	if (!rec)
		return -ENOENT;
	return record_decode(rec, len, md) ? -EIO : 0;
}

static struct ns_ent *recorded(const struct ns_store *ns, const char *path)
{
	struct ns_ent *e = nsi_find(ns->idx, path);
	size_t len;
	return e && nsi_rec(e, &len) ? e : NULL;
}

/* ---- changes: journal, then index (write lock held) ---- */

static void maybe_compact(struct ns_store *ns);

static int put_rec(struct ns_store *ns, const char *path, const struct chfs_md *md)
{
	size_t len;
	int rc = record_encode(md, ns->rec, sizeof ns->rec, &len);
	if (rc == 0)
		rc = nsj_append(ns->j, NSJ_PUT, path, ns->rec, len);
	if (rc == 0)
		rc = nsi_set(ns->idx, path, ns->rec, len, md->mode);
	if (rc == 0)
		maybe_compact(ns);
	return rc;
}

static int visit_emit(void *arg, const struct ns_ent *e)
{
	void **a = arg;
	size_t len;
	const uint8_t *rec = nsi_rec(e, &len);
	return rec ? ((nsj_emit_fn)a[0])(a[1], nsi_path(e), rec, len) : 0;
}

static int emit_all(void *arg, nsj_emit_fn emit, void *ectx)
{
	void *a[2] = {(void *)emit, ectx};
	return nsi_walk(arg, visit_emit, a);
}

static void maybe_compact(struct ns_store *ns)
{
	if (!nsj_should_compact(ns->j))
		return;
	int rc = nsj_compact(ns->j, emit_all, ns->idx);
	if (rc < 0)
		log_warn("namespace: compaction failed (%s); the journal keeps growing", strerror(-rc));
}

/* Directory times and counts (lib/dirtimes.c): when a name is added below a directory whose
 * record is here, the directory's mtime and ctime become now and its subdirectory count
 * follows, in the same journal group as the change itself. */
/* Prepare t: the record of path's directory with the change applied (delta > 0: a subdirectory
 * added, < 0: removed, 0: another entry). Not set for the root (no record) or a directory not
 * recorded here (its owner is told by the client). */
static void prep_touch(struct ns_store *ns, struct ptouch *t, const char *path, int delta)
{
	const char *slash = strrchr(path, '/');
	t->set = 0;
	if (!slash)
		return;
	memcpy(t->path, path, (size_t)(slash - path));
	t->path[slash - path] = '\0';
	struct chfs_md *md = &ns->scratch;
	if (md_of(nsi_find(ns->idx, t->path), md) < 0 || !S_ISDIR(md->mode))
		return;
	md->mtime_ns = md->ctime_ns = now_ns();
	if (delta > 0 || (delta < 0 && md->subdirs > 0))
		md->subdirs += (uint32_t)delta;
	t->mode = md->mode;
	t->set = record_encode(md, t->rec, sizeof t->rec, &t->len) == 0;
}

/* Journal what is staged plus the prepared touches as one group, then apply the touches. */
static int commit_touches(struct ns_store *ns, int n)
{
	int rc = 0, last = -1;
	for (int i = 0; i < n; i++)
		if (ns->pt[i].set)
			last = i;
	for (int i = 0; i <= last && rc == 0; i++)
		if (ns->pt[i].set)
			rc = nsj_stage(ns->j, NSJ_PUT, i < last, ns->pt[i].path, ns->pt[i].rec,
			               ns->pt[i].len);
	if (rc == 0)
		rc = nsj_commit(ns->j);
	for (int i = 0; i <= last && rc == 0; i++)
		if (ns->pt[i].set)
			rc = nsi_set(ns->idx, ns->pt[i].path, ns->pt[i].rec, ns->pt[i].len, ns->pt[i].mode);
	return rc;
}

/* path gets md (NULL: path's record goes), with its directory touched (delta: prep_touch). */
static int change_touch(struct ns_store *ns, const char *path, const struct chfs_md *md, int delta)
{
	size_t len = 0;
	prep_touch(ns, &ns->pt[0], path, delta);
	int rc = md ? record_encode(md, ns->rec, sizeof ns->rec, &len) : 0;
	if (rc == 0)
		rc = nsj_stage(ns->j, md ? NSJ_PUT : NSJ_DEL, ns->pt[0].set, path, md ? ns->rec : NULL, len);
	if (rc == 0)
		rc = commit_touches(ns, 1);
	if (rc == 0 && md)
		rc = nsi_set(ns->idx, path, ns->rec, len, md->mode);
	else if (rc == 0)
		nsi_clear(ns->idx, path);
	if (rc == 0)
		maybe_compact(ns);
	return rc;
}

/* ---- open: snapshot + journal, or a one-time import of the old tree ---- */

static int replay(void *arg, int op, const char *path, const uint8_t *rec, size_t len)
{
	struct ns_store *ns = arg;
	if (op == NSJ_DEL) {
		nsi_clear(ns->idx, path);
		return 0;
	}
	return nsi_set(ns->idx, path, rec, len, record_mode(rec));
}

static int import_one(void *arg, const char *path, const struct chfs_md *md)
{
	struct ns_store *ns = arg;
	size_t len;
	int rc = record_encode(md, ns->rec, sizeof ns->rec, &len);
	return rc ? rc : nsi_set(ns->idx, path, ns->rec, len, md->mode);
}

static int import_old(struct ns_store *ns, int rootfd)
{
	unsigned long bad = 0;
	int rc = nsimp_load(rootfd, import_one, ns, &bad);
	if (rc == 0)
		rc = nsj_compact(ns->j, emit_all, ns->idx);
	if (rc == 0)
		rc = nsimp_retire(rootfd);
	if (rc < 0)
		log_err("namespace: importing the old one-file-per-entry tree DIR/ns failed: %s",
		        strerror(-rc));
	else
		log_notice(
		        "namespace: imported %zu entries from DIR/ns (%lu unreadable records skipped); the old "
		        "tree is now DIR/ns.imported",
		        nsi_count(ns->idx), bad);
	return rc;
}

int ns_open_store(int rootfd, struct ns_store **out)
{
	struct ns_store *ns = calloc(1, sizeof *ns);
	if (!ns)
		return -ENOMEM;
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ns->lock, &a);
	pthread_rwlockattr_destroy(&a);
	int rc = -ENOMEM;
	/* An old tree is imported if this version has stored nothing yet: no snapshot (an import
	 * ends by writing one) and no frame in the journal. An import cut short left neither, so
	 * it simply runs again. */
	int has_snap = nsj_has_snapshot(rootfd), old = nsimp_present(rootfd);
	uint64_t dropped = 0;
	if (has_snap < 0)
		rc = has_snap;
	else if ((ns->idx = nsi_new()) != NULL)
		rc = nsj_open(rootfd, replay, ns, &ns->j, &dropped);
	if (rc == 0 && dropped)
		log_warn(
		        "namespace: dropped the last %llu bytes of DIR/ns.journal (cut or damaged by a crash)",
		        (unsigned long long)dropped);
	if (rc == 0 && old && !has_snap && nsj_journal_bytes(ns->j) == nsj_empty_bytes())
		rc = import_old(ns, rootfd);
	else if (rc == 0 && old)
		nsimp_retire(rootfd); /* imported, but stopped before the rename */
	if (rc < 0) {
		ns_close_store(ns);
		return rc;
	}
	*out = ns;
	return 0;
}

void ns_close_store(struct ns_store *ns)
{
	if (!ns)
		return;
	nsj_close(ns->j);
	nsi_free(ns->idx);
	pthread_rwlock_destroy(&ns->lock);
	free(ns);
}

void ns_set_compact_bytes(struct ns_store *ns, uint64_t bytes)
{
	pthread_rwlock_wrlock(&ns->lock);
	nsj_set_compact_bytes(ns->j, bytes);
	pthread_rwlock_unlock(&ns->lock);
}

/* ---- the operations ---- */

int ns_create(struct ns_store *ns, const char *path, const struct chfs_md *in, int excl, struct chfs_md *out,
              int *existed)
{
	if (!*path)
		return -EISDIR;
	pthread_rwlock_wrlock(&ns->lock);
	struct ns_ent *e = nsi_find(ns->idx, path);
	int rc = md_of(e, out);
	if (rc == 0) {
		if (S_ISDIR(out->mode)) {
			rc = -EISDIR;
		} else if (excl || S_ISLNK(out->mode)) {
			rc = -EEXIST;
		} else {
			out->size = 0;
			out->mtime_ns = out->ctime_ns = now_ns();
			rc = put_rec(ns, path, out);
			*existed = 1;
		}
	} else if (rc == -ENOENT && e) {
		rc = -EEXIST; /* an implicit directory: entries below it are held here */
	} else if (rc == -ENOENT && (rc = nsi_check_parents(ns->idx, path)) == 0) {
		*out = *in;
		out->fileid = ds_new_fileid(); /* never the client's choice */
		rc = change_touch(ns, path, out, 0);
		*existed = 0;
	}
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_lookup(struct ns_store *ns, const char *path, struct chfs_md *out)
{
	if (!*path) {
		root_md(out);
		return 0;
	}
	pthread_rwlock_rdlock(&ns->lock);
	int rc = md_of(nsi_find(ns->idx, path), out);
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_mkdir(struct ns_store *ns, const char *path, const struct chfs_md *in)
{
	if (!*path)
		return -EEXIST;
	pthread_rwlock_wrlock(&ns->lock);
	struct ns_ent *e = nsi_find(ns->idx, path);
	size_t len;
	int rc = e && nsi_rec(e, &len) ? -EEXIST : e ? 0 : nsi_check_parents(ns->idx, path);
	if (rc == 0) /* on an implicit directory too: it becomes owned */
		rc = change_touch(ns, path, in, 1);
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_rmdir(struct ns_store *ns, const char *path)
{
	if (!*path)
		return -EBUSY;
	pthread_rwlock_wrlock(&ns->lock);
	struct ns_ent *e = recorded(ns, path);
	int rc = !e ? -ENOENT : !S_ISDIR(nsi_mode(e)) ? -ENOTDIR : change_touch(ns, path, NULL, -1);
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_dir_has_entries(struct ns_store *ns, const char *path)
{
	pthread_rwlock_rdlock(&ns->lock);
	struct ns_ent *e = nsi_find(ns->idx, path);
	/* Implicit directories are dropped when nothing is below them: any child means entries. */
	int rc = e && S_ISDIR(nsi_mode(e)) && nsi_nkids(e) > 0;
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_readdir(struct ns_store *ns, const char *path, const char *cursor, ns_readdir_fn fn, void *arg,
               int *eof)
{
	struct chfs_md *md = malloc(sizeof *md);
	if (!md)
		return -ENOMEM;
	*eof = 1;
	pthread_rwlock_rdlock(&ns->lock);
	struct ns_ent *d = nsi_find(ns->idx, path);
	if (d && S_ISDIR(nsi_mode(d))) {
		for (struct ns_ent *c = nsi_next_child(d, cursor); c; c = nsi_next_child(d, nsi_name(c))) {
			if (md_of(c, md) < 0 || nsi_name(c)[0] == '\x01')
				continue; /* implicit directory, or an inode record (never listed) */
			if (fn(arg, nsi_name(c), md)) {
				*eof = 0;
				break;
			}
		}
	}
	pthread_rwlock_unlock(&ns->lock);
	free(md);
	return 0;
}

int ns_unlink(struct ns_store *ns, const char *path, struct chfs_md *old)
{
	pthread_rwlock_wrlock(&ns->lock);
	int rc = *path ? md_of(nsi_find(ns->idx, path), old) : -EISDIR;
	if (rc == 0)
		rc = S_ISDIR(old->mode) ? -EISDIR : change_touch(ns, path, NULL, 0);
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

/* May md go to path? Not over a directory, nor over a file or symlink if noreplace; an
 * implicit directory there holds entries, so it is never replaced. Reports what would be
 * replaced. Write lock held. */
static int check_put(struct ns_store *ns, const char *path, const struct chfs_md *md, int noreplace,
                     struct chfs_md *old, int *replaced)
{
	struct ns_ent *e = nsi_find(ns->idx, path);
	int rc = md_of(e, old);
	*replaced = 0;
	if (rc == 0) {
		int isdir = S_ISDIR(old->mode);
		if (noreplace || isdir || S_ISDIR(md->mode))
			return isdir && !S_ISDIR(md->mode) ? -EISDIR
			       : !noreplace && !isdir && S_ISDIR(md->mode)
			               ? -ENOTDIR /* rename dir over file */
			               : -EEXIST;
		*replaced = 1;
		return 0;
	}
	if (rc == -ENOENT && e)
		return -EEXIST;
	return rc == -ENOENT ? nsi_check_parents(ns->idx, path) : rc;
}

static int put_entry(struct ns_store *ns, const char *path, const struct chfs_md *md, int noreplace,
                     struct chfs_md *old, int *replaced)
{
	int rc = check_put(ns, path, md, noreplace, old, replaced);
	return rc ? rc : put_rec(ns, path, md);
}

int ns_insert(struct ns_store *ns, const char *path, const struct chfs_md *md, int noreplace,
              struct chfs_md *old, int *replaced)
{
	*replaced = 0;
	if (!*path)
		return -EEXIST;
	pthread_rwlock_wrlock(&ns->lock);
	struct chfs_md *moved = &ns->scratch2; /* a rename's new name: ctime is now, as Linux's */
	*moved = *md;
	moved->ctime_ns = now_ns();
	int rc = check_put(ns, path, moved, noreplace, old, replaced);
	if (rc == 0)
		rc = change_touch(ns, path, moved, S_ISDIR(moved->mode));
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_remove_if(struct ns_store *ns, const char *path, uint64_t fileid)
{
	struct chfs_md *md = malloc(sizeof *md);
	if (!md)
		return -ENOMEM;
	pthread_rwlock_wrlock(&ns->lock);
	int rc = md_of(nsi_find(ns->idx, path), md);
	if (rc == 0)
		rc = md->fileid != fileid ? -ESTALE
		                          : change_touch(ns, path, NULL, S_ISDIR(md->mode) ? -1 : 0);
	pthread_rwlock_unlock(&ns->lock);
	free(md);
	return rc;
}

int ns_rename(struct ns_store *ns, const char *from, const char *to, struct chfs_md *old, int *replaced)
{
	struct chfs_md *md = malloc(sizeof *md);
	*replaced = 0;
	if (!md)
		return -ENOMEM;
	pthread_rwlock_wrlock(&ns->lock);
	int rc = *from && *to ? md_of(nsi_find(ns->idx, from), md) : -EBUSY;
	if (rc == 0)
		rc = nsi_check_parents(ns->idx, to);
	if (rc == 0 && strcmp(from, to) != 0 && (rc = check_put(ns, to, md, 0, old, replaced)) == 0) {
		/* One journal group: after a crash either both names changed or neither did. */
		const char *sf = strrchr(from, '/'), *st = strrchr(to, '/');
		size_t len, lf = sf ? (size_t)(sf - from) : 0, lt = st ? (size_t)(st - to) : 0;
		int isdir = S_ISDIR(md->mode), same_dir = lf == lt && strncmp(from, to, lf) == 0;
		prep_touch(ns, &ns->pt[0], to, same_dir ? 0 : isdir);
		if (!same_dir) /* another directory than pt[0]'s */
			prep_touch(ns, &ns->pt[1], from, -isdir);
		else
			ns->pt[1].set = 0;
		int more = ns->pt[0].set || ns->pt[1].set;
		md->ctime_ns = now_ns(); /* a renamed entry's ctime changes, as Linux's */
		rc = record_encode(md, ns->rec, sizeof ns->rec, &len);
		if (rc == 0)
			rc = nsj_stage(ns->j, NSJ_PUT, 1, to, ns->rec, len);
		if (rc == 0)
			rc = nsj_stage(ns->j, NSJ_DEL, more, from, NULL, 0);
		if (rc == 0)
			rc = commit_touches(ns, 2);
		if (rc == 0 && (rc = nsi_set(ns->idx, to, ns->rec, len, md->mode)) == 0) {
			nsi_clear(ns->idx, from);
			maybe_compact(ns);
		}
		if (rc)
			*replaced = 0;
	}
	pthread_rwlock_unlock(&ns->lock);
	free(md);
	return rc;
}

/* The entry's attributes after applying a (see ns_setattr in ns_store.h). */
static void apply_setattr(struct chfs_md *md, const struct wire_setattr *a, int64_t now)
{
	uint32_t which = a->which;
	if (which & WIRE_SET_MODE)
		md->mode = (md->mode & S_IFMT) | (a->mode & 07777);
	if (which & (WIRE_SET_UID | WIRE_SET_GID)) {
		if (which & WIRE_SET_UID)
			md->uid = a->uid;
		if (which & WIRE_SET_GID)
			md->gid = a->gid;
		if (!S_ISDIR(md->mode)) {
			md->mode &= ~(uint32_t)S_ISUID;
			if (md->mode & S_IXGRP)
				md->mode &= ~(uint32_t)S_ISGID;
		}
	}
	if (which & WIRE_SET_ATIME)
		md->atime_ns = a->atime_ns;
	if (which & WIRE_SET_MTIME)
		md->mtime_ns = a->mtime_ns;
	if (which & WIRE_SET_SIZE_MAX) {
		if (a->size > md->size)
			md->size = a->size;
		md->mtime_ns = now;
	}
	if (which & WIRE_SET_SIZE) {
		md->size = a->size;
		md->mtime_ns = now;
	}
	if (which & WIRE_SET_TOUCH)
		md->mtime_ns = now;
	if (which & WIRE_SET_SUBDIR_ADD)
		md->subdirs++;
	if ((which & WIRE_SET_SUBDIR_DEL) && md->subdirs > 0)
		md->subdirs--;
	md->ctime_ns = now;
}

int ns_setattr(struct ns_store *ns, const char *path, uint64_t fileid, const struct wire_setattr *a,
               struct chfs_md *out)
{
	uint32_t which = a->which;
	if (!*path)
		return -EPERM;
	pthread_rwlock_wrlock(&ns->lock);
	int rc = md_of(nsi_find(ns->idx, path), out);
	const uint32_t dir_bits = WIRE_SET_TOUCH | WIRE_SET_SUBDIR_ADD | WIRE_SET_SUBDIR_DEL;
	if (rc == 0) {
		if (fileid && out->fileid != fileid)
			rc = -ESTALE;
		else if ((out->flags & MD_LINKED) && path[0] != '\x01' && (which & ~dir_bits))
			rc = WIRE_ELINKED; /* a name record: the attributes are in the inode record */
		else if (which & WIRE_SET_LINKED) {
			if (!S_ISREG(out->mode))
				rc = -EPERM;
			else {
				out->flags |= MD_LINKED; /* the client put the inode record first */
				rc = put_rec(ns, path, out);
			}
			pthread_rwlock_unlock(&ns->lock);
			return rc;
		} else if ((which & (WIRE_SET_SIZE | WIRE_SET_SIZE_MAX)) && !S_ISREG(out->mode))
			rc = S_ISDIR(out->mode) ? -EISDIR : -EINVAL;
		else if ((which & (WIRE_SET_SUBDIR_ADD | WIRE_SET_SUBDIR_DEL)) && !S_ISDIR(out->mode))
			rc = -ENOTDIR;
	}
	if (rc == 0) {
		apply_setattr(out, a, now_ns());
		rc = put_rec(ns, path, out);
	}
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_adjust_links(struct ns_store *ns, const char *key, uint64_t fileid, int add, struct chfs_md *out)
{
	pthread_rwlock_wrlock(&ns->lock);
	int rc = md_of(nsi_find(ns->idx, key), out);
	if (rc == 0 && (out->fileid != fileid || !(out->flags & MD_LINKED)))
		rc = -ESTALE;
	if (rc == 0 && add && out->nlink >= WIRE_NLINK_MAX)
		rc = -EMLINK;
	if (rc == 0) {
		out->nlink = add ? out->nlink + 1 : out->nlink ? out->nlink - 1 : 0;
		out->ctime_ns = now_ns();
		rc = out->nlink ? put_rec(ns, key, out) : change_touch(ns, key, NULL, 0);
	}
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}

int ns_relink(struct ns_store *ns, const char *path, const char *from, const char *to)
{
	struct chfs_md *md = malloc(sizeof *md);
	if (!md)
		return -ENOMEM;
	pthread_rwlock_wrlock(&ns->lock);
	int rc = md_of(nsi_find(ns->idx, path), md);
	if (rc == 0 && (!S_ISREG(md->mode) || !(md->flags & MD_PATHED) || strcmp(md->link, from)))
		rc = -ESTALE;
	if (rc == 0 && strlen(to) >= sizeof md->link)
		rc = -ENAMETOOLONG;
	if (rc == 0) {
		strcpy(md->link, to);
		rc = put_rec(ns, path, md);
	}
	pthread_rwlock_unlock(&ns->lock);
	free(md);
	return rc;
}

/* ---- rebalance ---- */

/* The walk copies the recorded paths under the read lock, then visits them unlocked (fn may
 * change the namespace, e.g. ns_remove_if after a hand-over), looking each up again. */
struct path_list {
	char *buf;
	size_t len, cap;
};

static int collect(void *arg, const struct ns_ent *e)
{
	struct path_list *l = arg;
	size_t len, n = strlen(nsi_path(e)) + 1;
	if (!nsi_rec(e, &len))
		return 0;
	if (l->len + n > l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 65536;
		while (cap < l->len + n)
			cap *= 2;
		char *b = realloc(l->buf, cap);
		if (!b)
			return -ENOMEM;
		l->buf = b;
		l->cap = cap;
	}
	memcpy(l->buf + l->len, nsi_path(e), n);
	l->len += n;
	return 0;
}

int ns_walk(struct ns_store *ns, ns_walk_fn fn, void *arg)
{
	struct path_list l = {0};
	struct chfs_md *md = malloc(sizeof *md);
	if (!md)
		return -ENOMEM;
	pthread_rwlock_rdlock(&ns->lock);
	int rc = nsi_walk(ns->idx, collect, &l);
	pthread_rwlock_unlock(&ns->lock);
	for (size_t off = 0; rc == 0 && off < l.len; off += strlen(l.buf + off) + 1) {
		pthread_rwlock_rdlock(&ns->lock);
		int found = md_of(nsi_find(ns->idx, l.buf + off), md) == 0;
		pthread_rwlock_unlock(&ns->lock);
		if (found)
			rc = fn(arg, l.buf + off, md);
	}
	free(l.buf);
	free(md);
	return rc;
}

int ns_adopt(struct ns_store *ns, const char *path, const struct chfs_md *md)
{
	if (!*path)
		return -EEXIST;
	pthread_rwlock_wrlock(&ns->lock);
	int rc;
	if (S_ISDIR(md->mode)) {
		/* An implicit directory (entries below it already here) takes the record. */
		struct ns_ent *e = nsi_find(ns->idx, path);
		size_t len;
		rc = e && nsi_rec(e, &len) ? -EEXIST : e ? 0 : nsi_check_parents(ns->idx, path);
		if (rc == 0)
			rc = put_rec(ns, path, md);
	} else {
		struct chfs_md *old = malloc(sizeof *old);
		int replaced;
		rc = old ? put_entry(ns, path, md, 1, old, &replaced) : -ENOMEM;
		free(old);
	}
	pthread_rwlock_unlock(&ns->lock);
	return rc;
}
