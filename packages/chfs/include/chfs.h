/*
 * chfs.h — public client API of CHFS (chfs-stack implementation on libfabric).
 *
 * Source-compatible with upstream CHFS (otatebe/chfs 3.x, lib/chfs.h): every upstream function
 * keeps its name, signature and meaning, so programs written for upstream (IOR's CHFS backend,
 * the ROMIO ad_chfs driver, chfuse, chfs-zpoline) build against this header unchanged and link
 * with `pkg-config --libs chfs`. The chfs-stack extensions below the upstream block are what
 * POSIX-style access paths need (rename, fstat, ftruncate, lstat, access, chmod, utimens,
 * node-local fast paths, fork support); an access path that uses only the upstream block also
 * builds against upstream CHFS.
 *
 * Conventions: functions return 0 (or a count) on success and -1 with errno set on failure,
 * exactly like the POSIX call of the same name. Paths are CHFS paths ("/a/b" or "a/b" name the
 * same file; "." and ".." are resolved; a path may not climb above the root). File descriptors
 * are small non-negative integers private to the library, not kernel descriptors. Every
 * function is thread-safe once chfs_init() has returned.
 *
 * Environment (read by chfs_init; a malformed value makes chfs_init fail with EINVAL and a
 * one-line message naming the variable):
 *   CHFS_SERVER                  comma-separated server addresses used to join the pool
 *   CHFS_SECRET_FILE             pool secret (default $HOME/.chfs/secret)
 *   CHFS_CHUNK_SIZE              chunk size of new files in bytes (default 65536; K/M/G suffix)
 *   CHFS_PLACEMENT               placement of new files: "hash" (default) or "local"
 *   CHFS_LOCAL_FASTPATH          1 (default) = chunks held by a server of this node are read and
 *                                written directly in its backing file; 0 = every chunk by RPC
 *   CHFS_ASYNC_ACCESS            1 = issue the chunk RPCs of one call concurrently
 *   CHFS_BUF_SIZE                per-descriptor client buffer in bytes (default 0 = none)
 *   CHFS_RDMA_THRESH             transfers larger than this move by RMA (default 32768)
 *   CHFS_RPC_TIMEOUT_MSEC        RPC timeout (default 30000; 0 = none)
 *   CHFS_NODE_LIST_CACHE_TIMEOUT seconds before the server list is refreshed (default 120)
 *   CHFS_LOG_PRIORITY            emerg|alert|crit|err|warning|notice|info|debug (default notice)
 */
#ifndef CHFS_H
#define CHFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHFS_VERSION_MAJOR 3
#define CHFS_VERSION_MINOR 0
#define CHFS_STACK_IMPL 1 /* defined only by the chfs-stack implementation */

/* Upstream flag bits (mode/flags words). */
#define CHFS_O_CACHE (1 << 28)
#define CHFS_S_IFREP (4 << 28)

/* ---- upstream API --------------------------------------------------------------------- */

/* Join the pool through `server` (an address) or, if NULL, an entry of CHFS_SERVER. Fails
 * with ENOTCONN if no listed server answers within the RPC timeout. Calling it again after
 * success returns 0 at once. */
int chfs_init(const char *server);
int chfs_initialized(void);
int chfs_term(void);
int chfs_term_without_sync(void);
/* Ends this process's open leases (one request to every server, sent concurrently: bounded by
 * the RPC timeout) without tearing the client down: for a process about to exit without
 * chfs_term, as the syscall hook does at exit_group after closing its descriptors. Without it
 * the servers keep the leases, and the files another process unlinks meanwhile, a lease long. */
int chfs_end_leases(void);
/* The name that the file or directory whose st_ino is `ino`, last known as `path`, has now:
 * `path` itself if it still names it, else the name another process renamed it (or a
 * directory above it) to, as the servers' rename notes tell (a bounded, in-memory record).
 * Copied to out ("/a/b"); -1 with errno ENOENT if it was removed or the rename is not known,
 * ERANGE if out is too small. One lookup when nothing moved. */
int chfs_follow(const char *path, ino_t ino, char *out, size_t size);
/* Number of servers in the pool. */
int chfs_size(void);
const char *chfs_version(void);

void chfs_set_chunk_size(int chunk_size);
void chfs_set_buf_size(int buf_size);
void chfs_set_async_access(int enable);
void chfs_set_rdma_thresh(size_t thresh);
void chfs_set_rpc_timeout_msec(int timeout);
void chfs_set_node_list_cache_timeout(int timeout);

/* Create a regular file and open it; an existing file is opened as it is (truncated only with
 * O_TRUNC), so every rank of a job may create one shared file. Missing parent directories are
 * created, as upstream's namespace does. flags: O_TRUNC, O_APPEND, CHFS_O_LOCAL; the access
 * mode and O_EXCL are ignored, as upstream (IOR passes its own flag word: its IOR_DIRECT, 0x80,
 * is O_EXCL). For O_EXCL semantics use chfs_open_posix. */
int chfs_create(const char *path, int32_t flags, mode_t mode);
int chfs_create_chunk_size(const char *path, int32_t flags, mode_t mode, int chunk_size);
/* Open an existing file or directory. As upstream's, the descriptor reads and writes whatever
 * the access mode bits say (IOR passes its own flag word here); O_TRUNC (with a writable
 * access mode), O_APPEND and O_DIRECTORY are honoured; O_CREAT and O_EXCL are ignored. */
int chfs_open(const char *path, int32_t flags);
int chfs_close(int fd);
ssize_t chfs_pwrite(int fd, const void *buf, size_t size, off_t offset);
ssize_t chfs_write(int fd, const void *buf, size_t size);
/* Reads return fewer bytes than asked only at end of file; holes read as zeros. */
ssize_t chfs_pread(int fd, void *buf, size_t size, off_t offset);
ssize_t chfs_read(int fd, void *buf, size_t size);
off_t chfs_seek(int fd, off_t off, int whence);
int chfs_fsync(int fd);
int chfs_truncate(const char *path, off_t len);
int chfs_unlink(const char *path);

int chfs_mkdir(const char *path, mode_t mode);
int chfs_rmdir(const char *path); /* ENOTEMPTY if the directory has entries */
int chfs_stat(const char *path, struct stat *st);
/* Calls filler(buf, name, st, 0) once per entry (including "." and ".."), in no particular
 * order; stops early if filler returns non-zero. */
int chfs_readdir(const char *path, void *buf,
                 int (*filler)(void *, const char *, const struct stat *, off_t));
/* Same, but only the entries held by server `index` (0 <= index < chfs_size()). */
int chfs_readdir_index(const char *path, int index, void *buf,
                       int (*filler)(void *, const char *, const struct stat *, off_t));
int chfs_symlink(const char *target, const char *path);
/* A second name for a regular file (link(2)): any number of directories and servers apart;
 * EPERM for a directory (and, for now, a symlink, FIFO or socket), EEXIST, ENOENT. */
int chfs_link(const char *oldpath, const char *newpath);
/* Extension: a FIFO (S_IFIFO) or socket (S_IFSOCK) entry, or an empty regular file; device
 * nodes are EPERM. FIFOs and sockets are node-local: the kernel runs them on a chfuse mount;
 * chfs_open of one is ENXIO. */
int chfs_mknod(const char *path, mode_t mode, dev_t dev);
/* Returns the length of the target (not NUL-terminated if it does not fit, like readlink). */
int chfs_readlink(const char *path, char *buf, size_t size);

/* Report this process's writes, and, with a backend (chfsd -b), return once every server has
 * flushed what was written to it to the backend (paths that could not be flushed are logged;
 * their data stay in CHFS). */
void chfs_sync(void);
/* chfs-stack extension: chfs_sync with a result: 0 when everything written is on the backend,
 * -1 with errno EIO if some file could not be flushed (each path logged, data kept in CHFS). */
int chfs_sync_backend(void);
/* Bytes the servers read from the backend at a time while staging in (0: 1 MiB). */
void chfs_set_stagein_buf_size(int buf_size);
/* Copy the backend file behind path (chfsd -b DIR: DIR/path) into CHFS now: every server
 * fetches the chunks it owns, concurrently. Directories and symlinks need nothing; a file CHFS
 * has that did not come from the backend is left as it is. 0, or -1 with errno (ENOENT: not in
 * CHFS nor in the backend). */
int chfs_stagein(const char *path);
/* chfs-stack extension: chfs_stagein of paths[0..n) in a few requests (files batched per server;
 * the tool `chstagein` uses it). errors (may be NULL): errors[i] = 0 or the errno of paths[i].
 * 0 if every path was staged, else -1 with errno of the first that failed. */
int chfs_stagein_many(const char *const *paths, int n, int *errors);

/* ---- chfs-stack extensions ------------------------------------------------------------ */

/* Create flag: place every chunk of the new file on the server of this node (the server whose
 * address is one of this host's addresses), instead of striping by hash. */
#define CHFS_O_LOCAL (1 << 27)

/* open(2) for access paths that see real O_ flags (the hook, chfuse, ad_chfs): O_CREAT opens
 * the existing file or creates it exclusively in one call — a concurrent creator's bytes are
 * never truncated (only O_TRUNC truncates) — O_EXCL, O_TRUNC, O_APPEND, O_DIRECTORY,
 * CHFS_O_LOCAL; a missing parent directory is ENOENT, as on a local file system. chunk_size
 * <= 0 means the default. The access mode is not enforced on the descriptor (as chfs_open):
 * the caller checks it. */
int chfs_open_posix(const char *path, int32_t flags, mode_t mode, int chunk_size);
int chfs_rename(const char *from, const char *to); /* files, symlinks and empty directories */
int chfs_fstat(int fd, struct stat *st);
int chfs_ftruncate(int fd, off_t len);
int chfs_lstat(const char *path, struct stat *st);
int chfs_access(const char *path, int mode); /* F_OK/R_OK/W_OK/X_OK against the stored mode */
int chfs_chmod(const char *path, mode_t mode);
/* times[0] = atime, times[1] = mtime; UTIME_NOW and UTIME_OMIT as in utimensat(2). */
int chfs_utimens(const char *path, const struct timespec times[2]);
/* chfs_utimens of a final symlink itself (utimensat's AT_SYMLINK_NOFOLLOW). */
int chfs_lutimens(const char *path, const struct timespec times[2]);
/* Owner and group (-1 leaves one unchanged): root changes anything, an owner may change the
 * group to one of its groups (EPERM otherwise); set-user-ID, and set-group-ID of a group-
 * executable file, are cleared on anything but a directory. chfs_lchown does not follow a
 * final symlink. */
int chfs_chown(const char *path, uid_t uid, gid_t gid);
int chfs_lchown(const char *path, uid_t uid, gid_t gid);

/* Act for another identity in the calling thread (a FUSE daemon serving many users): new
 * entries get uid/gid (or a set-group-ID directory's group) and permission checks use uid,
 * gid and groups (at most CHFS_ACT_MAX_GROUPS are used). CHFS_ACT_CHECKED: the caller (the
 * kernel, with FUSE's default_permissions) has checked access; libchfs only records owners.
 * uid (uid_t)-1 returns to the process's own credentials. Every other call checks access
 * for the process's effective uid, gid and supplementary groups, as a local file system
 * does (search permission on ancestors excepted); the pool secret is what admits a client. */
#define CHFS_ACT_CHECKED 1
#define CHFS_ACT_MAX_GROUPS 64
int chfs_act_as(uid_t uid, gid_t gid, int ngroups, const gid_t *groups, int flags);
/* The chunk size of an open file. */
int chfs_chunk_size_of(int fd);
/* The st_mode (type and permission bits) an open file had when it was opened, without a
 * request to a server (chfs_fstat asks the owner for the current attributes); -1 with errno
 * EBADF for a descriptor that is not open. */
int chfs_mode_of(int fd);
/* The identity (st_ino) of an open file or directory, as opened, without a request (see
 * chfs_follow); 0 with errno EBADF for a descriptor that is not open, ENOENT for one without an
 * identity (a directory an older chfsd made, or one only the backend has). */
ino_t chfs_ino_of(int fd);

/* Node-local fast path. If the open file was created with local placement (CHFS_O_LOCAL or
 * CHFS_PLACEMENT=local) and so every chunk of it lives on a server of this node, writes
 * the absolute path of that server's backing file (a regular file holding the data at its
 * logical offsets) into buf and returns 0; otherwise -1 with errno ENXIO. A caller may then
 * read and write the backing file directly: the server derives the size and times of such a
 * file from its backing file, so every client sees direct writes. */
int chfs_local_backing_path(int fd, char *buf, size_t size);

/* Call in the child after fork()/clone() without exec when the process used CHFS before: drops
 * the parent's transport state (the child gets its own on the next call); open descriptors
 * stay valid. libchfs registers this with pthread_atfork(); raw clone() users call it. */
void chfs_after_fork(void);

/* Find evaluated on the servers (chfind). argv[0..argc): find-style tests, all of which must
 * hold: -name GLOB, -size [+-]N[cwbkMG], -newer FILE (FILE's mtime from CHFS, or from the local
 * file system if CHFS has no FILE), -type f|d|l. Every server tests the entries it owns below
 * `path` and returns the matches (one request per server, a few more for large results); the
 * servers with index % nranks == rank are asked, in parallel, and rank 0 also tests `path`
 * itself. fn(arg, p, st) gets each match (p: `path` as given joined with the entry's path
 * below it; st: type, permissions, size, mtime) in no particular order; a non-zero return
 * stops the search. counts (NULL, or ncounts >= chfs_size() entries) gets, per server, its
 * matches and the entries below `path` it examined. 0, or -1 with errno (EINVAL: a malformed
 * expression, logged). */
struct chfs_find_count {
	uint64_t matched, visited;
};
int chfs_find(const char *path, int argc, char *const argv[], int rank, int nranks,
              int (*fn)(void *arg, const char *path, const struct stat *st), void *arg,
              struct chfs_find_count *counts, int ncounts);

#ifdef __cplusplus
}
#endif
#endif /* CHFS_H */
