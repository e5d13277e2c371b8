/*
 * ns_store.c — the namespace records of one server (see ns_store.h for the tree layout).
 *
 * Three mechanisms, each here once:
 *   - Confinement. A client path becomes a relative name under ns/ ("a/b" -> "_a/_b",
 *     ns_rel) and is opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from the ns/
 *     fd, leaves with O_NOFOLLOW, so no path, and no symlink planted inside the storage
 *     directory, names anything outside it.
 *   - Atomic records. A record is never rewritten in place: rec_put() writes a temporary file
 *     (".tmp.<random>": no '_' prefix, so invisible to readdir) and renames it over the name
 *     (RENAME_NOREPLACE for creation). Lock-free readers (stat, readdir) see a whole record, old
 *     or new, even across a crash. Bytes of a record are record_codec.c's business.
 *   - Path locks. Read-modify-write of one entry happens under one of NLOCKS mutexes chosen by
 *     the path's hash; a rename takes both paths' locks in address order. Everything else
 *     relies on the atomicity of single file-system calls.
 */
#define _GNU_SOURCE
#include "ns_store.h"

#include "data_store.h"
#include "placement.h"
#include "record_codec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NLOCKS 64
#define META ".meta"

struct ns_store {
	int nsfd;
	pthread_mutex_t locks[NLOCKS];
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	                       .mode = (flags & O_CREAT) ? mode : 0,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
	return fd < 0 ? -errno : (int)fd;
}

int ns_open_store(int rootfd, struct ns_store **out)
{
	struct ns_store *ns = calloc(1, sizeof *ns);
	if (!ns)
		return -ENOMEM;
	if (mkdirat(rootfd, "ns", 0700) < 0 && errno != EEXIST) {
		int e = -errno;
		free(ns);
		return e;
	}
	ns->nsfd = open_beneath(rootfd, "ns", O_DIRECTORY | O_RDONLY, 0);
	if (ns->nsfd < 0) {
		int e = ns->nsfd;
		free(ns);
		return e;
	}
	for (int i = 0; i < NLOCKS; i++)
		pthread_mutex_init(&ns->locks[i], NULL);
	*out = ns;
	return 0;
}

void ns_close_store(struct ns_store *ns)
{
	if (!ns)
		return;
	close(ns->nsfd);
	free(ns);
}

static pthread_mutex_t *lock_of(struct ns_store *ns, const char *path)
{
	return &ns->locks[chfs_hash_str(path) % NLOCKS];
}

/* "a/b/c" -> "_a/_b/_c" (for the first `ncomp` bytes of path). */
static int ns_rel(const char *path, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	if (n == 0) {
		snprintf(out, cap, ".");
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || path[i - 1] == '/') {
			if (o + 1 >= cap)
				return -ENAMETOOLONG;
			out[o++] = '_';
		}
		if (o + 1 >= cap)
			return -ENAMETOOLONG;
		out[o++] = path[i];
	}
	out[o] = '\0';
	return o >= 4096 ? -ENAMETOOLONG : 0;
}

/* Open the directory holding `path`'s entry; leaf gets "_name". With mkparents, implicit parent
 * directories are created on the way. */
static int ns_parent(struct ns_store *ns, const char *path, int mkparents, char *leaf)
{
	const char *slash = strrchr(path, '/');
	size_t plen = slash ? (size_t)(slash - path) : 0;
	const char *name = slash ? slash + 1 : path;
	char rel[CHFS_PATH_MAX * 2];
	int rc;
	if (strlen(name) > CHFS_NAME_MAX)
		return -ENAMETOOLONG;
	leaf[0] = '_';
	strcpy(leaf + 1, name);
	if ((rc = ns_rel(path, plen, rel, sizeof rel)) < 0)
		return rc;
	int fd = open_beneath(ns->nsfd, rel, O_DIRECTORY | O_RDONLY, 0);
	if (fd != -ENOENT || !mkparents)
		return fd;
	/* Create the missing parents one component at a time. */
	int cur = dup(ns->nsfd);
	const char *p = path;
	while (cur >= 0 && p < path + plen) {
		const char *e = memchr(p, '/', (size_t)(path + plen - p));
		size_t n = e ? (size_t)(e - p) : (size_t)(path + plen - p);
		char comp[CHFS_NAME_MAX + 2];
		comp[0] = '_';
		memcpy(comp + 1, p, n);
		comp[n + 1] = '\0';
		if (mkdirat(cur, comp, 0700) < 0 && errno != EEXIST) {
			rc = -errno;
			close(cur);
			return rc;
		}
		int next = open_beneath(cur, comp, O_DIRECTORY | O_RDONLY, 0);
		close(cur);
		if (next < 0)
			return next == -ELOOP || next == -EXDEV ? -ENOTDIR : next;
		cur = next;
		p += n + 1;
	}
	return cur;
}

/* A record file's content is decoded whole: one byte more than the longest record is read, so
 * an overlong file fails the decoder's length check instead of being cut to a valid prefix. */
static int rec_read_fd(int fd, struct chfs_md *md)
{
	uint8_t buf[RECORD_MAX_LEN + 1];
	ssize_t n = pread(fd, buf, sizeof buf, 0);
	if (n < 0)
		return -errno;
	return record_decode(buf, (size_t)n, md) ? -EIO : 0;
}

static int rec_write_fd(int fd, const struct chfs_md *md)
{
	uint8_t buf[RECORD_MAX_LEN];
	size_t len;
	int rc = record_encode(md, buf, sizeof buf, &len);
	if (rc)
		return rc;
	if (pwrite(fd, buf, len, 0) != (ssize_t)len)
		return -EIO;
	return 0;
}

/* Write md as record `name` of dfd: a new temporary file, then rename over the name. Readers
 * take no lock, and a record rewritten in place could be read half old, half new (or, after a
 * crash, stay so); with the rename every reader sees a whole old or a whole new record. With
 * noreplace an existing name gives -EEXIST (creation under the path lock). */
static int rec_put(int dfd, const char *name, const struct chfs_md *md, int noreplace)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, ".tmp.%016llx", (unsigned long long)ds_new_fileid());
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int rc = rec_write_fd(fd, md);
	close(fd);
	if (rc == 0 && renameat2(dfd, tmp, dfd, name, noreplace ? RENAME_NOREPLACE : 0) < 0)
		rc = -errno;
	if (rc)
		unlinkat(dfd, tmp, 0);
	return rc;
}

/* Read the entry `leaf` in dfd: a record file, or an owned directory's .meta. -ENOENT for
 * absent or implicit entries. *isdir tells which. */
static int rec_read(int dfd, const char *leaf, struct chfs_md *md, int *isdir)
{
	int fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EIO : -errno;
	struct stat sb;
	int rc;
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
	} else if (S_ISDIR(sb.st_mode)) {
		*isdir = 1;
		int mfd = openat(fd, META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		rc = mfd < 0 ? -errno : rec_read_fd(mfd, md);
		if (mfd >= 0)
			close(mfd);
	} else if (S_ISREG(sb.st_mode)) {
		*isdir = 0;
		rc = rec_read_fd(fd, md);
	} else {
		rc = -EIO;
	}
	close(fd);
	return rc;
}

static int rec_write(int dfd, const char *leaf, int isdir, const struct chfs_md *md)
{
	if (!isdir)
		return rec_put(dfd, leaf, md, 0);
	int d = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return -errno;
	int rc = rec_put(d, META, md, 0);
	close(d);
	return rc;
}

static void root_md(struct chfs_md *md)
{
	memset(md, 0, sizeof *md);
	md->mode = S_IFDIR | 01777;
	md->chunk_size = 65536;
}

/* Remove an implicit (no .meta) directory if it is empty; -EEXIST otherwise. */
static int drop_implicit(int dfd, const char *leaf)
{
	if (unlinkat(dfd, leaf, AT_REMOVEDIR) == 0)
		return 0;
	return errno == ENOTEMPTY || errno == EEXIST ? -EEXIST : -errno;
}

int ns_create(struct ns_store *ns, const char *path, const struct chfs_md *in, int excl, struct chfs_md *out,
              int *existed)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc, dfd = ns_parent(ns, path, 1, leaf);
	if (dfd < 0) {
		rc = dfd;
		goto out;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		*out = *in;
		out->fileid = ds_new_fileid(); /* never the client's choice */
		rc = rec_put(dfd, leaf, out, 1);
		if (rc != -EEXIST) {
			*existed = 0;
			goto out_fd;
		}
		int isdir = 0;
		rc = rec_read(dfd, leaf, out, &isdir);
		if (rc == -ENOENT && isdir && attempt == 0) {
			if ((rc = drop_implicit(dfd, leaf)) < 0)
				goto out_fd;
			continue;
		}
		if (rc)
			goto out_fd;
		if (isdir) {
			rc = -EISDIR;
		} else if (excl) {
			rc = -EEXIST;
		} else if (S_ISLNK(out->mode)) {
			rc = -EEXIST;
		} else {
			out->size = 0;
			out->mtime_ns = out->ctime_ns = now_ns();
			rc = rec_write(dfd, leaf, 0, out);
			*existed = 1;
		}
		goto out_fd;
	}
	rc = -EEXIST;
out_fd:
	close(dfd);
out:
	pthread_mutex_unlock(l);
	return rc;
}

int ns_lookup(struct ns_store *ns, const char *path, struct chfs_md *out)
{
	char leaf[CHFS_NAME_MAX + 2];
	if (!*path) {
		root_md(out);
		return 0;
	}
	int dfd = ns_parent(ns, path, 0, leaf);
	if (dfd < 0)
		return dfd == -ENOTDIR || dfd == -ELOOP || dfd == -EXDEV ? -ENOENT : dfd;
	int isdir = 0, rc = rec_read(dfd, leaf, out, &isdir);
	close(dfd);
	return rc == -ENOTDIR ? -ENOENT : rc;
}

int ns_mkdir(struct ns_store *ns, const char *path, const struct chfs_md *in)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc, dfd = ns_parent(ns, path, 1, leaf);
	if (dfd < 0) {
		rc = dfd;
		goto out;
	}
	if (mkdirat(dfd, leaf, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		goto out_fd;
	}
	int d = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0) {
		rc = errno == ENOTDIR || errno == ELOOP ? -EEXIST : -errno;
		goto out_fd;
	}
	rc = rec_put(d, META, in, 1);
	close(d);
out_fd:
	close(dfd);
out:
	pthread_mutex_unlock(l);
	return rc;
}

int ns_rmdir(struct ns_store *ns, const char *path)
{
	char leaf[CHFS_NAME_MAX + 2];
	struct chfs_md md;
	if (!*path)
		return -EBUSY;
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(ns, path, 0, leaf);
	if (dfd < 0) {
		rc = dfd == -ENOTDIR ? -ENOENT : dfd;
		goto out;
	}
	rc = rec_read(dfd, leaf, &md, &isdir);
	if (rc == 0 && !isdir)
		rc = -ENOTDIR;
	if (rc == 0) {
		int d = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (d < 0 || unlinkat(d, META, 0) < 0)
			rc = -errno;
		if (d >= 0)
			close(d);
		if (rc == 0)
			unlinkat(dfd, leaf, AT_REMOVEDIR); /* stays as an implicit dir if not empty */
	}
	close(dfd);
out:
	pthread_mutex_unlock(l);
	return rc;
}

static int dir_has_entries_fd(int fd)
{
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(dp)) != NULL) {
		if (de->d_name[0] != '_')
			continue;
		struct stat sb;
		if (fstatat(dirfd(dp), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISDIR(sb.st_mode)) {
			found = 1;
			break;
		}
		int sub = openat(dirfd(dp), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		if (faccessat(sub, META, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
			found = 1;
			close(sub);
		} else {
			found = dir_has_entries_fd(sub) > 0;
		}
	}
	closedir(dp);
	return found;
}

int ns_dir_has_entries(struct ns_store *ns, const char *path)
{
	char rel[CHFS_PATH_MAX * 2];
	int rc = ns_rel(path, strlen(path), rel, sizeof rel);
	if (rc < 0)
		return rc;
	int fd = open_beneath(ns->nsfd, rel, O_DIRECTORY | O_RDONLY, 0);
	if (fd < 0)
		return fd == -ENOENT || fd == -ENOTDIR ? 0 : fd;
	return dir_has_entries_fd(fd);
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int ns_readdir(struct ns_store *ns, const char *path, const char *cursor, ns_readdir_fn fn, void *arg,
               int *eof)
{
	char rel[CHFS_PATH_MAX * 2];
	int rc = ns_rel(path, strlen(path), rel, sizeof rel);
	*eof = 1;
	if (rc < 0)
		return rc;
	int fd = open_beneath(ns->nsfd, rel, O_DIRECTORY | O_RDONLY, 0);
	if (fd < 0)
		return fd == -ENOENT || fd == -ENOTDIR ? 0 : fd;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -ENOMEM;
	}
	size_t n = 0, cap = 256;
	char **names = malloc(cap * sizeof *names);
	struct dirent *de;
	rc = 0;
	while (names && (de = readdir(dp)) != NULL) {
		if (de->d_name[0] != '_' || strcmp(de->d_name + 1, cursor) <= 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap *= 2) * sizeof *names);
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	if (!names)
		rc = -ENOMEM;
	if (rc == 0) {
		qsort(names, n, sizeof *names, name_cmp);
		struct chfs_md md;
		for (size_t i = 0; i < n; i++) {
			int isdir = 0;
			if (rec_read(dirfd(dp), names[i], &md, &isdir) < 0)
				continue; /* implicit directory or vanished entry */
			if (fn(arg, names[i] + 1, &md)) {
				*eof = 0;
				break;
			}
		}
	}
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	closedir(dp);
	return rc;
}

int ns_unlink(struct ns_store *ns, const char *path, struct chfs_md *old)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(ns, path, 0, leaf);
	if (dfd < 0) {
		rc = dfd == -ENOTDIR ? -ENOENT : dfd;
		goto out;
	}
	rc = rec_read(dfd, leaf, old, &isdir);
	if (rc == 0 && isdir)
		rc = -EISDIR;
	if (rc == 0 && unlinkat(dfd, leaf, 0) < 0)
		rc = -errno;
	close(dfd);
out:
	pthread_mutex_unlock(l);
	return rc;
}

/* Write md as entry leaf of dfd, replacing a file/symlink entry atomically (temp + rename).
 * Reports the replaced record. Caller holds the path lock. */
static int put_entry(int dfd, const char *leaf, const struct chfs_md *md, int noreplace, struct chfs_md *old,
                     int *replaced)
{
	int isdir = 0, rc = rec_read(dfd, leaf, old, &isdir);
	*replaced = 0;
	if (rc == 0) {
		if (noreplace || isdir || S_ISDIR(md->mode))
			return isdir && !S_ISDIR(md->mode) ? -EISDIR : -EEXIST;
		*replaced = 1;
	} else if (rc == -ENOENT && isdir) {
		if ((rc = drop_implicit(dfd, leaf)) < 0)
			return rc;
	} else if (rc != -ENOENT) {
		return rc;
	}
	if (S_ISDIR(md->mode)) {
		if (mkdirat(dfd, leaf, 0700) < 0)
			return -errno;
		return rec_write(dfd, leaf, 1, md);
	}
	return rec_put(dfd, leaf, md, 0);
}

int ns_insert(struct ns_store *ns, const char *path, const struct chfs_md *md, int noreplace,
              struct chfs_md *old, int *replaced)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc = ns_parent(ns, path, 1, leaf);
	if (rc >= 0) {
		int dfd = rc;
		rc = put_entry(dfd, leaf, md, noreplace, old, replaced);
		close(dfd);
	}
	pthread_mutex_unlock(l);
	return rc;
}

/* Remove the entry (file record, or an owned directory's record) under the path lock. */
static int remove_entry(int dfd, const char *leaf, int isdir)
{
	if (!isdir)
		return unlinkat(dfd, leaf, 0) < 0 ? -errno : 0;
	int d = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return -errno;
	int rc = unlinkat(d, META, 0) < 0 ? -errno : 0;
	close(d);
	if (rc == 0)
		unlinkat(dfd, leaf, AT_REMOVEDIR);
	return rc;
}

int ns_remove_if(struct ns_store *ns, const char *path, uint64_t fileid)
{
	char leaf[CHFS_NAME_MAX + 2];
	struct chfs_md md;
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(ns, path, 0, leaf);
	if (dfd < 0) {
		rc = dfd == -ENOTDIR ? -ENOENT : dfd;
		goto out;
	}
	rc = rec_read(dfd, leaf, &md, &isdir);
	if (rc == 0 && md.fileid != fileid)
		rc = -ESTALE;
	if (rc == 0)
		rc = remove_entry(dfd, leaf, isdir);
	close(dfd);
out:
	pthread_mutex_unlock(l);
	return rc;
}

int ns_rename(struct ns_store *ns, const char *from, const char *to, struct chfs_md *old, int *replaced)
{
	char lf[CHFS_NAME_MAX + 2], lt[CHFS_NAME_MAX + 2];
	struct chfs_md md;
	pthread_mutex_t *a = lock_of(ns, from), *b = lock_of(ns, to);
	if (a > b) {
		pthread_mutex_t *t = a;
		a = b;
		b = t;
	}
	pthread_mutex_lock(a);
	if (b != a)
		pthread_mutex_lock(b);
	int rc, isdir = 0, fd_from = -1, fd_to = -1;
	*replaced = 0;
	fd_from = ns_parent(ns, from, 0, lf);
	if (fd_from < 0) {
		rc = fd_from == -ENOTDIR ? -ENOENT : fd_from;
		goto out;
	}
	if ((rc = rec_read(fd_from, lf, &md, &isdir)) < 0)
		goto out;
	if ((fd_to = ns_parent(ns, to, 1, lt)) < 0) {
		rc = fd_to;
		goto out;
	}
	if (strcmp(from, to) == 0)
		goto out;
	rc = put_entry(fd_to, lt, &md, 0, old, replaced);
	if (rc == 0)
		rc = remove_entry(fd_from, lf, isdir);
out:
	if (fd_from >= 0)
		close(fd_from);
	if (fd_to >= 0)
		close(fd_to);
	if (b != a)
		pthread_mutex_unlock(b);
	pthread_mutex_unlock(a);
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
	md->ctime_ns = now;
}

int ns_setattr(struct ns_store *ns, const char *path, uint64_t fileid, const struct wire_setattr *a,
               struct chfs_md *out)
{
	uint32_t which = a->which;
	char leaf[CHFS_NAME_MAX + 2];
	if (!*path)
		return -EPERM;
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(ns, path, 0, leaf);
	if (dfd < 0) {
		rc = dfd == -ENOTDIR ? -ENOENT : dfd;
		goto out;
	}
	if ((rc = rec_read(dfd, leaf, out, &isdir)) == 0) {
		if (fileid && out->fileid != fileid)
			rc = -ESTALE;
		else if ((which & (WIRE_SET_SIZE | WIRE_SET_SIZE_MAX)) && !S_ISREG(out->mode))
			rc = isdir ? -EISDIR : -EINVAL;
	}
	if (rc == 0) {
		apply_setattr(out, a, now_ns());
		rc = rec_write(dfd, leaf, isdir, out);
	}
	close(dfd);
out:
	pthread_mutex_unlock(l);
	return rc;
}

/* ---- rebalance: every entry held here, and taking over an entry from its previous owner ---- */

struct walk_ctx {
	ns_walk_fn fn;
	void *arg;
	char path[CHFS_PATH_MAX];
};

/* Visit the entries of directory fd, whose CHFS path is c->path[0..plen). Closes fd. */
static int walk_dir(struct walk_ctx *c, int fd, size_t plen, int depth)
{
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(dp)) != NULL) {
		if (de->d_name[0] != '_')
			continue;
		size_t n = strlen(de->d_name + 1);
		if (plen + 1 + n >= sizeof c->path)
			continue;
		size_t o = plen;
		if (plen)
			c->path[o++] = '/';
		memcpy(c->path + o, de->d_name + 1, n + 1);
		struct chfs_md md;
		int isdir = 0;
		if (rec_read(dirfd(dp), de->d_name, &md, &isdir) == 0)
			rc = c->fn(c->arg, c->path, &md);
		if (rc == 0 && depth < CHFS_PATH_MAX / 2) {
			int sub = openat(dirfd(dp), de->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				rc = walk_dir(c, sub, o + n, depth + 1);
		}
		c->path[plen] = '\0';
	}
	closedir(dp);
	return rc;
}

int ns_walk(struct ns_store *ns, ns_walk_fn fn, void *arg)
{
	struct walk_ctx *c = malloc(sizeof *c);
	if (!c)
		return -ENOMEM;
	c->fn = fn;
	c->arg = arg;
	c->path[0] = '\0';
	/* A new open file description: a dup() would share (and start at) the directory offset
	 * an earlier walk left at the end. */
	int fd = openat(ns->nsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = fd < 0 ? -errno : walk_dir(c, fd, 0, 0);
	free(c);
	return rc;
}

int ns_adopt(struct ns_store *ns, const char *path, const struct chfs_md *md)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(ns, path);
	pthread_mutex_lock(l);
	int rc = ns_parent(ns, path, 1, leaf);
	if (rc >= 0) {
		int dfd = rc;
		if (S_ISDIR(md->mode)) {
			/* An implicit directory (entries below it already here) takes the record. */
			if (mkdirat(dfd, leaf, 0700) < 0 && errno != EEXIST) {
				rc = -errno;
			} else {
				int d = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				rc = d < 0 ? (errno == ENOTDIR ? -EEXIST : -errno) : rec_put(d, META, md, 1);
				if (d >= 0)
					close(d);
			}
		} else {
			struct chfs_md old;
			int replaced;
			rc = put_entry(dfd, leaf, md, 1, &old, &replaced);
		}
		close(dfd);
	}
	pthread_mutex_unlock(l);
	return rc;
}
