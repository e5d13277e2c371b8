/* chfs_serve.c — the libchfs side of the seccomp and ptrace methods: CHFS paths under a chfs:
 * mapping, served to the tracee by the supervisor or tracer (see chfs_serve.h; chfs_route.c is
 * the part both methods share in front of it).
 *
 * Files are staged whole. open() opens the CHFS file with the tracee's flags (chfs_open_posix:
 * O_CREAT, O_EXCL, O_TRUNC as on a local file system), copies its bytes into a memfd, and hands
 * back a fresh open of that memfd with the tracee's access mode and O_APPEND; the method
 * injects it at a number >= CJ_CHFS_FD_MIN. From then on read, write, lseek, mmap, fstat and
 * dup run in the kernel at native speed. A file opened for writing keeps a reference here and is
 * written back to CHFS (truncate + whole rewrite) each time the tracee closes a descriptor of it
 * (close() of the reserved range is trapped, and dup2/dup3 onto any descriptor) and once more at the end of the job if it changed
 * since (descriptors handed on by dup2/fork and closed at exit); a file's pending writes also go
 * back before any later open, stat, rename or removal of its path by the job. This is close-to-open
 * consistency: another process sees the bytes after the writer's close; two writers of one file
 * each write their whole copy back, the last close wins. A file must fit in memory.
 *
 * A directory open stages its listing: the private local directory STAGE/path holding one empty
 * entry of the same type per name (files, directories, symbolic links), so getdents64 answers
 * from the kernel. chfs_route.c maps STAGE itself to chfs:/ in the policy, so a call relative
 * to such a descriptor (find's openat(dirfd, name), fstatat) is served from CHFS again and never
 * sees the empty placeholders.
 *
 * stat/lstat/newfstatat/statx, readlink, access, mkdir, rmdir, unlink, rename, chmod,
 * truncate and utimensat are answered with the matching chfs_* call; the rest (statfs, link,
 * mknod, chown, execve, chdir, xattrs) fail with EXDEV or EOPNOTSUPP. */
#define _GNU_SOURCE
#include "chfs_serve.h"
#include "tracee.h"

#include <chfs.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef SYS_faccessat2
#define SYS_faccessat2 439
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

#define BUF_SIZE (1 << 20)

struct staged {
	char *path;  /* CHFS path */
	int memfd;   /* our reference: the bytes the tracee sees */
	mode_t mode; /* to re-create the file if it vanished */
	ino_t ino;   /* memfd's inode: how a closed descriptor is recognised */
	off_t size;  /* at the last write-back (or stage-in) */
	struct timespec mtime;
};

struct cj_chfs {
	struct staged *files;
	int nfiles, capfiles;
	char *buf;     /* BUF_SIZE bytes for copies */
	char dirs[64]; /* private directory of staged listings: STAGE/path for CHFS path */
	bool failed;
};

struct cj_chfs *cj_chfs_start(char *err, size_t len)
{
	const char *srv = getenv("CHFS_SERVER");
	if (!srv || !*srv) {
		snprintf(err, len, "chfs: mappings need the pool: CHFS_SERVER is not set");
		return NULL;
	}
	if (chfs_init(NULL) < 0) {
		snprintf(err, len, "cannot reach the CHFS pool at %s: %s", srv, strerror(errno));
		return NULL;
	}
	struct cj_chfs *c = calloc(1, sizeof(*c));
	if (c)
		c->buf = malloc(BUF_SIZE);
	const char *tmp = getenv("TMPDIR");
	if (c)
		snprintf(c->dirs, sizeof(c->dirs), "%s/chfs-job-dirs-XXXXXX",
		         tmp && *tmp && strlen(tmp) < 30 ? tmp : "/tmp");
	if (!c || !c->buf || !mkdtemp(c->dirs)) {
		if (c)
			free(c->buf);
		free(c);
		chfs_term();
		snprintf(err, len, "cannot make the directory of staged listings: %s", strerror(errno));
		return NULL;
	}
	return c;
}

/* Write staged file e back to CHFS (force: even if unchanged since the last time). */
static void write_back(struct cj_chfs *c, struct staged *e, bool force)
{
	struct stat st;
	if (fstat(e->memfd, &st) < 0)
		return;
	if (!force && st.st_size == e->size && st.st_mtim.tv_sec == e->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == e->mtime.tv_nsec)
		return;
	int cf = chfs_open_posix(e->path, O_WRONLY | O_CREAT | O_TRUNC, e->mode, 0);
	int err = cf < 0 ? errno : 0;
	for (off_t off = 0; !err && off < st.st_size;) {
		ssize_t n = pread(e->memfd, c->buf, BUF_SIZE, off);
		if (n <= 0) {
			err = n < 0 ? errno : EIO;
			break;
		}
		for (ssize_t done = 0; !err && done < n;) {
			ssize_t w = chfs_pwrite(cf, c->buf + done, (size_t)(n - done), off + done);
			if (w <= 0)
				err = w < 0 ? errno : EIO;
			else
				done += w;
		}
		off += n;
	}
	if (cf >= 0 && chfs_close(cf) < 0 && !err)
		err = errno;
	if (err) {
		fprintf(stderr, "chfs-job: cannot write %s back to CHFS: %s\n", e->path, strerror(err));
		c->failed = true;
		return;
	}
	e->size = st.st_size;
	e->mtime = st.st_mtim;
}

/* Before a call on path: the job's own pending writes to it go back first, so a later open, stat
 * or rename in the job sees them even if their descriptor was never closed in the trapped range
 * (a shell's dup2 onto stdout); gone = path is being removed: forget its staged copies. */
static void sync_path(struct cj_chfs *c, const char *path, bool gone)
{
	for (int i = 0; i < c->nfiles; i++) {
		struct staged *e = &c->files[i];
		if (!e->path || strcmp(e->path, path) != 0)
			continue;
		if (gone) {
			free(e->path);
			e->path = NULL;
		} else {
			write_back(c, e, false);
		}
	}
}

/* After a rename: staged copies of from now belong to to. */
static void retarget(struct cj_chfs *c, const char *from, const char *to)
{
	for (int i = 0; i < c->nfiles; i++) {
		struct staged *e = &c->files[i];
		char *p;
		if (e->path && strcmp(e->path, from) == 0 && (p = strdup(to))) {
			free(e->path);
			e->path = p;
		}
	}
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

const char *cj_chfs_stage_root(const struct cj_chfs *c) { return c->dirs; }

int cj_chfs_stop(struct cj_chfs *c)
{
	if (!c)
		return 0;
	for (int i = 0; i < c->nfiles; i++) {
		if (c->files[i].path)
			write_back(c, &c->files[i], false);
		close(c->files[i].memfd);
		free(c->files[i].path);
	}
	if (c->dirs[0])
		nftw(c->dirs, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	int rc = c->failed ? -EIO : 0;
	free(c->files);
	free(c->buf);
	free(c);
	chfs_term();
	return rc;
}

struct listing {
	struct name {
		char *name;
		mode_t type;
	} * v;
	int n, cap, err;
};

static int add_name(void *arg, const char *name, const struct stat *st, off_t off)
{
	struct listing *l = arg;
	(void)off;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 64;
		struct name *v = realloc(l->v, (size_t)cap * sizeof(*v));
		if (!v)
			return l->err = ENOMEM, 1;
		l->v = v, l->cap = cap;
	}
	if (!(l->v[l->n].name = strdup(name)))
		return l->err = ENOMEM, 1;
	l->v[l->n++].type = st->st_mode & S_IFMT;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct name *)a)->name, ((const struct name *)b)->name);
}

/* Make local directory dir hold exactly l's names, each an empty entry of its type. */
static int mirror(int dfd, const char *dir, struct listing *l)
{
	qsort(l->v, (size_t)l->n, sizeof(*l->v), by_name);
	DIR *d = fdopendir(openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)); /* own offset */
	struct dirent *e;
	char sub[PATH_MAX];
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct name key = {e->d_name, 0},
		            *hit = bsearch(&key, l->v, (size_t)l->n, sizeof(*l->v), by_name);
		unsigned char want = !hit                   ? DT_UNKNOWN
		                     : hit->type == S_IFDIR ? DT_DIR
		                     : hit->type == S_IFLNK ? DT_LNK
		                                            : DT_REG;
		if (hit && e->d_type == want)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		nftw(sub, remove_entry, 16, FTW_DEPTH | FTW_PHYS); /* gone from CHFS, or another type */
	}
	if (d)
		closedir(d);
	for (int i = 0; i < l->n; i++) {
		const char *name = l->v[i].name;
		int rc = l->v[i].type == S_IFDIR   ? mkdirat(dfd, name, 0700)
		         : l->v[i].type == S_IFLNK ? symlinkat(".", dfd, name)
		                                   : mknodat(dfd, name, S_IFREG | 0600, 0);
		if (rc < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

/* CHFS directory path staged as the local directory STAGE/path (same names, empty entries of
 * the same type), opened O_RDONLY|O_DIRECTORY. STAGE is mapped back to chfs:/ in the policy, so
 * calls relative to this descriptor (openat, fstatat: find, ls -l) reach CHFS again. */
static int stage_dir(struct cj_chfs *c, const char *path, int flags)
{
	if ((flags & O_ACCMODE) != O_RDONLY)
		return -EISDIR;
	char *dir = malloc(PATH_MAX);
	if (!dir)
		return -ENOMEM;
	int n = snprintf(dir, PATH_MAX, "%s%s", c->dirs, strcmp(path, "/") ? path : "");
	for (int i = (int)strlen(c->dirs) + 1; i <= n && n < PATH_MAX; i++)
		if (dir[i] == '/' || dir[i] == '\0') {
			char ch = dir[i];
			dir[i] = '\0';
			mkdir(dir, 0700); /* EEXIST: staged before; other errors show at open */
			dir[i] = ch;
		}
	struct listing l = {0};
	int fd = n < PATH_MAX ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	int rc = fd < 0 ? -(n < PATH_MAX ? errno : ENAMETOOLONG) : 0;
	if (rc == 0 && chfs_readdir(path, &l, add_name) < 0)
		rc = -errno;
	if (rc == 0 && l.err)
		rc = -l.err;
	if (rc == 0)
		rc = mirror(fd, dir, &l);
	for (int i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	free(dir);
	if (rc < 0 && fd >= 0)
		close(fd);
	return rc < 0 ? rc : fd;
}

static int copy_in(struct cj_chfs *c, int cf, int memfd, off_t size)
{
	if (ftruncate(memfd, size) < 0)
		return -errno;
	for (off_t off = 0; off < size;) {
		ssize_t n = chfs_pread(cf, c->buf, BUF_SIZE, off);
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (pwrite(memfd, c->buf, (size_t)n, off) != n)
			return -EIO;
		off += n;
	}
	return 0;
}

static int keep(struct cj_chfs *c, const char *path, int memfd, mode_t mode)
{
	if (c->nfiles == c->capfiles) {
		int cap = c->capfiles ? c->capfiles * 2 : 16;
		struct staged *f = realloc(c->files, (size_t)cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		c->files = f;
		c->capfiles = cap;
	}
	struct stat st;
	char *p = strdup(path);
	if (!p || fstat(memfd, &st) < 0) {
		free(p);
		return -ENOMEM;
	}
	c->files[c->nfiles++] = (struct staged){p, memfd, mode, st.st_ino, st.st_size, st.st_mtim};
	return 0;
}

int cj_chfs_open(struct cj_chfs *c, const char *path, int flags, mode_t mode)
{
	int acc = flags & O_ACCMODE;
	if (flags & (__O_TMPFILE & ~O_DIRECTORY))
		return -EOPNOTSUPP;
	sync_path(c, path, false);
	if (!(flags & O_CREAT)) {
		int want = acc == O_RDONLY ? R_OK : acc == O_WRONLY ? W_OK : R_OK | W_OK;
		if (chfs_access(path, want) < 0)
			return -errno;
	}
	int cf = chfs_open_posix(path, flags & (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_DIRECTORY), mode,
	                         0);
	if (cf < 0)
		return -errno;
	struct stat st;
	if (chfs_fstat(cf, &st) < 0) {
		int e = errno;
		chfs_close(cf);
		return -e;
	}
	if (S_ISDIR(st.st_mode)) {
		chfs_close(cf);
		return stage_dir(c, path, flags);
	}
	const char *base = strrchr(path, '/');
	char name[64];
	snprintf(name, sizeof(name), "chfs:%s", base ? base + 1 : path);
	int memfd = memfd_create(name, MFD_CLOEXEC);
	int rc = memfd < 0 ? -errno : copy_in(c, cf, memfd, st.st_size);
	chfs_close(cf);
	if (rc < 0) {
		if (memfd >= 0)
			close(memfd);
		return rc;
	}
	/* the tracee's own open file: its access mode and O_APPEND, its own offset */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", memfd);
	int fd = open(self, acc | (flags & O_APPEND) | O_CLOEXEC);
	if (fd < 0 || acc == O_RDONLY) {
		rc = fd < 0 ? -errno : fd;
		close(memfd);
		return rc;
	}
	rc = keep(c, path, memfd, st.st_mode & 07777);
	if (rc < 0) {
		close(fd);
		close(memfd);
		return rc;
	}
	return fd;
}

void cj_chfs_closed(struct cj_chfs *c, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return;
	for (int i = 0; i < c->nfiles; i++)
		if (c->files[i].path && c->files[i].ino == st.st_ino) {
			write_back(c, &c->files[i], true);
			return;
		}
}

static void to_statx(const struct stat *st, struct statx *x)
{
	memset(x, 0, sizeof(*x));
	x->stx_mask = STATX_BASIC_STATS;
	x->stx_blksize = (uint32_t)st->st_blksize;
	x->stx_nlink = (uint32_t)st->st_nlink;
	x->stx_uid = st->st_uid;
	x->stx_gid = st->st_gid;
	x->stx_mode = (uint16_t)st->st_mode;
	x->stx_ino = st->st_ino;
	x->stx_size = (uint64_t)st->st_size;
	x->stx_blocks = (uint64_t)st->st_blocks;
	x->stx_atime = (struct statx_timestamp){st->st_atim.tv_sec, (uint32_t)st->st_atim.tv_nsec, 0};
	x->stx_mtime = (struct statx_timestamp){st->st_mtim.tv_sec, (uint32_t)st->st_mtim.tv_nsec, 0};
	x->stx_ctime = (struct statx_timestamp){st->st_ctim.tv_sec, (uint32_t)st->st_ctim.tv_nsec, 0};
	x->stx_dev_major = major(st->st_dev);
	x->stx_dev_minor = minor(st->st_dev);
}

static long do_stat(struct cj_chfs *c, const struct cj_sysc *sc, int nr, const uint64_t a[6],
                    const char *path, pid_t pid)
{
	bool follow =
	        sc->nofollow == -1 || (sc->nofollow >= 0 && !(a[(int)sc->nofollow] & AT_SYMLINK_NOFOLLOW));
	if (nr == SYS_statfs)
		return -EOPNOTSUPP;
	struct stat st;
	if ((follow ? chfs_stat(path, &st) : chfs_lstat(path, &st)) < 0)
		return -errno;
	const void *out = &st;
	size_t n = sizeof(st);
	if (nr == SYS_statx) {
		to_statx(&st, (struct statx *)c->buf);
		out = c->buf, n = sizeof(struct statx);
	}
	return cj_tracee_write(pid, a[(int)sc->buf], out, n) < 0 ? -EFAULT : 0;
}

static long do_utimens(const char *path, const uint64_t a[6], pid_t pid)
{
	struct timespec t[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
	if (a[2] && cj_tracee_read(pid, a[2], t, sizeof(t)) < 0)
		return -EFAULT;
	return chfs_utimens(path, t) < 0 ? -errno : 0;
}

long cj_chfs_call(struct cj_chfs *c, const struct cj_sysc *sc, int nr, const uint64_t a[6], const char *path0,
                  const char *path1, pid_t pid, mode_t umask)
{
	int rc;
	sync_path(c, path0, false);
	switch (nr) {
	case SYS_stat:
	case SYS_lstat:
	case SYS_newfstatat:
	case SYS_statx:
	case SYS_statfs: return do_stat(c, sc, nr, a, path0, pid);
	case SYS_readlink:
	case SYS_readlinkat: {
		size_t len = (size_t)a[(int)sc->buf + 1] < BUF_SIZE ? (size_t)a[(int)sc->buf + 1] : BUF_SIZE;
		rc = chfs_readlink(path0, c->buf, len);
		if (rc < 0)
			return -errno;
		return cj_tracee_write(pid, a[(int)sc->buf], c->buf, (size_t)rc) < 0 ? -EFAULT : rc;
	}
	case SYS_access: rc = chfs_access(path0, (int)a[1]); break;
	case SYS_faccessat:
	case SYS_faccessat2: rc = chfs_access(path0, (int)a[2]); break;
	case SYS_mkdir: rc = chfs_mkdir(path0, (mode_t)a[1] & ~umask); break;
	case SYS_mkdirat: rc = chfs_mkdir(path0, (mode_t)a[2] & ~umask); break;
	case SYS_rmdir: rc = chfs_rmdir(path0); break;
	case SYS_unlink:
		rc = chfs_unlink(path0);
		if (rc == 0)
			sync_path(c, path0, true);
		break;
	case SYS_unlinkat:
		rc = (a[2] & AT_REMOVEDIR) ? chfs_rmdir(path0) : chfs_unlink(path0);
		if (rc == 0)
			sync_path(c, path0, true);
		break;
	case SYS_chmod: rc = chfs_chmod(path0, (mode_t)a[1]); break;
	case SYS_fchmodat:
	case SYS_fchmodat2: rc = chfs_chmod(path0, (mode_t)a[2]); break;
	case SYS_truncate: rc = chfs_truncate(path0, (off_t)a[1]); break;
	case SYS_renameat2:
		if (a[4])
			return -EINVAL;
		/* fall through */
	case SYS_rename:
	case SYS_renameat:
		rc = chfs_rename(path0, path1);
		if (rc == 0) {
			sync_path(c, path1, true); /* the file renamed over is gone */
			retarget(c, path0, path1);
		}
		break;
	case SYS_utimensat: return do_utimens(path0, a, pid);
	case SYS_link:
	case SYS_linkat:
	case SYS_mknod:
	case SYS_mknodat:
	case SYS_chown:
	case SYS_lchown:
	case SYS_fchownat: return -EOPNOTSUPP;
	default: return -EXDEV; /* execve, chdir, xattrs, ...: cannot be carried out here */
	}
	return rc < 0 ? -errno : 0;
}
