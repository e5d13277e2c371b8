/*
 * chfuse.h — what chfuse's modules share privately.
 *
 * chfuse is a FUSE daemon that mounts a CHFS pool. Shape (one module per concern):
 *   chfuse.c          command line, mount, daemon life cycle
 *   chfuse_ops.c      the file-system operations, each a thin translation to one chfs.h call
 *   chfuse_backing.c  passthrough: one kernel backing id per node-local backing file
 *   chfuse_stats.c    request counters, written to the -o stats=FILE file
 *   chfuse_hidden.c   files unlinked while open (libfuse's hidden names)
 *   chfuse_links.c    the kernel's caches of a hard-linked file's other names
 * It uses the high-level (path based) libfuse API because CHFS itself is path based; the only
 * low-level piece passthrough needs is the /dev/fuse descriptor for FUSE_DEV_IOC_BACKING_OPEN,
 * which fuse_session_fd() gives. Everything CHFS-related goes through chfs.h only.
 */
#ifndef CHFUSE_H
#define CHFUSE_H

#define FUSE_USE_VERSION 314
#include <fuse.h>
#include <fuse_lowlevel.h> /* fuse_session_fd() for the passthrough ioctls */

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#ifndef FUSE_CAP_PASSTHROUGH
#error "chfuse needs libfuse >= 3.17 or libfuse built with packages/chfuse/libfuse-passthrough.patch"
#endif

/* Settings parsed once from the command line, then only read. */
struct chfuse_config {
	bool passthrough;       /* hand node-local files to the kernel (default on) */
	bool create_local;      /* -o local: create files with CHFS_O_LOCAL */
	const char *stats_path; /* -o stats=FILE, or NULL */
	const char *mountpoint;
};
extern struct chfuse_config chfuse_cfg;

/* ---- chfuse_ops.c ---- */
extern const struct fuse_operations chfuse_ops;

/* ---- chfuse_backing.c ---- */
struct chfuse_backing; /* one node-local backing file registered with the kernel */

/* Whether the kernel accepted passthrough at INIT (set by the init operation). */
extern atomic_bool chfuse_passthrough_active;
/* Registers (or shares, if already registered) the backing file at `path` with the kernel of
 * the FUSE session `session_fd`. Returns the entry and its kernel id in *backing_id, or NULL
 * with -errno in *err. */
struct chfuse_backing *chfuse_backing_get(int session_fd, const char *path, int *backing_id, int *err);
/* The backing file's own descriptor (for fsync). */
int chfuse_backing_fd(const struct chfuse_backing *b);
/* Drops one reference; the last one unregisters the id and closes the file. */
void chfuse_backing_put(int session_fd, struct chfuse_backing *b);
/* Directory of some backing file seen so far (for statfs), or NULL. */
const char *chfuse_backing_dir(void);

/* ---- chfuse_hidden.c ---- */
/* 1 if path's last name is one libfuse gives an open file it hides (.fuse_hidden + 16 hex). */
int chfuse_is_hidden_name(const char *path);
/* libfuse hides the open file `from` as `hidden`: unlink `from` in CHFS, keeping the file open
 * under the hidden name. 0 or -errno. */
int chfuse_hide(const char *from, const char *hidden);
/* The descriptor kept for a hidden name, or -1. */
int chfuse_hidden_fd(const char *path);
/* libfuse unlinks a hidden name after the last release: close its descriptor. 1 if it was one. */
int chfuse_unhide(const char *path);

/* ---- chfuse_links.c ---- */
/* getattr of path said st: remember it if it is a name of a linked file (nlink > 1). */
void chfuse_links_seen(const char *path, const struct stat *st);
/* The file at path changed (data, attributes, its names): drop the kernel's cache of its other
 * names chfuse saw; forget: path itself is no longer a name of it. */
void chfuse_links_changed(const char *path, int forget);

/* ---- chfuse_stats.c ---- */
enum chfuse_counter {
	CHFUSE_READ,        /* READ requests served by the daemon */
	CHFUSE_WRITE,       /* WRITE requests served by the daemon */
	CHFUSE_OPEN,        /* OPEN + CREATE requests */
	CHFUSE_PASSTHROUGH, /* opens answered with a backing file */
	CHFUSE_LOCAL_NOPT,  /* node-local files served through the daemon (passthrough off/failed) */
	CHFUSE_READ_BYTES,
	CHFUSE_WRITE_BYTES,
	CHFUSE_NCOUNTERS
};
void chfuse_count(enum chfuse_counter c, long n);
/* Writes all counters as "name value" lines to chfuse_cfg.stats_path (atomically, via rename);
 * a no-op without -o stats. Safe to call from any thread. */
void chfuse_stats_dump(void);
/* The session whose io_uring request count the dump includes (libfuse with the io_uring patch). */
void chfuse_stats_set_session(struct fuse_session *se);
/* Starts a thread that dumps the counters on SIGUSR1 (SIGUSR1 must be blocked already). */
int chfuse_stats_start_signal_thread(void);

#endif /* CHFUSE_H */
