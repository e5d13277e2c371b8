/*
 * namespace.c — operations on names: each goes to the owner of the canonical path
 * (placement_owner), except directory emptiness and data clean-up, which ask every server
 * concurrently (rpc_multi).
 *
 * Symlinks are followed at the last component only (up to 8 hops; intermediate components are
 * taken literally, as upstream). New entries require an existing parent directory (except
 * chfs_create, which makes missing ones as upstream does); the last parent seen to exist is
 * remembered for one second per thread, so creating many files in one directory costs one
 * extra lookup per second, not per file.
 * Open and create share open_file: O_CREAT is an exclusive CREATE, and on EEXIST the existing
 * file is opened, never reset — only O_TRUNC truncates (see doc/design.md "Open and create").
 * Rename moves only the namespace entry (data is keyed by file id): one RENAME when both names
 * have the same owner, else INSERT at the new owner then REMOVE_IF at the old one (ns_move). A
 * directory has its subtree's entries moved one by one, metadata only, by dir_rename.c (not
 * atomic; see there).
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int canon(const char *in, char *out)
{
	if (!in)
		return -EFAULT;
	return path_canonical(in, out);
}

int ns_lookup(struct srvlist *s, const char *cpath, struct chfs_md *md)
{
	return ns_lookup_op(s, cpath, md, WOP_STAT);
}

int ns_lookup_op(struct srvlist *s, const char *cpath, struct chfs_md *md, unsigned op)
{
	RPC_DECL(r);
	rpc_begin(&r, op);
	wenc_str(&r.e, cpath);
	const char *by = NULL;
	int rc = rpc_call_path_by(s, cpath, &r, &by);
	if (rc == 0) {
		wdec_md(&r.d, md);
		if (wdec_finish(&r.d))
			rc = -EIO;
	}
	if (rc == 0 && (md->flags & MD_LINKED)) { /* a linked file's name: its inode record */
		rc = link_inode_get(s, md->fileid, md);
		if (rc == -ESTALE)
			rc = -ENOENT;
		by = NULL; /* the inode record comes unmerged (WOP_INODE_GET) */
	}
	/* The owner that answered merged its own backing file already (server/handlers.c
	 * merge_local): ask the home only when that is another server. */
	if (rc == 0 && !(by && strcmp(by, md->home) == 0))
		ns_merge_home(s, md);
	return rc;
}

void ns_merge_home(struct srvlist *s, struct chfs_md *md)
{
	if (!(md->flags & MD_LOCAL))
		return;
	int h = client_server_index(s, md->home);
	if (h < 0)
		return;
	RPC_DECL(r);
	rpc_begin(&r, WOP_DATA_STAT); /* the home applies the size rule (server/handlers.c) */
	wenc_u64(&r.e, md->fileid);
	wenc_u64(&r.e, md->size);
	wenc_i64(&r.e, md->mtime_ns);
	wenc_i64(&r.e, md->ctime_ns);
	if (rpc_call(s, (unsigned)h, &r) == 0) {
		uint64_t size = wdec_u64(&r.d);
		int64_t mtime = wdec_i64(&r.d);
		if (wdec_finish(&r.d) == 0) {
			md->size = size;
			md->mtime_ns = mtime;
		}
	}
}

/* ns_resolve; op WOP_STAT_OPEN: the lookups take an open lease of the regular file found. */
static int resolve(struct srvlist *s, const char *cpath, char *out, struct chfs_md *md, unsigned op)
{
	PATH_BUF(cur, 2);
	PATH_BUF(joined, 1);
	if (!cur || !joined)
		return -ENOMEM;
	char *tmp = cur + CHFS_PATH_MAX;
	snprintf(cur, CHFS_PATH_MAX, "%s", cpath);
	for (int hop = 0; hop <= 8; hop++) {
		int rc = ns_lookup_op(s, cur, md, op);
		if (rc)
			return rc;
		if (!S_ISLNK(md->mode)) {
			if (out)
				snprintf(out, CHFS_PATH_MAX, "%s", cur);
			return 0;
		}
		if (md->link[0] == '/') {
			rc = path_canonical(md->link, tmp);
		} else {
			path_split(cur, tmp); /* the parent; tmp is free until path_canonical */
			if (snprintf(joined, CHFS_PATH_MAX, "%s/%s", tmp, md->link) >= CHFS_PATH_MAX)
				return -ENAMETOOLONG;
			rc = path_canonical(joined, tmp);
		}
		if (rc)
			return rc == -EINVAL ? -ENOENT : rc;
		memcpy(cur, tmp, CHFS_PATH_MAX);
	}
	return -ELOOP;
}

int ns_resolve(struct srvlist *s, const char *cpath, char *out, struct chfs_md *md)
{
	return resolve(s, cpath, out, md, WOP_STAT);
}

/* Did the owner take an open lease of md's file (WOP_STAT_OPEN, WIRE_CREATE_LEASE)? */
static int lease_taken(const struct chfs_md *md) { return S_ISREG(md->mode) && !(md->flags & MD_LINKED); }

void md_to_stat(const struct chfs_md *md, const char *cpath, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_dev = 0xc4f5;
	st->st_ino = md->fileid ? (ino_t)md->fileid : (ino_t)chfs_hash_str(cpath);
	st->st_mode = md->mode;
	st->st_nlink = S_ISDIR(md->mode)         ? 2 + (nlink_t)md->subdirs
	               : (md->flags & MD_LINKED) ? (nlink_t)md->nlink
	                                         : 1;
	if (S_ISCHR(md->mode) || S_ISBLK(md->mode)) /* Linux's new_decode_dev */
		st->st_rdev =
		        makedev((md->rdev & 0xfff00) >> 8, (md->rdev & 0xff) | ((md->rdev >> 12) & 0xfff00));
	st->st_uid = md->uid;
	st->st_gid = md->gid;
	st->st_size = (off_t)md->size;
	st->st_blksize = md->chunk_size ? md->chunk_size : 65536;
	st->st_blocks = (blkcnt_t)((md->size + 511) / 512);
	st->st_atim.tv_sec = md->atime_ns / 1000000000;
	st->st_atim.tv_nsec = md->atime_ns % 1000000000;
	st->st_mtim.tv_sec = md->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = md->mtime_ns % 1000000000;
	st->st_ctim.tv_sec = md->ctime_ns / 1000000000;
	st->st_ctim.tv_nsec = md->ctime_ns % 1000000000;
}

static void rename_fd(struct chfs_file *f, void *arg);

/* SETATTR of the size (which: WIRE_SET_SIZE_MAX for a report, WIRE_SET_SIZE for a truncate) of
 * file `fileid` under the name `path`: ESTALE if the name holds another file. */
static int setattr_size(struct srvlist *s, const char *path, uint64_t fileid, uint32_t which, uint64_t size)
{
	RPC_DECL(r);
	rpc_begin(&r, WOP_SETATTR);
	wenc_str(&r.e, path);
	wenc_u64(&r.e, fileid);
	wenc_setattr(&r.e, &(struct wire_setattr){.which = which, .size = size});
	int rc = rpc_call_path(s, path, &r);
	if ((rc == WIRE_ELINKED || rc == -ENOENT || rc == -ESTALE) && fileid) {
		/* a linked file (its name record, or a name since removed): at its inode record */
		struct wire_setattr a = {.which = which, .size = size};
		int lrc = link_setattr(s, fileid, &a, NULL);
		rc = lrc == -ENOENT && rc != WIRE_ELINKED ? rc : lrc;
	}
	return rc;
}

/* File `fileid` has no entry under the name we knew: another process renamed (or removed) it.
 * Ask every server where the file id went (server/moved.c) and call fn on the names heard of,
 * newest first, until it returns something else than -ENOENT/-ESTALE (fn checks the file id);
 * the name that took it is copied to `found` (CHFS_PATH_MAX) and the descriptors of the file
 * follow it. -ENOENT if no name holds the file id any more (it was removed: the name is not
 * brought back). */
static int try_moved(struct srvlist *s, uint64_t fileid, int (*fn)(struct srvlist *, const char *, void *),
                     void *arg, char *found)
{
	struct rpc_fanout f;
	int rc = rpc_fanout_init(&f, s, WIRE_HDR_LEN + 16 + CHFS_PATH_MAX);
	if (rc == 0) {
		uint8_t msg[WIRE_HDR_LEN + 16];
		struct wenc e;
		wenc_init(&e, msg, sizeof msg);
		wenc_reserve(&e, WIRE_HDR_LEN);
		wenc_u64(&e, fileid);
		rpc_fanout_call(s, &f, msg, e.len, WOP_MOVED);
		rc = -ENOENT;
		for (;;) { /* newest untried candidate first */
			int best = -1;
			int64_t best_when = 0;
			struct wdec d;
			for (unsigned i = 0; i < f.n; i++) {
				if (rpc_fanout_reply(&f, i, &d))
					continue;
				int64_t when = wdec_i64(&d);
				if (!d.err && (best < 0 || when > best_when)) {
					best = (int)i;
					best_when = when;
				}
			}
			if (best < 0)
				break;
			rpc_fanout_reply(&f, (unsigned)best, &d);
			wdec_i64(&d);
			wdec_str(&d, found, CHFS_PATH_MAX);
			f.rcs[best] = -ENOENT; /* tried */
			if (wdec_finish(&d))
				continue;
			rc = fn(s, found, arg);
			if (rc != -ENOENT && rc != -ESTALE)
				break;
			rc = -ENOENT;
		}
	}
	if (rc == 0)
		fd_foreach_fileid(fileid, rename_fd, found);
	rpc_fanout_free(&f);
	return rc;
}

struct size_change {
	uint64_t fileid, size;
	uint32_t which;
};

static int size_at(struct srvlist *s, const char *path, void *arg)
{
	const struct size_change *c = arg;
	return setattr_size(s, path, c->fileid, c->which, c->size);
}

/* A size change (report or truncate) for a file another process renamed: see try_moved. */
static int setattr_size_moved(struct srvlist *s, uint64_t fileid, uint32_t which, uint64_t size, char *found)
{
	struct size_change c = {fileid, size, which};
	return try_moved(s, fileid, size_at, &c, found);
}

struct lookup_id {
	uint64_t fileid;
	struct chfs_md *md;
};

static int lookup_at(struct srvlist *s, const char *path, void *arg)
{
	struct lookup_id *l = arg;
	int rc = ns_lookup(s, path, l->md);
	return rc == 0 && l->md->fileid != l->fileid ? -ESTALE : rc;
}

int ns_lookup_fileid(struct srvlist *s, uint64_t fileid, struct chfs_md *md, char *found)
{
	int rc = link_inode_get(s, fileid, md); /* a linked file whose name went: its inode */
	if (rc == 0) {
		md->flags |= MD_LINKED;
		ns_merge_home(s, md);
	}
	if (rc != -ENOENT)
		return rc;
	struct lookup_id l = {fileid, md};
	return try_moved(s, fileid, lookup_at, &l, found);
}

int ns_report_size(struct chfs_file *f)
{
	struct srvlist *s;
	int frc = io_flush(f);
	if (frc)
		return frc;
	pthread_mutex_lock(&f->lock);
	if (!f->dirty || f->orphan) { /* an orphan has no name to report to (orphan.c) */
		if (f->dirty) {
			f->dirty = 0;
			atomic_fetch_sub(&chfs_client.dirty_fds, 1);
		}
		pthread_mutex_unlock(&f->lock);
		return 0;
	}
	uint64_t end = f->written_end;
	f->dirty = 0;
	atomic_fetch_sub(&chfs_client.dirty_fds, 1);
	pthread_mutex_unlock(&f->lock);
	int rc = client_begin(&s);
	if (rc)
		return rc;
	PATH_BUF(path, 1);
	if (!path)
		return -ENOMEM;
	pthread_mutex_lock(&f->lock);
	snprintf(path, CHFS_PATH_MAX, "%s", f->path);
	pthread_mutex_unlock(&f->lock);
	rc = setattr_size(s, path, f->md.fileid, WIRE_SET_SIZE_MAX, end);
	if (rc == -ENOENT || rc == -ESTALE) {
		rc = setattr_size_moved(s, f->md.fileid, WIRE_SET_SIZE_MAX, end, path);
		if (rc == -ENOENT)
			rc = 0; /* removed meanwhile: nothing to report to */
	}
	if (rc) {
		pthread_mutex_lock(&f->lock);
		if (!f->dirty) {
			f->dirty = 1;
			atomic_fetch_add(&chfs_client.dirty_fds, 1);
		}
		pthread_mutex_unlock(&f->lock);
	}
	return rc;
}

/* The last name of regular file md is gone (best effort: the name is gone either way). Its
 * data go, unless descriptors keep them (orphan.c); then, with a backend, no server may flush
 * them back under the removed name: the backend file went with it (server/flush.c). */
static void last_name_gone(struct srvlist *s, const struct chfs_md *md)
{
	if (!orphan_hold(md))
		data_remove_all(s, md);
	else if (md->flags & MD_FLUSH)
		data_unnamed_all(s, md);
}

/* Does the parent of cpath exist as a directory? Its record goes to *pmd (NULL: not wanted). */
static __thread char known_parent[CHFS_PATH_MAX];
static __thread struct chfs_md known_parent_md;
static __thread time_t known_parent_at;

/* The root has no record anywhere (server/ns_store.c root_md): world-writable and sticky. */
static void root_md(struct chfs_md *md)
{
	memset(md, 0, sizeof *md);
	md->mode = S_IFDIR | 01777;
}

static int check_parent(struct srvlist *s, const char *cpath, struct chfs_md *pmd)
{
	PATH_BUF(parent, 1);
	if (!parent)
		return -ENOMEM;
	if (!path_split(cpath, parent))
		return -EEXIST; /* the root */
	if (!parent[0]) {
		if (pmd)
			root_md(pmd);
		return 0;
	}
	time_t now = time(NULL);
	if (now == known_parent_at && strcmp(parent, known_parent) == 0) {
		if (pmd)
			*pmd = known_parent_md;
		return 0;
	}
	struct chfs_md *md = malloc(sizeof *md);
	int rc = md ? ns_resolve(s, parent, NULL, md) : -ENOMEM;
	if (rc == 0 && !S_ISDIR(md->mode))
		rc = -ENOTDIR;
	if (rc == 0) { /* only a directory is remembered, with its own name */
		known_parent_md = *md;
		memcpy(known_parent, parent, strlen(parent) + 1);
		known_parent_at = now;
		if (pmd)
			*pmd = *md;
	}
	free(md);
	return rc;
}

/* May the caller remove (or replace) the entry at cp? Write and search on its directory, and
 * in a sticky directory ownership of the entry (looked up only then) or of the directory. */
static int may_remove(struct srvlist *s, const char *cp, const struct chfs_md *entry)
{
	if (perm_exempt())
		return 0;
	struct chfs_md *dir = malloc(2 * sizeof *dir);
	if (!dir)
		return -ENOMEM;
	int rc = check_parent(s, cp, dir);
	if (rc == -EEXIST)
		rc = -EBUSY; /* the root */
	if (rc == 0 && (rc = perm_dir_change(dir, NULL)) == 0 && perm_sticky_applies(dir)) {
		if (!entry && (rc = ns_lookup(s, cp, dir + 1)) == 0)
			entry = dir + 1;
		if (rc == 0)
			rc = perm_dir_change(dir, entry);
	}
	free(dir);
	return rc;
}

static void forget_parent(void) { known_parent_at = 0; }

/* How long a create refused below a directory that is still there waits for the fence to go
 * (server/fence.c FENCE_MS, and a little more): the removal finishes, fails (and lifts the
 * fence) or its client died (the fence expires). */
#define PARENT_WAIT_MS 50
#define PARENT_TRIES (2500 / PARENT_WAIT_MS)

int ns_parent_again(struct srvlist *s, const char *cp, struct chfs_md *pmd, int attempt)
{
	forget_parent();
	if (attempt >= PARENT_TRIES)
		return -ENOENT;
	if (attempt > 0) /* the first try again is at once: the cached parent was stale */
		nanosleep(&(struct timespec){0, PARENT_WAIT_MS * 1000000L}, NULL);
	int rc = check_parent(s, cp, pmd);
	return rc == -EEXIST ? -ENOENT : rc;
}

/* The prologue every path call shares (as Redis's lookupKeyReadOrReply, libuv's PATH/INIT):
 * canonicalise, take the server list, optionally report this process's pending sizes first
 * (so the call sees its own writes), then look the name up (NS_LOOKUP), follow its symlinks
 * (NS_RESOLVE: the final name in c->real) or check that its parent is a directory
 * (NS_PARENT). Returns 0 or -errno; the caller converts once with set_err. */
int ns_begin(const char *path, unsigned how, struct ns_call *c)
{
	if (!c)
		return -ENOMEM;
	c->s = NULL;
	int rc = canon(path, c->cp);
	if (rc == 0)
		rc = client_begin(&c->s);
	if (rc == 0 && (how & NS_SYNC))
		rc = fd_sync_sizes(0);
	if (rc == 0 && (how & NS_LOOKUP))
		rc = ns_lookup(c->s, c->cp, &c->md);
	if (rc == 0 && (how & NS_RESOLVE))
		rc = ns_resolve(c->s, c->cp, c->real, &c->md);
	if (rc == 0 && (how & NS_PARENT))
		rc = check_parent(c->s, c->cp, &c->parent);
	if (rc == 0 && (how & NS_PARENT))
		rc = perm_dir_change(&c->parent, NULL);
	return rc;
}

/* A new entry's record; dir is its directory's (owner and group rules: perm.c). */
static void md_new(struct chfs_md *md, mode_t mode, const struct chfs_md *dir)
{
	memset(md, 0, sizeof *md);
	md->mode = mode;
	perm_new_owner(md, dir);
	md->chunk_size = chfs_client.cfg.chunk_size;
	md->atime_ns = md->mtime_ns = md->ctime_ns = now_ns();
}

/* leased: the open took an open lease (the descriptor reports its close; on failure here it
 * is reported at once). */
static int new_file(const char *cpath, const struct chfs_md *md, int accmode, int append, int leased)
{
	struct chfs_file *f = calloc(1, sizeof *f);
	if (leased)
		open_lease_opened(cpath);
	if (!f) {
		if (leased)
			open_lease_closed(md->fileid);
		return -ENOMEM;
	}
	f->leased = leased;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->wlock, NULL);
	if (S_ISREG(md->mode) && accmode != O_RDONLY)
		f->wcap = chfs_client.cfg.buf_size;
	snprintf(f->path, sizeof f->path, "%s", cpath);
	f->md = *md;
	/* As upstream's: a chfs.h descriptor reads and writes whatever access mode it was opened
	 * with (IOR passes its own flag words), so it keeps no access mode. Access paths that see
	 * real O_ flags (hook, FUSE kernel, ROMIO) enforce the POSIX mode themselves; accmode
	 * only sizes the write buffer. */
	f->append = append;
	f->isdir = S_ISDIR(md->mode);
	int fd = fd_alloc(f);
	if (fd < 0) {
		if (leased)
			open_lease_closed(md->fileid);
		pthread_mutex_destroy(&f->wlock);
		pthread_mutex_destroy(&f->lock);
		free(f);
	}
	return fd;
}

/* Create the missing directories above cpath (upstream's namespace makes them implicitly, so
 * programs written for it create "/bw/f" without "/bw"). An existing component must be a
 * directory; a concurrent creator of the same one is not an error. */
static int make_parents(struct srvlist *s, const char *cpath)
{
	PATH_BUF(parent, 2);
	struct chfs_md *md = malloc(2 * sizeof *md), *up = md + 1; /* new one, and its directory */
	if (!md || !parent) {
		free(md);
		return -ENOMEM;
	}
	char *dir = parent + CHFS_PATH_MAX;
	int rc = path_split(cpath, parent) ? 0 : -EEXIST;
	root_md(up);
	for (size_t i = 0; rc == 0 && parent[i]; i++) {
		if (parent[i + 1] != '/' && parent[i + 1] != '\0')
			continue;
		memcpy(dir, parent, i + 1);
		dir[i + 1] = '\0';
		md_new(md, S_IFDIR | 0755, up);
		RPC_DECL(r);
		rpc_begin(&r, WOP_MKDIR);
		wenc_str(&r.e, dir);
		wenc_md(&r.e, md);
		wenc_u64(&r.e, up->fileid);
		if ((rc = perm_dir_change(up, NULL)) == 0 && (rc = rpc_call_path(s, dir, &r)) == 0)
			dir_touch(s, dir, placement_owner(s->ring, dir), 1);
		if (rc == 0 || rc == -EEXIST || rc == -EACCES) {
			int exists = ns_resolve(s, dir, NULL, up);
			if (exists == 0)
				rc = S_ISDIR(up->mode) ? 0 : -ENOTDIR;
		}
	}
	free(md);
	return rc;
}

/* Create cpath exclusively (WOP_CREATE with EXCL): -EEXIST if any entry has the name, so an
 * existing file is never reset by a create. */
static int create_excl(struct srvlist *s, const char *cp, int32_t flags, mode_t mode, int chunk_size,
                       const struct chfs_md *dir, struct chfs_md *got)
{
	struct chfs_md md;
	md_new(&md, S_IFREG | (mode & 07777), dir);
	if (chunk_size > 0 && (unsigned)chunk_size <= CHFS_MAX_CHUNK_SIZE)
		md.chunk_size = (uint32_t)chunk_size;
	md.pkey = placement_new_key(cp);
	if ((flags & CHFS_O_LOCAL) || chfs_client.cfg.placement == CHFS_PLACE_LOCAL) {
		int h = client_local_server(s);
		if (h >= 0) {
			md.flags |= MD_LOCAL;
			snprintf(md.home, sizeof md.home, "%s", s->addrs[h]);
		} else {
			log_info(
			        "%s: no CHFS server on this host; striping by hash instead of local placement",
			        cp);
		}
	}
	RPC_DECL(r);
	rpc_begin(&r, WOP_CREATE);
	wenc_str(&r.e, cp);
	wenc_md(&r.e, &md);
	wenc_u32(&r.e, WIRE_CREATE_EXCL | WIRE_CREATE_LEASE);
	wenc_u64(&r.e, dir->fileid);
	int rc = rpc_call_path(s, cp, &r);
	if (rc == 0) {
		wdec_u32(&r.d);
		wdec_md(&r.d, got);
		if (wdec_finish(&r.d))
			rc = -EIO;
	}
	return rc;
}

/* open_existing's checks of the entry found (c->md) and its O_TRUNC. */
static int check_existing(struct ns_call *c, int32_t flags, int posix)
{
	struct chfs_md *md = &c->md;
	int rc, acc = flags & O_ACCMODE;
	if (S_ISFIFO(md->mode) || S_ISSOCK(md->mode) || S_ISCHR(md->mode) || S_ISBLK(md->mode))
		return -ENXIO; /* node-local objects: the kernel runs them on a mount (special.c) */
	if (S_ISDIR(md->mode) && acc != O_RDONLY)
		return -EISDIR;
	if (!S_ISDIR(md->mode) && (flags & O_DIRECTORY))
		return -ENOTDIR;
	/* Only real O_ flags say what access is asked (upstream's chfs_open takes IOR's words). */
	if (posix && (rc = perm_access(md, acc == O_RDONLY   ? PERM_R
	                                   : acc == O_WRONLY ? PERM_W
	                                                     : PERM_R | PERM_W)) < 0)
		return rc;
	if ((flags & O_TRUNC) && acc != O_RDONLY && S_ISREG(md->mode)) {
		if ((rc = ns_truncate(c->s, c->real, md, 0)) < 0)
			return rc;
		md->size = 0;
	}
	return 0;
}

/* Open the existing entry at cp (symlinks followed): O_DIRECTORY and directory checks, then
 * O_TRUNC through ns_truncate, which first reports this process's own dirty writes of the
 * file and clamps its descriptors — else their later size report would resurrect the old
 * length as zeros. */
static int open_existing(struct ns_call *c, int32_t flags, int posix)
{
	struct chfs_md *md = &c->md;
	int rc = fd_sync_sizes(0);
	if (rc == 0)
		rc = resolve(c->s, c->cp, c->real, md, WOP_STAT_OPEN);
	if (rc)
		return rc;
	int leased = lease_taken(md);
	if ((rc = check_existing(c, flags, posix)) == 0)
		return new_file(c->real, md, flags & O_ACCMODE, !!(flags & O_APPEND), leased);
	if (leased) { /* the owner counted an open that did not happen: report its close */
		open_lease_opened(c->real);
		open_lease_closed(md->fileid);
	}
	return rc;
}

/* The one open path of libchfs. Without O_CREAT: open_existing. With O_CREAT: create
 * exclusively; if the name exists (and O_EXCL was not asked), open what is there — so
 * concurrent creators of one file (IOR's ranks, two nodes through FUSE) all share the first
 * one's file and nobody's bytes are truncated. A name removed between the two steps is
 * created again. Missing parents are created when `make_missing`, else ENOENT. */
static int open_file(const char *path, int32_t flags, mode_t mode, int chunk_size, int make_missing,
                     int posix)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, 0, c);
	if (rc)
		return rc;
	if (!(flags & O_CREAT))
		return open_existing(c, flags, posix);
	const char *cp = c->cp;
	struct srvlist *s = c->s;
	rc = check_parent(s, cp, &c->parent);
	if (rc == -ENOENT && make_missing && (rc = make_parents(s, cp)) == 0)
		rc = check_parent(s, cp, &c->parent);
	if (rc == -EEXIST)
		rc = -EISDIR; /* the root */
	if (rc)
		return rc;
	int may_add = perm_dir_change(&c->parent, NULL);
	if (may_add) { /* O_CREAT without the right to add a name opens what is there */
		if ((rc = ns_lookup(s, cp, &c->md)) == 0 && (flags & O_EXCL))
			rc = -EEXIST;
		if (rc == 0)
			rc = open_existing(c, flags, posix);
		return rc == -ENOENT ? may_add : rc;
	}
	for (int attempt = 0, again = 0; attempt < 4; attempt++) {
		rc = create_excl(s, cp, flags, mode, chunk_size, &c->parent, &c->md);
		if (rc == -ENOENT) { /* the parent fenced (server/fence.c), or gone */
			if (again > PARENT_TRIES)
				return rc;
			rc = ns_parent_again(s, cp, &c->parent, again++);
			if (rc == -ENOENT && make_missing && (rc = make_parents(s, cp)) == 0)
				rc = check_parent(s, cp, &c->parent);
			if (rc)
				return rc;
			attempt--;
			continue;
		}
		if (rc == 0)
			dir_touch(s, cp, placement_owner(s->ring, cp), 0);
		if (rc == 0)
			return new_file(cp, &c->md, flags & O_ACCMODE, !!(flags & O_APPEND),
			                lease_taken(&c->md));
		if (rc != -EEXIST || (flags & O_EXCL))
			return rc;
		rc = open_existing(c, flags, posix);
		if (rc != -ENOENT)
			return rc;
	}
	return rc;
}

int chfs_create_chunk_size(const char *path, int32_t flags, mode_t mode, int chunk_size)
{
	/* O_EXCL is ignored, as upstream's create does: IOR passes its own flag word, where 0x80
	 * (IOR_DIRECT, -B) is O_EXCL, and `ior -B` on an existing file must not fail. The POSIX
	 * access paths (chfs_open_posix) honour it. */
	return set_err(open_file(path, (flags | O_CREAT) & ~O_EXCL, mode, chunk_size, 1, 0));
}

int chfs_create(const char *path, int32_t flags, mode_t mode)
{
	return chfs_create_chunk_size(path, flags, mode, 0);
}

int chfs_open(const char *path, int32_t flags)
{
	/* O_CREAT and O_EXCL are not open's business (IOR_EXCL is 0x40 = O_CREAT) */
	return set_err(open_file(path, flags & ~(O_CREAT | O_EXCL), 0, 0, 0, 0));
}

int chfs_open_posix(const char *path, int32_t flags, mode_t mode, int chunk_size)
{
	return set_err(open_file(path, flags, mode, chunk_size, 0, 1));
}

int chfs_stat(const char *path, struct stat *st)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_SYNC | NS_RESOLVE, c);
	if (rc == 0)
		md_to_stat(&c->md, c->real, st);
	return set_err(rc);
}

int chfs_lstat(const char *path, struct stat *st)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_SYNC | NS_LOOKUP, c);
	if (rc == 0)
		md_to_stat(&c->md, c->cp, st);
	return set_err(rc);
}

int chfs_mkdir(const char *path, mode_t mode)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_PARENT, c);
	if (rc)
		return set_err(rc);
	const char *cp = c->cp;
	struct srvlist *s = c->s;
	struct chfs_md *md = &c->md;
	md_new(md, S_IFDIR | (mode & 07777), &c->parent);
	RPC_DECL(r);
	for (int again = 0;; again++) {
		rpc_begin(&r, WOP_MKDIR);
		wenc_str(&r.e, cp);
		wenc_md(&r.e, md);
		wenc_u64(&r.e, c->parent.fileid);
		rc = rpc_call_path(s, cp, &r);
		if (rc != -ENOENT || (rc = ns_parent_again(s, cp, &c->parent, again)) != 0)
			break;
	}
	if (rc == 0)
		dir_touch(s, cp, placement_owner(s->ring, cp), 1);
	return set_err(rc);
}

int ns_rmdir_entry(struct srvlist *s, const char *cp)
{
	RPC_DECL(r);
	rpc_begin(&r, WOP_RMDIR);
	wenc_str(&r.e, cp);
	int rc = rpc_call_path(s, cp, &r);
	forget_parent();
	if (rc == 0)
		dir_touch(s, cp, placement_owner(s->ring, cp), -1);
	return rc;
}

int chfs_rmdir(const char *path)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_LOOKUP, c);
	if (rc)
		return set_err(rc);
	const char *cp = c->cp;
	struct srvlist *s = c->s;
	if (rc == 0 && !cp[0])
		rc = -EBUSY;
	if (rc == 0 && !S_ISDIR(c->md.mode))
		rc = -ENOTDIR;
	if (rc == 0)
		rc = may_remove(s, cp, &c->md);
	if (rc == 0) {
		rc = ns_dir_fence(s, cp, c->md.fileid);
		if (rc > 0)
			rc = -ENOTEMPTY;
		if (rc == 0)
			rc = ns_rmdir_entry(s, cp);
		if (rc)
			ns_dir_unfence(s, cp, c->md.fileid);
	}
	return set_err(rc);
}

int chfs_unlink(const char *path)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_SYNC, c);
	if (rc)
		return set_err(rc);
	const char *cp = c->cp;
	struct srvlist *s = c->s;
	struct chfs_md md;
	if (rc == 0 && !cp[0])
		rc = -EISDIR;
	if (rc == 0)
		rc = may_remove(s, cp, NULL);
	if (rc)
		return set_err(rc);
	RPC_DECL(r);
	rpc_begin(&r, WOP_UNLINK);
	wenc_str(&r.e, cp);
	rc = rpc_call_path(s, cp, &r);
	if (rc == 0) {
		wdec_md(&r.d, &md);
		if (wdec_finish(&r.d))
			rc = -EIO;
	}
	if (rc == 0)
		dir_touch(s, cp, placement_owner(s->ring, cp), 0);
	if (rc == 0 && S_ISREG(md.mode) && link_last_name(s, &md))
		last_name_gone(s, &md);
	return set_err(rc);
}

/* Permissions and the target's parent for renaming cf (record md) to ct: removing the name
 * from its directory, adding (or replacing) one in the target's, and, for a directory moved to
 * another parent, write access to it (its ".." changes). *pid: the target parent's file id. */
static int may_rename(struct srvlist *s, const char *cf, const struct chfs_md *md, const char *ct,
                      uint64_t *pid)
{
	struct chfs_md *dir = malloc(sizeof *dir);
	if (!dir)
		return -ENOMEM;
	int rc = check_parent(s, ct, dir);
	*pid = rc == 0 ? dir->fileid : 0;
	if (rc == 0 && !perm_exempt()) {
		rc = may_remove(s, cf, md);
		if (rc == 0)
			rc = perm_sticky_applies(dir) ? may_remove(s, ct, NULL) : perm_dir_change(dir, NULL);
		if (rc == -ENOENT)
			rc = perm_dir_change(dir, NULL); /* nothing to replace */
		PATH_BUF(pf, 2);
		if (rc == 0 && !pf)
			rc = -ENOMEM;
		if (rc == 0 && S_ISDIR(md->mode) && path_split(cf, pf) &&
		    path_split(ct, pf + CHFS_PATH_MAX) && strcmp(pf, pf + CHFS_PATH_MAX))
			rc = perm_access(md, PERM_W);
	}
	free(dir);
	return rc;
}

/* A directory renamed onto an existing name: over anything but a directory ENOTDIR, over a
 * non-empty directory ENOTEMPTY, over an empty one that directory is removed first (two steps,
 * not one: a failure between them leaves the target removed and the source where it was). */
static int replace_dir_target(struct srvlist *s, const char *ct)
{
	struct chfs_md *t = malloc(sizeof *t);
	if (!t)
		return -ENOMEM;
	int rc = ns_lookup(s, ct, t);
	if (rc == 0 && !S_ISDIR(t->mode))
		rc = -ENOTDIR;
	else if (rc == 0) {
		if ((rc = ns_dir_fence(s, ct, t->fileid)) > 0)
			rc = -ENOTEMPTY;
		if (rc == 0)
			rc = ns_rmdir_entry(s, ct);
		if (rc)
			ns_dir_unfence(s, ct, t->fileid);
	}
	free(t);
	return rc == -ENOENT ? 0 : rc;
}

static void rename_fd(struct chfs_file *f, void *arg)
{
	pthread_mutex_lock(&f->lock);
	snprintf(f->path, sizeof f->path, "%s", (const char *)arg);
	pthread_mutex_unlock(&f->lock);
}

int ns_move(struct srvlist *s, const char *cf, const char *ct, const struct chfs_md *md, unsigned how,
            uint64_t pid)
{
	struct chfs_md *old = malloc(sizeof *old); /* the replaced entry's record */
	uint32_t replaced = 0;
	int rc = old ? -ERESTART : -ENOMEM;
	for (int attempt = 0; old; attempt++) {
		unsigned of = placement_owner(s->ring, cf), ot = placement_owner(s->ring, ct);
		RPC_DECL(r);
		if (of == ot) {
			rpc_begin(&r, WOP_RENAME);
			wenc_str(&r.e, cf);
			wenc_str(&r.e, ct);
			wenc_u64(&r.e, pid);
			rc = rpc_call(s, of, &r);
		} else {
			rpc_begin(&r, WOP_INSERT);
			wenc_str(&r.e, ct);
			wenc_md(&r.e, md);
			wenc_u32(&r.e, 0);
			wenc_u64(&r.e, pid);
			rc = rpc_call(s, ot, &r);
		}
		if (rc == -ERESTART && attempt < CLIENT_RETRIES) { /* nothing done: place it again */
			s = client_list_retry(s, of == ot ? of : ot, attempt);
			continue;
		}
		rc = rpc_restart_failed(rc);
		if (rc == 0) {
			replaced = wdec_u32(&r.d);
			wdec_md(&r.d, old);
			if (wdec_finish(&r.d))
				rc = -EIO;
		}
		if (rc == 0 && of != ot) {
			RPC_DECL(r2);
			rpc_begin(&r2, WOP_REMOVE_IF);
			wenc_str(&r2.e, cf);
			wenc_u64(&r2.e, md->fileid);
			rc = rpc_call_path(s, cf, &r2);
		}
		if (rc == 0 && (S_ISDIR(md->mode) || !(how & NS_MOVE_NO_TOUCH))) {
			int isdir = S_ISDIR(md->mode);
			dir_touch(s, ct, ot, isdir);
			dir_touch(s, cf, of, -isdir);
		}
		break;
	}
	if (rc == 0 && replaced && S_ISREG(old->mode) && old->fileid != md->fileid && link_last_name(s, old))
		last_name_gone(s, old);
	free(old);
	if (rc == 0 && md->fileid)
		fd_foreach_fileid(md->fileid, rename_fd, (void *)ct);
	return rc;
}

int chfs_rename(const char *from, const char *to)
{
	PATH_BUF(ct, 1);
	NS_CALL_DECL(c);
	int rc = ct ? canon(to, ct) : -ENOMEM;
	if (rc == 0)
		rc = ns_begin(from, NS_SYNC | NS_LOOKUP, c);
	if (rc)
		return set_err(rc);
	const char *cf = c->cp;
	struct srvlist *s = c->s;
	struct chfs_md *md = &c->md;
	if (!cf[0] || !ct[0])
		return set_err(-EBUSY);
	if (strcmp(cf, ct) == 0)
		return 0;
	size_t lf = strlen(cf);
	if (S_ISDIR(md->mode) && strncmp(ct, cf, lf) == 0 && ct[lf] == '/')
		return set_err(-EINVAL);
	uint64_t pid;
	if ((rc = may_rename(s, cf, md, ct, &pid)) < 0)
		return set_err(rc);
	if (md->flags & MD_LINKED) { /* two names of one file: rename(2) does nothing */
		struct chfs_md *t = malloc(sizeof *t);
		rc = t ? ns_lookup(s, ct, t) : -ENOMEM;
		int same = rc == 0 && t->fileid == md->fileid && (t->flags & MD_LINKED);
		free(t);
		if (same)
			return 0;
	}
	/* A directory by dir_rename: one RENAME when it lists empty, else the walk. */
	if (S_ISDIR(md->mode) && (rc = replace_dir_target(s, ct)) < 0)
		return set_err(rc);
	for (int again = 0;; again++) {
		rc = S_ISDIR(md->mode) ? dir_rename(s, cf, ct, md, pid) : ns_move(s, cf, ct, md, 0, pid);
		if (rc != -ENOENT || ns_lookup(s, cf, md) != 0)
			break; /* (the source gone: ENOENT) */
		/* the target's parent fenced (server/fence.c), or gone */
		struct chfs_md *dir = malloc(sizeof *dir);
		rc = dir ? ns_parent_again(s, ct, dir, again) : -ENOMEM;
		pid = rc == 0 ? dir->fileid : 0;
		free(dir);
		if (rc)
			break;
	}
	forget_parent();
	return set_err(rc);
}

int chfs_symlink(const char *target, const char *path)
{
	struct chfs_md got;
	if (!target || !*target)
		return set_err(-ENOENT);
	if (strlen(target) >= CHFS_LINK_MAX)
		return set_err(-ENAMETOOLONG);
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_PARENT, c);
	if (rc)
		return set_err(rc);
	const char *cp = c->cp;
	struct srvlist *s = c->s;
	struct chfs_md *md = &c->md;
	md_new(md, S_IFLNK | 0777, &c->parent);
	snprintf(md->link, sizeof md->link, "%s", target);
	md->size = strlen(target);
	RPC_DECL(r);
	for (int again = 0;; again++) {
		rpc_begin(&r, WOP_CREATE);
		wenc_str(&r.e, cp);
		wenc_md(&r.e, md);
		wenc_u32(&r.e, WIRE_CREATE_EXCL);
		wenc_u64(&r.e, c->parent.fileid);
		rc = rpc_call_path(s, cp, &r);
		if (rc != -ENOENT || (rc = ns_parent_again(s, cp, &c->parent, again)) != 0)
			break;
	}
	if (rc == 0) {
		wdec_u32(&r.d);
		wdec_md(&r.d, &got);
		dir_touch(s, cp, placement_owner(s->ring, cp), 0);
	}
	return set_err(rc);
}

int chfs_readlink(const char *path, char *buf, size_t size)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_LOOKUP, c);
	if (rc == 0 && !S_ISLNK(c->md.mode))
		rc = -EINVAL;
	if (rc)
		return set_err(rc);
	size_t n = strlen(c->md.link);
	if (n > size)
		n = size;
	memcpy(buf, c->md.link, n);
	return (int)n;
}

/* fd_foreach_fileid callback: *(uint64_t *)arg raised to the end this descriptor wrote. */
static void fd_max_end(struct chfs_file *f, void *arg)
{
	uint64_t *end = arg;
	pthread_mutex_lock(&f->lock);
	if (f->written_end > *end)
		*end = f->written_end;
	pthread_mutex_unlock(&f->lock);
}

/* Set the size of a regular file exactly: the backing files first, then the metadata at the
 * owner. A server that cannot cut (down, unreachable) fails the truncate with the size as it
 * was: the other order recorded the new size while that server kept its chunks past it, bytes
 * a later extension exposed in what must read as a hole (POSIX) once the server was back. */
static int set_size(struct srvlist *s, const char *cp, const struct chfs_md *md, uint64_t len)
{
	uint64_t end = md->size; /* and this process's writes (an open file's md is older) */
	fd_foreach_fileid(md->fileid, fd_max_end, &end);
	int rc = data_truncate_all(s, md, len, end);
	if (rc == 0)
		rc = setattr_size(s, cp, md->fileid, WIRE_SET_SIZE, len);
	if ((rc == -ENOENT || rc == -ESTALE) && md->fileid) {
		/* renamed by another process since we looked (ftruncate of an open file) */
		char *found = malloc(CHFS_PATH_MAX);
		int moved = found ? setattr_size_moved(s, md->fileid, WIRE_SET_SIZE, len, found) : -ENOMEM;
		free(found);
		if (moved != -ENOENT)
			rc = moved;
	}
	return rc;
}

void fd_clamp_size(struct chfs_file *f, void *arg)
{
	uint64_t len = *(uint64_t *)arg;
	pthread_mutex_lock(&f->lock);
	if (f->written_end > len)
		f->written_end = len;
	f->md.size = len;
	pthread_mutex_unlock(&f->lock);
}

int ns_truncate(struct srvlist *s, const char *cp, const struct chfs_md *md, off_t len)
{
	if (len < 0)
		return -EINVAL;
	if (S_ISDIR(md->mode))
		return -EISDIR;
	if (!S_ISREG(md->mode))
		return -EINVAL;
	if ((uint64_t)len > WIRE_MAX_OFFSET)
		return -EFBIG;
	int rc = fd_sync_sizes(md->fileid);
	if (rc == 0)
		rc = set_size(s, cp, md, (uint64_t)len);
	if (rc == 0) {
		uint64_t l = (uint64_t)len;
		fd_foreach_fileid(md->fileid, fd_clamp_size, &l);
	}
	return rc;
}

int chfs_truncate(const char *path, off_t len)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_RESOLVE, c);
	if (rc == 0 && !S_ISDIR(c->md.mode))
		rc = perm_access(&c->md, PERM_W);
	if (rc == 0)
		rc = ns_truncate(c->s, c->real, &c->md, len);
	return set_err(rc);
}
