/*
 * backend_ns.c — the backend's namespace side: lookups and listings fall through to the
 * backend directory where CHFS has nothing.
 *
 * Lookup: the owner of a path (placement_owner) that has no entry for it asks the backend. A
 * regular file or a symlink becomes a CHFS entry right there, created exclusively (two racing
 * lookups agree on one file id), so that a rename or unlink acts on it as on any entry (a
 * symlink only DIR had failed to rename with ENOENT, after INSERT had made its new name). A
 * file: mode, owner, size and times from the backend, this server's chunk size for backend
 * files, flag MD_BACKEND, and md.link = the backend path (a regular file has no other use for
 * link). Every later READ/WRITE of it carries that path (wire_tag_put), so the server
 * that owns a chunk fetches that chunk itself (backend_cache.c); a rename inside CHFS keeps
 * reading from where the data came from. Directories are answered as the backend has them
 * without making entries: a directory's CHFS identity is its path.
 *
 * Readdir: each server lists, besides its own entries, the backend entries of the directory
 * whose path it owns, so across the pool every backend name is listed once; an entry CHFS has
 * (materialised or created) is listed once, from CHFS, since its record lives on the same
 * owner. The two sorted streams are merged by name, so the client's per-server cursor (the
 * last name it got) works over both.
 *
 * A path whose backend entry is being unlinked, removed or renamed away (flush_meta.c) is
 * neither looked up nor listed until that change reached the backend.
 *
 * The ring used for ownership is rebuilt when the member epoch changes.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "chfsd.h"
#include "flush_meta.h"

#include "placement.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ring *cur_ring;
static uint64_t cur_epoch;
static unsigned self_idx = UINT32_MAX;

int backend_owns(struct chfsd *d, uint64_t key)
{
	int mine = 0;
	pthread_mutex_lock(&ring_lock);
	pthread_mutex_lock(&d->mem.lock);
	if (!cur_ring || cur_epoch != d->mem.epoch) {
		const char **ids = malloc((d->mem.n ? d->mem.n : 1) * sizeof *ids);
		struct ring *r = NULL;
		self_idx = UINT32_MAX;
		for (unsigned i = 0; ids && i < d->mem.n; i++) {
			ids[i] = d->mem.m[i].id;
			if (strcmp(ids[i], d->id) == 0)
				self_idx = i;
		}
		if (ids && d->mem.n && ring_build(ids, d->mem.n, d->mem.vnodes, &r) == 0) {
			ring_free(cur_ring);
			cur_ring = r;
			cur_epoch = d->mem.epoch;
		}
		free(ids);
	}
	pthread_mutex_unlock(&d->mem.lock);
	if (cur_ring && cur_epoch)
		mine = ring_owner(cur_ring, key) == self_idx;
	pthread_mutex_unlock(&ring_lock);
	return mine;
}

/* 1 if this server owns the namespace entry of path (placement_owner). */
static int owned_here(struct chfsd *d, const char *path)
{
	return backend_owns(d, placement_chunk_key(placement_new_key(path), 0));
}

static int64_t ts_ns(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec; }

/* md of a backend entry as CHFS shows it (file id 0: not an entry yet). */
static int md_of(struct chfsd *d, const char *path, const struct stat *st, uint32_t cs, struct chfs_md *md)
{
	memset(md, 0, sizeof *md);
	md->mode = st->st_mode;
	md->uid = st->st_uid;
	md->gid = st->st_gid;
	md->chunk_size = cs;
	md->atime_ns = ts_ns(&st->st_atim);
	md->mtime_ns = ts_ns(&st->st_mtim);
	md->ctime_ns = ts_ns(&st->st_ctim);
	if (S_ISREG(st->st_mode)) {
		md->size = (uint64_t)st->st_size;
		md->pkey = placement_new_key(path);
		md->flags = MD_BACKEND | MD_FLUSH; /* writes to it go back there */
		if (strlen(path) >= sizeof md->link)
			return -ENAMETOOLONG;
		strcpy(md->link, path);
		return 0;
	}
	if (S_ISLNK(st->st_mode)) {
		int rc = backend_readlink(d->bk, path, md->link, sizeof md->link);
		md->size = strlen(md->link); /* as chfs_symlink's and lstat(2)'s */
		return rc;
	}
	return S_ISDIR(st->st_mode) ? 0 : -ENOENT; /* devices, fifos, sockets: not cached */
}

static int lookup(struct chfsd *d, const char *path, uint32_t cs, struct chfs_md *out)
{
	struct stat st;
	struct chfs_md md;
	if (!d->bk || !*path || bmeta_hidden(d, path))
		return -ENOENT; /* (a pending unlink or rename away: a tombstone, see flush_meta.c) */
	int rc = backend_lstat(d->bk, path, &st);
	if (rc)
		return rc == -ENOTDIR ? -ENOENT : rc;
	if ((rc = md_of(d, path, &st, cs, &md)) < 0)
		return rc;
	if (S_ISDIR(md.mode)) {
		*out = md;
		return 0;
	}
	int existed = 0;
	rc = st_create(d->st, path, &md, 1, out, &existed);
	if (rc == -EEXIST)
		rc = st_lookup(d->st, path, out); /* another lookup made it first */
	return rc;
}

int backend_lookup(struct chfsd *d, const char *path, struct chfs_md *out)
{
	return lookup(d, path, d->bk_chunk_size, out);
}

int backend_stage_entry(struct chfsd *d, const char *path, uint32_t chunk_size, struct chfs_md *out)
{
	int rc = st_lookup(d->st, path, out);
	return rc == -ENOENT ? lookup(d, path, chunk_size, out) : rc;
}

void backend_materialise(struct chfsd *d, const char *path)
{
	struct chfs_md md;
	if (d->bk && st_lookup(d->st, path, &md) == -ENOENT)
		backend_lookup(d, path, &md);
}

struct merge {
	struct chfsd *d;
	const char *dir;
	char **names;
	size_t n, next;
	backend_readdir_fn fn;
	void *arg;
	int stopped;
};

/* Deliver the backend names before `upto` (all if NULL); skip one equal to it (CHFS has it). */
static int deliver_backend(struct merge *m, const char *upto)
{
	char *full = malloc(CHFS_PATH_MAX);
	struct chfs_md *md = malloc(sizeof *md);
	int rc = 0;
	if (!full || !md)
		rc = -ENOMEM;
	while (rc == 0 && m->next < m->n) {
		const char *nm = m->names[m->next];
		int c = upto ? strcmp(nm, upto) : -1;
		if (c > 0)
			break;
		m->next++;
		if (c == 0)
			continue;
		struct stat st;
		if (snprintf(full, CHFS_PATH_MAX, "%s%s%s", m->dir, *m->dir ? "/" : "", nm) >=
		            CHFS_PATH_MAX ||
		    path_check_canonical(full, strlen(full), 0) != 0 || !owned_here(m->d, full) ||
		    bmeta_hidden(m->d, full) || backend_lstat(m->d->bk, full, &st) != 0 ||
		    md_of(m->d, full, &st, m->d->bk_chunk_size, md) != 0)
			continue;
		if (m->fn(m->arg, nm, md)) {
			m->next--;
			m->stopped = 1;
			rc = 1;
		}
	}
	free(full);
	free(md);
	return rc;
}

static int merge_entry(void *arg, const char *name, const struct chfs_md *md)
{
	struct merge *m = arg;
	if (deliver_backend(m, name))
		return 1;
	if (m->fn(m->arg, name, md)) {
		m->stopped = 1;
		return 1;
	}
	return 0;
}

int backend_readdir(struct chfsd *d, const char *path, const char *cursor, backend_readdir_fn fn, void *arg,
                    int *eof)
{
	struct merge m = {.d = d, .dir = path, .fn = fn, .arg = arg};
	if (d->bk) {
		int rc = backend_list(d->bk, path, cursor, &m.names, &m.n);
		if (rc && rc != -ENOENT && rc != -ENOTDIR)
			return rc;
	}
	int rc = st_readdir(d->st, path, cursor, merge_entry, &m, eof);
	if (rc == 0 && *eof && !m.stopped && deliver_backend(&m, NULL) == 1)
		*eof = 0;
	for (size_t i = 0; i < m.n; i++)
		free(m.names[i]);
	free(m.names);
	return rc < 0 ? rc : 0;
}
