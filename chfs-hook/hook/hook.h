/*
 * hook.h — private interface between the hook library's modules.
 *
 * The hook library (libchfs-hook.so) runs in its own link-map namespace: its libc, libchfs
 * and libfabric make real syscalls, never re-entering the hook. Module map:
 *   hook.c     init, the per-syscall filter (vector-register-free) and the dispatch switch
 *   config.c   CHFS_HOOK_* environment, umask, the lazy chfs_init()
 *   join.c     joining the pool at start (an MPI rank whose command line names a CHFS path)
 *   paths.c    mount points, lexical normalisation, virtual cwd, path classification
 *   fdtable.c  CHFS files behind reserved kernel descriptors (placeholders)
 *   files.c    open/close/read/write/seek/dup/fcntl/copy on CHFS descriptors
 *   meta.c     stat, access, mkdir, unlink, rename, symlink, truncate, chmod, statfs, xattr
 *   dirs.c     getdents64, chdir/fchdir/getcwd
 *   procs.c    fork, execve (environment and descriptor inheritance), exit
 *   mmap.c     private mappings of CHFS files
 *   fdreserve.c  keeps libchfs/libfabric's own descriptors at the top of the fd range
 *   shadow.c   node-local kernel objects standing for CHFS FIFOs and sockets (fifo.c, sock.c)
 *   sock.c     bind/connect/sendto/sendmsg of Unix socket names in CHFS
 * Handlers take the raw syscall arguments and return a result or -errno, like the kernel.
 */
#ifndef CHFS_HOOK_HOOK_H
#define CHFS_HOOK_HOOK_H

#include "gate.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

/* ---- raw syscalls (the namespace's own libc is not rewritten either, but this keeps errors
 * in the kernel's -errno form) ---- */
long hook_raw(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
#define RAW0(nr) hook_raw((nr), 0, 0, 0, 0, 0, 0)
#define RAW1(nr, a) hook_raw((nr), (long)(a), 0, 0, 0, 0, 0)
#define RAW2(nr, a, b) hook_raw((nr), (long)(a), (long)(b), 0, 0, 0, 0)
#define RAW3(nr, a, b, c) hook_raw((nr), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define RAW4(nr, a, b, c, d) hook_raw((nr), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
long hook_pass(const struct chfs_sysargs *s);

/* ---- config.c ---- */
#define HOOK_MAX_MOUNTS 16
struct hook_mount {
	char dir[PATH_MAX]; /* absolute, normalised, no trailing slash */
	size_t dirlen;
	const char *base; /* its last component, in dir */
	size_t baselen;
	char sub[PATH_MAX]; /* CHFS directory it shows ("" = the CHFS root) */
};
struct hook_config {
	struct hook_mount mounts[HOOK_MAX_MOUNTS];
	int nmounts;
	int local_fast_path;   /* CHFS_HOOK_LOCAL, default 1 */
	size_t longest_prefix; /* longest name prefix the filter compares (a mount, /proc/self/fd/) */
	const char *loader_path;
};
extern struct hook_config hook_cfg;
extern _Atomic unsigned hook_umask;
int hook_config_load(void); /* -1 after printing why */
/* CHFS_* and CHFS_HOOK_* entries of the start-up environment, for execve. */
extern char **hook_saved_env;

/* ---- usermem.c: the application's memory, read and written without crashing it ---- */
/* 1 if [p, p+n) is readable now (no libc: the filter may call it). */
int hook_user_readable(const void *p, size_t n);
/* Copies the string at src (NUL included) into dst: its length, -EFAULT, or -ENAMETOOLONG. */
long hook_user_strcpy(const char *src, char *dst, size_t size);
long hook_user_get(void *dst, const void *src, size_t n); /* 0 or -EFAULT */
long hook_user_put(void *dst, const void *src, size_t n); /* 0 or -EFAULT */
void hook_usermem_changed(void); /* after munmap, mprotect, mremap, madvise, shmdt, brk */
/* Where the per-thread page memory lives: the loader's scratch (gate.h), at this offset from
 * the thread pointer. */
void hook_usermem_init(long scratch_offset);
/* An empty name for AT_EMPTY_PATH: "" (or NULL, which Linux 6.11+ also accepts there). */
static inline int hook_empty_name(const char *p) { return !p || (hook_user_readable(p, 1) && p[0] == 0); }

/* ---- paths.c ---- */
/* The longest CHFS path + 1: libchfs's CHFS_PATH_MAX (packages/chfs/common/path.h). One
 * argument of a system call is at most PATH_MAX - 1 bytes, but programs reach deeper with
 * directory descriptors and chdir; a CHFS name beyond this is ENAMETOOLONG. */
#define HOOK_CHFS_PATH_MAX 16384
/* The longest virtual path + 1 the hook keeps: a mount point, then a CHFS path. */
#define HOOK_VPATH_MAX (PATH_MAX + HOOK_CHFS_PATH_MAX)
_Static_assert(HOOK_VPATH_MAX == CHFS_HOOK_CWD_MAX, "the loader's getcwd buffer (gate.h)");
/* A name resolved. Names that fit in PATH_MAX (nearly all) stay in the inline buffers; a longer
 * one (deep under a directory descriptor or the cwd) is on the heap. Declare one with
 * HOOK_TARGET(t): only the two pointers are set (the buffers are not cleared), and the heap
 * part is freed when t goes out of scope. */
struct hook_target {
	int chfs;           /* 1: CHFS path in `path`; 0: kernel path in `path` */
	int dir_only;       /* the name ended in "/" or "/.": it must be a directory */
	char *path;         /* CHFS path, or the path to give the kernel: path_buf or the heap */
	char *vpath;        /* normalised absolute virtual path (when chfs): vpath_buf or the heap */
	char arg[PATH_MAX]; /* the caller's name, copied fault-safely */
	char path_buf[PATH_MAX];
	char vpath_buf[PATH_MAX];
};
static inline void hook_target_init(struct hook_target *t)
{
	t->path = t->path_buf;
	t->vpath = t->vpath_buf;
}
void hook_target_release(struct hook_target *t); /* frees what is on the heap */
#define HOOK_TARGET(t)                                                      \
	struct hook_target t __attribute__((cleanup(hook_target_release))); \
	hook_target_init(&t)
/* Classifies (dirfd, path) as openat(2) would see it. -errno on error (ENAMETOOLONG, EFAULT for
 * a path the kernel could not read either). */
int hook_resolve(int dirfd, const char *path, struct hook_target *t);
/* ---- enter.c ---- */
/* The mount point a relative name from a local directory (AT_FDCWD with a local cwd, or a
 * kernel descriptor) walks into ("chfs/f" from its parent), or NULL; *rest = what follows the
 * mount point's component in path. path is the caller's writable copy (restored on return). */
const struct hook_mount *hook_entered_mount(int dirfd, char *path, const char **rest);
/* The CHFS file a "/proc/self/fd/N" or "/dev/fd/N" name refers to, or NULL. */
struct hook_file *hook_fd_path_file(const char *path);
int hook_normalize(const char *in, char *out, size_t size);        /* absolute in, -ENAMETOOLONG */
int hook_vpath_to_chfs(const char *vpath, char *out, size_t size); /* 1 if under a mount */
/* Virtual cwd (a directory under a mount point), or inactive. */
extern atomic_int hook_vcwd_active;
int hook_vcwd_get(char *buf, size_t size);
int hook_vcwd_get_id(char *buf, size_t size, ino_t *ino); /* and its identity (0: unknown) */
/* A malloc'ed copy of the virtual cwd and its identity: 1, 0 if inactive, or -ENOMEM. */
int hook_vcwd_dup(char **vpath, ino_t *ino);
int hook_vcwd_set(const char *vpath, ino_t ino); /* NULL deactivates; -ENAMETOOLONG */
/* The virtual cwd `old` was renamed to vpath: 1 if it was replaced (not changed meanwhile). */
int hook_vcwd_moved(const char *old, const char *vpath);
void hook_paths_after_fork(void);

/* ---- follow.c ---- */
/* After call s failed with ENOENT: 1 if a CHFS cwd or directory descriptor it was relative to
 * had been renamed by another process and now has its new name (make the call again). */
int hook_follow_bases(const struct chfs_sysargs *s);

/* ---- fdtable.c ---- */
struct hook_dirlist;
struct hook_names;
struct hook_file {
	atomic_int refs; /* kernel descriptors of this process sharing it */
	int cfd;         /* libchfs descriptor */
	int flags;       /* O_ACCMODE | O_APPEND | O_NONBLOCK of the open */
	int is_dir;
	int local;                    /* the kernel descriptor is the server's backing file */
	char *vpath;                  /* absolute virtual path (read with hook_file_vpath) */
	char *cpath;                  /* CHFS path (hook_file_cpath); both replaced when a rename by
	                       * another process is followed (follow.c) */
	struct hook_names *old_names; /* names replaced so, freed with the file */
	pthread_mutex_t lock;         /* dir listing */
	struct hook_dirlist *dir;
};
/* Names of h that another thread may be replacing (hook_file_rename). */
static inline const char *hook_file_vpath(struct hook_file *h)
{
	return __atomic_load_n(&h->vpath, __ATOMIC_ACQUIRE);
}
static inline const char *hook_file_cpath(struct hook_file *h)
{
	return __atomic_load_n(&h->cpath, __ATOMIC_ACQUIRE);
}
/* Gives h the names (vpath, cpath); the old ones stay valid until h is freed. -ENOMEM. */
int hook_file_rename(struct hook_file *h, const char *vpath, const char *cpath);
extern struct hook_file **hook_fdtab;
extern int hook_fdtab_size;
extern int hook_fd_max;        /* highest descriptor ever installed */
extern atomic_int hook_nfiles; /* table entries in use */
int hook_fdtable_init(void);
static inline struct hook_file *hook_file_of(long fd)
{
	return (fd >= 0 && fd < hook_fdtab_size) ? hook_fdtab[fd] : NULL;
}
/* Install h at kernel descriptor fd (taking a reference). Drops a previous entry. */
void hook_fd_install(int fd, struct hook_file *h);
/* Remove fd's entry (the kernel descriptor is already closed or reused). */
void hook_fd_forget(int fd);
struct hook_file *hook_file_new(int cfd, int flags, int is_dir, const char *vpath, const char *cpath);
void hook_file_unref(struct hook_file *h);
/* Placeholder descriptor for a CHFS file: memfd recording (flags, vpath) for exec. */
int hook_placeholder_open(int flags, const char *vpath, int cloexec);
/* Re-attaches CHFS files to placeholders inherited through execve. */
void hook_fdtable_adopt_inherited(void);
void hook_fdtable_after_fork(void);
void hook_fdtable_close_all(void);

/* ---- CHFS client ---- */
int hook_chfs_ready(void);          /* lazily chfs_init(); 0 or -errno */
extern atomic_int hook_chfs_inited; /* chfs_init() succeeded in this process */
static inline int hook_chfs_used(void)
{
	return atomic_load_explicit(&hook_chfs_inited, memory_order_relaxed);
}
int hook_init_modules(void); /* config, tables, inherited descriptors; -1 after printing */
/* Joins the pool now if CHFS_HOOK_EAGER asks, or (unset) this MPI rank's command line names a
 * CHFS path. */
void hook_join_early(void);

/* ---- handlers (files.c, meta.c, dirs.c, procs.c, mmap.c) ---- */
long hook_do_open(int dirfd, const char *path, int flags, mode_t mode, const struct chfs_sysargs *s);
long hook_do_close(int fd);
long hook_do_read(int fd, void *buf, size_t n, off_t off); /* off < 0: current offset */
long hook_do_write(int fd, const void *buf, size_t n, off_t off);
long hook_do_readv(int fd, const struct iovec *iov, int cnt, off_t off);
long hook_do_writev(int fd, const struct iovec *iov, int cnt, off_t off);
long hook_do_lseek(int fd, off_t off, int whence);
long hook_do_dup(const struct chfs_sysargs *s);
long hook_do_fcntl(int fd, int cmd, long arg);
long hook_do_close_range(const struct chfs_sysargs *s);
long hook_do_copy(const struct chfs_sysargs *s);
long hook_do_fdop(const struct chfs_sysargs *s); /* fsync, ftruncate, fallocate, ... */

long hook_do_meta(const struct chfs_sysargs *s);
long hook_do_getdents64(int fd, void *buf, size_t count);
void hook_dirlist_free(struct hook_dirlist *d);
long hook_do_cwd(const struct chfs_sysargs *s);
long hook_do_exec(const struct chfs_sysargs *s);
void hook_after_fork(void);
long hook_do_exit(const struct chfs_sysargs *s);
long hook_do_mmap(const struct chfs_sysargs *s);

int hook_stat_chfs(struct hook_file *h, struct stat *st);
/* fifo.c: open a CHFS FIFO as its node-local shadow (a kernel fd the hook does not track);
 * -ENXIO if cpath is not a FIFO. */
long hook_open_fifo(const char *cpath, int flags);
/* shadow.c: out = the shadow of the CHFS entry with this file id ("<dir>/<kind><id>"), after
 * making sure the user's private shadow directory exists and is closed to others. */
long hook_shadow_path(const char *kind, unsigned long long fileid, char *out, size_t size);
/* sock.c: bind, connect, sendto, sendmsg whose address may be a Unix socket name in CHFS. */
long hook_do_sock(const struct chfs_sysargs *s);
/* errno of a failed libchfs call on cpath as the kernel would report it: ENOENT becomes
 * ENOTDIR when a leading component exists but is not a directory. */
int hook_path_err(const char *cpath);
#endif
