/*
 * storage.c — see storage.h for the layout. Records are encoded with the wire encoder behind a
 * 4-byte magic ("CMD1"), so the on-disk format is versioned like the wire format. A record is
 * never rewritten in place: rec_put() writes a temporary file and renames it over the name, so
 * lock-free readers (stat, readdir) see a whole record, old or new, even across a crash.
 */
#define _GNU_SOURCE
#include "storage.h"

#include "placement.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REC_MAGIC 0x31444d43u /* "CMD1" */
#define REC_MAX (64 + CHFS_PATH_MAX + WIRE_ADDR_MAX + 64)
#define NLOCKS 64
#define META ".meta"

struct storage {
	char root[4096];
	int rootfd, nsfd, datafd;
	pthread_mutex_t locks[NLOCKS];
};

int64_t st_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t st_new_fileid(void)
{
	uint64_t id = 0;
	while (id == 0)
		if (getrandom(&id, sizeof id, 0) != sizeof id)
			id = (uint64_t)st_now_ns() ^ ((uint64_t)getpid() << 32);
	return id;
}

static int open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	                       .mode = (flags & O_CREAT) ? mode : 0,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	                                  RESOLVE_NO_MAGICLINKS};
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
	return fd < 0 ? -errno : (int)fd;
}

int st_open(const char *dir, struct storage **out)
{
	struct storage *st = calloc(1, sizeof *st);
	if (!st)
		return -ENOMEM;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		goto fail;
	if (!realpath(dir, st->root))
		goto fail;
	st->rootfd = open(st->root, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (st->rootfd < 0)
		goto fail;
	if ((mkdirat(st->rootfd, "ns", 0700) < 0 && errno != EEXIST) ||
	    (mkdirat(st->rootfd, "data", 0700) < 0 && errno != EEXIST))
		goto fail;
	st->nsfd = open_beneath(st->rootfd, "ns", O_DIRECTORY | O_RDONLY, 0);
	st->datafd = open_beneath(st->rootfd, "data", O_DIRECTORY | O_RDONLY, 0);
	if (st->nsfd < 0 || st->datafd < 0) {
		errno = st->nsfd < 0 ? -st->nsfd : -st->datafd;
		goto fail;
	}
	for (int i = 0; i < NLOCKS; i++)
		pthread_mutex_init(&st->locks[i], NULL);
	*out = st;
	return 0;
fail:;
	int e = errno ? errno : EIO;
	free(st);
	return -e;
}

void st_close(struct storage *st)
{
	if (!st)
		return;
	close(st->nsfd);
	close(st->datafd);
	close(st->rootfd);
	free(st);
}

const char *st_root(const struct storage *st) { return st->root; }
int st_rootfd(const struct storage *st) { return st->rootfd; }

static pthread_mutex_t *lock_of(struct storage *st, const char *path)
{
	return &st->locks[chfs_hash_str(path) % NLOCKS];
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
static int ns_parent(struct storage *st, const char *path, int mkparents, char *leaf)
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
	int fd = open_beneath(st->nsfd, rel, O_DIRECTORY | O_RDONLY, 0);
	if (fd != -ENOENT || !mkparents)
		return fd;
	/* Create the missing parents one component at a time. */
	int cur = dup(st->nsfd);
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

static int rec_decode(const uint8_t *buf, size_t n, struct chfs_md *md)
{
	struct wdec d;
	wdec_init(&d, buf, n);
	if (wdec_u32(&d) != REC_MAGIC)
		return -EIO;
	wdec_md(&d, md);
	return wdec_finish(&d) ? -EIO : 0;
}

static int rec_read_fd(int fd, struct chfs_md *md)
{
	uint8_t buf[REC_MAX];
	ssize_t n = pread(fd, buf, sizeof buf, 0);
	if (n < 0)
		return -errno;
	return rec_decode(buf, (size_t)n, md);
}

static int rec_write_fd(int fd, const struct chfs_md *md)
{
	uint8_t buf[REC_MAX];
	struct wenc e;
	wenc_init(&e, buf, sizeof buf);
	wenc_u32(&e, REC_MAGIC);
	wenc_md(&e, md);
	if (e.err)
		return e.err;
	if (pwrite(fd, buf, e.len, 0) != (ssize_t)e.len)
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
	snprintf(tmp, sizeof tmp, ".tmp.%016llx", (unsigned long long)st_new_fileid());
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

int st_create(struct storage *st, const char *path, const struct chfs_md *in, int excl,
              struct chfs_md *out, int *existed)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(st, path);
	pthread_mutex_lock(l);
	int rc, dfd = ns_parent(st, path, 1, leaf);
	if (dfd < 0) {
		rc = dfd;
		goto out;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		*out = *in;
		out->fileid = st_new_fileid(); /* never the client's choice */
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
			out->mtime_ns = out->ctime_ns = st_now_ns();
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

int st_lookup(struct storage *st, const char *path, struct chfs_md *out)
{
	char leaf[CHFS_NAME_MAX + 2];
	if (!*path) {
		root_md(out);
		return 0;
	}
	int dfd = ns_parent(st, path, 0, leaf);
	if (dfd < 0)
		return dfd == -ENOTDIR || dfd == -ELOOP || dfd == -EXDEV ? -ENOENT : dfd;
	int isdir = 0, rc = rec_read(dfd, leaf, out, &isdir);
	close(dfd);
	return rc == -ENOTDIR ? -ENOENT : rc;
}

int st_mkdir(struct storage *st, const char *path, const struct chfs_md *in)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(st, path);
	pthread_mutex_lock(l);
	int rc, dfd = ns_parent(st, path, 1, leaf);
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

int st_rmdir(struct storage *st, const char *path)
{
	char leaf[CHFS_NAME_MAX + 2];
	struct chfs_md md;
	if (!*path)
		return -EBUSY;
	pthread_mutex_t *l = lock_of(st, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(st, path, 0, leaf);
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

int st_dir_has_entries(struct storage *st, const char *path)
{
	char rel[CHFS_PATH_MAX * 2];
	int rc = ns_rel(path, strlen(path), rel, sizeof rel);
	if (rc < 0)
		return rc;
	int fd = open_beneath(st->nsfd, rel, O_DIRECTORY | O_RDONLY, 0);
	if (fd < 0)
		return fd == -ENOENT || fd == -ENOTDIR ? 0 : fd;
	return dir_has_entries_fd(fd);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int st_readdir(struct storage *st, const char *path, const char *cursor, st_readdir_fn fn,
               void *arg, int *eof)
{
	char rel[CHFS_PATH_MAX * 2];
	int rc = ns_rel(path, strlen(path), rel, sizeof rel);
	*eof = 1;
	if (rc < 0)
		return rc;
	int fd = open_beneath(st->nsfd, rel, O_DIRECTORY | O_RDONLY, 0);
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

int st_unlink(struct storage *st, const char *path, struct chfs_md *old)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(st, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(st, path, 0, leaf);
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
static int put_entry(int dfd, const char *leaf, const struct chfs_md *md, int noreplace,
                     struct chfs_md *old, int *replaced)
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

int st_insert(struct storage *st, const char *path, const struct chfs_md *md, int noreplace,
              struct chfs_md *old, int *replaced)
{
	char leaf[CHFS_NAME_MAX + 2];
	pthread_mutex_t *l = lock_of(st, path);
	pthread_mutex_lock(l);
	int rc = ns_parent(st, path, 1, leaf);
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

int st_remove_if(struct storage *st, const char *path, uint64_t fileid)
{
	char leaf[CHFS_NAME_MAX + 2];
	struct chfs_md md;
	pthread_mutex_t *l = lock_of(st, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(st, path, 0, leaf);
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

int st_rename(struct storage *st, const char *from, const char *to, struct chfs_md *old,
              int *replaced)
{
	char lf[CHFS_NAME_MAX + 2], lt[CHFS_NAME_MAX + 2];
	struct chfs_md md;
	pthread_mutex_t *a = lock_of(st, from), *b = lock_of(st, to);
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
	fd_from = ns_parent(st, from, 0, lf);
	if (fd_from < 0) {
		rc = fd_from == -ENOTDIR ? -ENOENT : fd_from;
		goto out;
	}
	if ((rc = rec_read(fd_from, lf, &md, &isdir)) < 0)
		goto out;
	if ((fd_to = ns_parent(st, to, 1, lt)) < 0) {
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

int st_setattr(struct storage *st, const char *path, uint64_t fileid, uint32_t which,
               uint32_t mode, int64_t atime_ns, int64_t mtime_ns, uint64_t size,
               struct chfs_md *out)
{
	char leaf[CHFS_NAME_MAX + 2];
	if (!*path)
		return -EPERM;
	pthread_mutex_t *l = lock_of(st, path);
	pthread_mutex_lock(l);
	int rc, isdir = 0, dfd = ns_parent(st, path, 0, leaf);
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
		int64_t now = st_now_ns();
		if (which & WIRE_SET_MODE)
			out->mode = (out->mode & S_IFMT) | (mode & 07777);
		if (which & WIRE_SET_ATIME)
			out->atime_ns = atime_ns;
		if (which & WIRE_SET_MTIME)
			out->mtime_ns = mtime_ns;
		if (which & WIRE_SET_SIZE_MAX) {
			if (size > out->size)
				out->size = size;
			out->mtime_ns = now;
		}
		if (which & WIRE_SET_SIZE) {
			out->size = size;
			out->mtime_ns = now;
		}
		out->ctime_ns = now;
		rc = rec_write(dfd, leaf, isdir, out);
	}
	close(dfd);
out:
	pthread_mutex_unlock(l);
	return rc;
}

/* ---- backing files ---- */
static void data_name(uint64_t fileid, char *buf)
{
	snprintf(buf, 17, "%016llx", (unsigned long long)fileid);
}

int st_data_open(struct storage *st, uint64_t fileid, int create)
{
	char name[17];
	if (!fileid)
		return -EINVAL;
	data_name(fileid, name);
	int fd = openat(st->datafd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0),
	                0600);
	return fd < 0 ? -errno : fd;
}

int st_data_truncate(struct storage *st, uint64_t fileid, uint64_t len)
{
	int fd = st_data_open(st, fileid, 0);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	struct stat sb;
	int rc = 0;
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	/* Exact size both ways: a node-local file's backing file is read directly (FUSE
	 * passthrough, hook fast path), so an extending truncate must extend it too. For striped
	 * files the sparse extension reads as the zeros the file holds there anyway. */
	else if ((uint64_t)sb.st_size != len && ftruncate(fd, (off_t)len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int st_data_remove(struct storage *st, uint64_t fileid)
{
	char name[17];
	data_name(fileid, name);
	if (unlinkat(st->datafd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int st_data_stat(struct storage *st, uint64_t fileid, uint64_t *size, int64_t *mtime_ns)
{
	char name[17];
	struct stat sb;
	data_name(fileid, name);
	if (fstatat(st->datafd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		*size = 0;
		*mtime_ns = 0;
		return errno == ENOENT ? 0 : -errno;
	}
	*size = (uint64_t)sb.st_size;
	*mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
	return 0;
}

int st_data_path(struct storage *st, uint64_t fileid, char *buf, size_t size)
{
	char name[17];
	int fd = st_data_open(st, fileid, 1);
	if (fd < 0)
		return fd;
	close(fd);
	data_name(fileid, name);
	if ((size_t)snprintf(buf, size, "%s/data/%s", st->root, name) >= size)
		return -ENAMETOOLONG;
	return 0;
}
