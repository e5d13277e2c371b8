/*
 * client.h — libchfs internals shared by its modules (never installed).
 *
 * Module map: client.c (init/term, configuration setters, the server list, fork handling),
 * rpc.c (building requests, calling a server, errno mapping), fdtable.c (descriptors),
 * namespace.c (create/open/stat/mkdir/rename/... — calls to the owner of a path), dir_rename.c
 * (renaming a non-empty directory: its subtree's entries one by one), io.c (the
 * data path: chunking, placement, inline vs RMA, concurrent per-server requests, size tracking),
 * readdir.c (directory listing across all servers).
 *
 * Consistency model: namespace operations are synchronous at the owner of the path. A file's
 * size lives in its metadata at the owner; writes extend it when the writer reports its highest
 * written offset — on close, fsync, chfs_sync, and before any stat/readdir/open/truncate/unlink
 * issued by the same process (close-to-open consistency across processes; a process always sees
 * its own writes). Reads past the reported size but within data present on the servers still
 * return that data.
 */
#ifndef CHFS_CLIENT_H
#define CHFS_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>

#include "chfs.h"
#include "config.h"
#include "listcache.h"
#include "log.h"
#include "nodelist.h"
#include "path.h"
#include "placement.h"
#include "wire.h"
#include "xprt.h"

/* An immutable snapshot of the pool: replaced (never modified) on refresh or after fork. */
struct srvlist {
	unsigned n;
	char **addrs;      /* in pool order (by server id) */
	struct ring *ring; /* placement over these n servers */
	uint64_t epoch;
	struct nodelist members; /* as fetched: rebuilds the snapshot after fork */
	xprt_peer_t **peers;
	int *local;          /* 1 if the server runs on this host */
	unsigned char *down; /* 1 if the pool's failure detector reported the server down */
	unsigned ndown;
	int nlocal;
	time_t fetched;
	atomic_int cached;             /* taken from the node's list cache, no server has answered yet */
	atomic_int refetch;            /* a cached list named a server nobody listens at: fetch afresh */
	atomic_int recheck;            /* cached: the pool was asked which servers are down (client.c) */
	struct srvlist *_Atomic fresh; /* the list that recheck brought (NULL: none answered) */
	struct srvlist *older;         /* kept until chfs_term: other threads may still hold it */
};

struct client {
	pthread_mutex_t lock;
	int initialized;
	pid_t pid;
	struct chfs_config cfg;
	uint8_t secret[CHFS_SECRET_LEN];
	xprt_t *x;
	char proto[16];
	char bootstrap[WIRE_ADDR_MAX];
	struct listcache lc; /* the node-local copy of the member list (listcache.c) */
	struct srvlist *_Atomic srv;
	atomic_uint_fast64_t reqid;
	atomic_int dirty_fds; /* descriptors with unreported writes */
	atomic_int wrote;     /* data written since the last backend flush (chfs_term flushes only then) */
	atomic_int async_access;
	atomic_int forked;          /* set in a child by chfs_after_fork() */
	atomic_int list_refreshing; /* one thread refreshes the server list at a time */
	atomic_llong list_retry_at; /* after a failed refresh: no new attempt before this time */
	atomic_int list_due;        /* a request timed out: refresh on the next call */
	atomic_uint lease_id;       /* open_lease.c: the high half of every request id */
};
extern struct client chfs_client;

/* Make sure the library is usable in this process (after fork too) and return the current
 * server list; -ENOTCONN if chfs_init was not called. */
int client_begin(struct srvlist **out);
/* Index of a local server for new local-placement files (-1 if none). */
int client_local_server(const struct srvlist *s);
/* Index of address a in the list, or -1. */
int client_server_index(const struct srvlist *s, const char *a);
/* A server that s, taken from the node's list cache, calls down: 1 if a fresh list from a live
 * member says so too (fetched once per snapshot, and installed), 0 if that list has it up. */
int client_down_confirmed(struct srvlist *s, unsigned idx);
/* 1 if server idx is known to be down: requests for it fail at once with EIO (rpc_status
 * reports -EHOSTDOWN as such). A cached list may be CHFS_LIST_CACHE_MSEC old: a server it
 * calls down may be back since, so the pool is asked first. */
static inline int client_server_down(struct srvlist *s, unsigned idx)
{
	return s->down[idx] && client_down_confirmed(s, idx);
}
/* A request timed out: fetch a fresh list (and its down members) on the next call. */
void client_list_stale(void);
/* Server idx of s answered WIRE_ERETRY (rpc: -ERESTART): its member list is newer than s.
 * Returns the newer list (fetched from that server) to place the request again; after a short
 * wait the current one if there is none yet. Callers retry up to CLIENT_RETRIES times. */
struct srvlist *client_list_retry(struct srvlist *s, unsigned idx, int attempt);
#define CLIENT_RETRIES 50
/* Server idx of s, from the list cache, is not there (refused, no route): drop the cached
 * entry and have the next client_list_retry fetch from the bootstrap servers. Returns 1 if s
 * was such a list (the caller then retries: -ERESTART), 0 if not (a real failure). A timeout
 * only drops the entry (returns 0). */
int client_cached_list_failed(struct srvlist *s, unsigned idx, int xrc);

/* ---- stagein.c ---- */
/* chfs_set_stagein_buf_size's value (0: the server's default). */
unsigned stagein_piece(void);

/* ---- rpc.c ---- */
/* Size of the request buffer and of the default reply buffer of a struct rpc. */
#define RPC_SMALL (8192 + 1024 + CHFS_PATH_MAX * 2)
/* One request/reply. The buffers (2 x RPC_SMALL) live on the heap, never on the stack: a
 * rename used to carry ~160 KB of them, beyond musl's thread stacks and sigaltstacks. Declare
 * with RPC_DECL so they are freed when r goes out of scope (no goto may jump over it). */
struct rpc {
	struct wenc e;
	uint8_t *buf; /* request buffer */
	uint8_t *rep; /* reply buffer (a caller may point it at a larger one after rpc_begin) */
	size_t repcap, replen;
	struct wdec d; /* reply body after rpc_call */
	uint8_t *mem;  /* the heap buffers; NULL if their allocation failed (rpc_call: -ENOMEM) */
};
#define RPC_DECL(r) struct rpc r __attribute__((cleanup(rpc_end))) = {0}
/* Start a request for op in r (allocating its buffers on first use). */
void rpc_begin(struct rpc *r, unsigned op);
/* Free r's buffers (the RPC_DECL cleanup). */
void rpc_end(struct rpc *r);
/* Send to server idx and wait; on 0, r->d decodes the reply body. -ERESTART: the server's
 * member list is newer than s (nothing was done; see client_list_retry). */
int rpc_call(struct srvlist *s, unsigned idx, struct rpc *r);
/* rpc_call to the owner of canonical path p, placed again with the newer list as long as the
 * server says the list changed (the request body does not depend on the list). */
int rpc_call_path(struct srvlist *s, const char *p, struct rpc *r);
/* Same; *by: the address of the server that answered (valid until chfs_term). */
int rpc_call_path_by(struct srvlist *s, const char *p, struct rpc *r, const char **by);
/* Same, with caller-provided buffers (large messages); epoch: the list the request is placed with. */
void rpc_fill_hdr(uint8_t *msg, size_t len, unsigned op, uint64_t epoch);
int rpc_status(struct srvlist *s, unsigned idx, int xrc, const uint8_t *rep, size_t replen,
               struct wdec *body);
int rpc_timeout(void);
/* -ERESTART left after CLIENT_RETRIES attempts becomes EIO (with a log line). */
int rpc_restart_failed(int rc);

/* ---- backing_paths.c ---- */
/* The backing-file path server addr gave for fileid (copied to buf): 0, or -ENOENT if none is
 * kept, -ERANGE if it does not fit. */
int backing_path_get(const char *addr, uint64_t fileid, char *buf, size_t size);
/* Keep what server addr said (WOP_LOCAL_PATH) of a file without the persistent backend. */
void backing_path_put(const char *addr, uint64_t fileid, const char *path);

/* ---- fdtable.c ---- */
/* A local server's backing file of a descriptor's file (io.c): fd -2 if not usable; guard: the
 * server's fast-path page (lib/localguard.h), NULL if none. Kept until the descriptor closes
 * (other threads may be using the fd), found by address (indices change with the list). */
struct fastpath_page;
struct direct {
	char addr[WIRE_ADDR_MAX];
	int fd;
	struct fastpath_page *guard;
};
struct chfs_file {
	pthread_mutex_t lock; /* position and size tracking */
	char path[CHFS_PATH_MAX];
	struct chfs_md md; /* as of open/create (fileid, chunk size, placement) */
	int append, isdir;
	off_t pos;
	uint64_t written_end;  /* highest offset this descriptor wrote */
	int dirty;             /* written_end or mtime not yet reported to the owner */
	uint64_t writes;       /* write transfers so far (paces the size reports, io.c) */
	struct direct *direct; /* local fast path: backing files of this node's servers, by address */
	unsigned ndirect;
	/* CHFS_BUF_SIZE write-back buffer: one run of sequential small writes, flushed when a
	 * write does not extend it, and before reads, fsync, close, stat and size reports. */
	pthread_mutex_t wlock;
	uint8_t *wbuf;
	size_t wcap, wlen;
	uint64_t woff;
	atomic_int refs;
	pid_t orphan; /* its name was removed while open, by this process (orphan.c); 0: not;
	               * ORPHAN_LEASED: by any, the owner keeps it for our open lease */
	int leased;   /* the open took an open lease (open_lease.c) */
};
#define ORPHAN_LEASED ((pid_t)-1)
int fd_alloc(struct chfs_file *f);
struct chfs_file *fd_get(int fd); /* NULL + errno EBADF */
void fd_put(struct chfs_file *f);
int fd_release(int fd, struct chfs_file **f); /* remove from the table */
/* Report the sizes of every dirty descriptor (optionally only those of fileid). */
int fd_sync_sizes(uint64_t fileid);
/* ---- sync.c ---- */
/* Every server flushes what was written to the backend; -EIO if a file failed (logged). */
int client_flush_backend(void);
/* Apply fn to every open file with this fileid (rename, truncate). */
void fd_foreach_fileid(uint64_t fileid, void (*fn)(struct chfs_file *, void *), void *arg);
/* fd_foreach_fileid callback: the open file's size is now *(uint64_t *)arg (a truncate). */
void fd_clamp_size(struct chfs_file *f, void *arg);

/* ---- orphan.c: files that outlive their name (see there) ---- */
/* The record `removed` lost its name: this process's descriptors of it keep the data (returns
 * how many; 0: the caller removes the data). */
int orphan_hold(const struct chfs_md *removed);
/* An orphan descriptor's record with its current size. */
void orphan_size(struct chfs_file *f, struct chfs_md *md);
/* f was taken out of the table: remove the data if it was the last descriptor of an orphan. */
void orphan_release(struct chfs_file *f);
int orphan_truncate(struct srvlist *s, struct chfs_file *f, off_t len);
/* Process exit (chfs_term): remove the data of every orphan still open. */
void orphan_term(void);
/* ---- orphan_lease.c: the servers' leases on this process's orphans (see there) ---- */
/* Register md's file at a server, which removes its data if this process stops renewing. */
void orphan_lease_hold(struct srvlist *s, const struct chfs_md *md);
/* This process removed the data of fileid: stop renewing its lease, and end it at the server
 * if the removal reached every server (removed); else the server removes them again, on every
 * member, once the lease runs out (server/orphans.c). */
void orphan_lease_drop(struct srvlist *s, uint64_t fileid, int removed);
/* chfs_term: stop the renewal thread (after every lease was dropped). */
void orphan_lease_stop(void);
/* Start the renewal thread if it does not run (an open lease was taken). */
void lease_renewer_need(void);
/* f's name is gone (another process unlinked it) and our open lease keeps its data: answer
 * from the descriptor from now on, as an orphan. */
void orphan_mark_leased(struct chfs_file *f);

/* ---- open_lease.c: this process's open leases at the owners (see there) ---- */
void open_lease_init(void);
void open_lease_after_fork(void);
/* An open of cpath took a lease (WOP_STAT_OPEN, WIRE_CREATE_LEASE) at its owner / a leased
 * descriptor was closed. */
void open_lease_opened(const char *cpath);
void open_lease_closed(uint64_t fileid);
/* 1 while this process has leases to renew or closes to report. */
int open_lease_active(void);
/* The renewal thread's round: renew at every server, report the closes; the lease in ms (0:
 * none answered). */
int open_lease_renew(struct srvlist *s);
/* chfs_term, chfs_end_leases: end every lease of this process (at the servers that took one). */
void open_lease_end(void);

/* ---- link.c: hard links (see there) ---- */
/* The inode record of linked file `fileid` (its attributes, nlink). */
int link_inode_get(struct srvlist *s, uint64_t fileid, struct chfs_md *md);
/* A SETATTR of a linked file: at its inode record. */
int link_setattr(struct srvlist *s, uint64_t fileid, const struct wire_setattr *a, struct chfs_md *out);
/* The name of record md was removed (unlink, rename over it): 1 if that was the file's last
 * name (a linked file's md becomes its inode record's, whose data then go), 0 if other names
 * keep it. */
int link_last_name(struct srvlist *s, struct chfs_md *md);

/* ---- dir_rename.c ---- */
/* Rename directory cf (record md) and the entries below it to ct (free: replace_dir_target ran);
 * pid: ct's parent's file id (server/fence.c). The source is fenced before it loses its name. */
int dir_rename(struct srvlist *s, const char *cf, const char *ct, const struct chfs_md *md, uint64_t pid);

/* ---- readdir.c ---- */
/* chfs_readdir with -errno: every entry of directory path (all servers) to filler. */
int readdir_all(const char *path, void *buf, int (*filler)(void *, const char *, const struct stat *, off_t));

/* ---- dirtimes.c ---- */
/* A name at cp was added (delta 0: an entry, 1: a subdirectory) or removed (0, -1) by server
 * done_at: update the directory's times and count at its owner if that is another server. */
void dir_touch(struct srvlist *s, const char *cp, unsigned done_at, int delta);

/* ---- namespace.c ---- */
/* The prologue every path call shares (as Redis's lookupKeyReadOrReply, libuv's PATH/INIT):
 * canonicalise, take the server list, optionally report this process's pending sizes first
 * (so the call sees its own writes), then look the name up (NS_LOOKUP), follow its symlinks
 * (NS_RESOLVE: the final name in c->real) or check that its parent is a directory the caller
 * may add names to (NS_PARENT: its record in c->parent). Returns 0 or -errno; the caller
 * converts once with set_err. */
enum { NS_SYNC = 1, NS_LOOKUP = 2, NS_RESOLVE = 4, NS_PARENT = 8 };
struct ns_call {
	struct srvlist *s;
	struct chfs_md md, parent;
	char cp[CHFS_PATH_MAX];   /* canonical path */
	char real[CHFS_PATH_MAX]; /* NS_RESOLVE: the path after following symlinks */
};
int ns_begin(const char *path, unsigned how, struct ns_call *c);
static inline void ns_call_free(struct ns_call **c) { free(*c); }
/* A struct ns_call is ~17 KB (paths and records): on the heap, freed at the end of the scope,
 * so that no libchfs call needs a big stack frame (ctest chfs_stack_usage). */
#define NS_CALL_DECL(c) \
	struct ns_call *c __attribute__((cleanup(ns_call_free))) = malloc(sizeof(struct ns_call))
int ns_lookup(struct srvlist *s, const char *cpath, struct chfs_md *md);
/* ns_lookup with op WOP_STAT or WOP_STAT_OPEN (an open: take an open lease of a regular file). */
int ns_lookup_op(struct srvlist *s, const char *cpath, struct chfs_md *md, unsigned op);
/* Follow symlinks at the last component (up to 8); writes the resolved path to out. */
int ns_resolve(struct srvlist *s, const char *cpath, char *out, struct chfs_md *md);
void md_to_stat(const struct chfs_md *md, const char *cpath, struct stat *st);
int ns_report_size(struct chfs_file *f);
/* The metadata of file `fileid` under whatever name another process renamed it to (asked of
 * the servers' rename notes, server/moved.c); its descriptors follow that name (copied to
 * found, CHFS_PATH_MAX). -ENOENT if the file was removed. */
int ns_lookup_fileid(struct srvlist *s, uint64_t fileid, struct chfs_md *md, char *found);
/* Merge size/mtime of a local-placement file's backing file, asked of its home (a lookup
 * answered by the home itself skips this: the home merged before answering). */
void ns_merge_home(struct srvlist *s, struct chfs_md *md);
/* dir_fence.c: 1 if any server holds entries below directory cp (file id dirid), 0 if none.
 * Every server also fences cp first (server/fence.c): names added below it are refused for a
 * while, so an entry created meanwhile is either counted here or refused. The caller removes
 * cp, or lifts the fence with ns_dir_unfence when it does not. */
int ns_dir_fence(struct srvlist *s, const char *cp, uint64_t dirid);
void ns_dir_unfence(struct srvlist *s, const char *cp, uint64_t dirid);
/* After a request adding the name cp got ENOENT (its parent fenced, or gone): forget the
 * cached parent and look it up again into *pmd, waiting a little before every try but the
 * first. 0: send the request again (with pmd's file id); -ENOENT (the parent is gone, or
 * stayed fenced longer than a fence lives) or another error: give up with it. */
int ns_parent_again(struct srvlist *s, const char *cp, struct chfs_md *pmd, int attempt);
/* Remove directory cp's record at its owner (the caller checked it is empty); its parent's
 * times and count follow. */
int ns_rmdir_entry(struct srvlist *s, const char *cp);
/* Move the entry cf (record md) to ct, replacing what is there (a replaced file's data go when
 * that was its last name), and this process's descriptors of it: one RENAME if one server owns
 * both names, else INSERT at ct's owner then REMOVE_IF at cf's. The parents' times and counts
 * follow (dir_touch), for a non-directory not with NS_MOVE_NO_TOUCH. pid: the file id of ct's
 * parent as the caller saw it (server/fence.c; 0: unknown). */
enum { NS_MOVE_NO_TOUCH = 1 };
int ns_move(struct srvlist *s, const char *cf, const char *ct, const struct chfs_md *md, unsigned how,
            uint64_t pid);
/* data_bcast.c: every data server of md's file cuts its chunks at len (all or none: see there;
 * known_end: the file's end as the caller knows it, UINT64_MAX if it does not), drops them, or
 * forgets the name they would be flushed to the backend under. */
int data_truncate_all(struct srvlist *s, const struct chfs_md *md, uint64_t len, uint64_t known_end);
int data_remove_all(struct srvlist *s, const struct chfs_md *md);
int data_unnamed_all(struct srvlist *s, const struct chfs_md *md);

/* ---- perm.c: who a call acts for, and POSIX permission checks (0 or -EACCES/-EPERM) ---- */
enum { PERM_X = 1, PERM_W = 2, PERM_R = 4 };
/* Owner and group of a new entry in directory dir (NULL: the root): the caller's, or dir's
 * group and set-group-ID bit when dir has set-group-ID. */
void perm_new_owner(struct chfs_md *md, const struct chfs_md *dir);
int perm_access(const struct chfs_md *md, int want);
/* Adding (victim NULL) or removing/replacing victim in dir: write+search, sticky rule. */
int perm_dir_change(const struct chfs_md *dir, const struct chfs_md *victim);
int perm_owner(const struct chfs_md *md);
/* 1 when no check can fail (uid 0, or chfs_act_as with CHFS_ACT_CHECKED): skip lookups. */
int perm_exempt(void);
/* 1 when removing from dir needs the entry's owner (sticky, and the caller does not own dir). */
int perm_sticky_applies(const struct chfs_md *dir);
int perm_times(const struct chfs_md *md, int to_now);
int perm_chown(const struct chfs_md *md, uid_t uid, gid_t gid);
uint32_t perm_chmod_mode(const struct chfs_md *md, uint32_t mode);

/* ---- io.c ---- */
ssize_t io_transfer(struct chfs_file *f, int is_write, void *buf, size_t size, uint64_t off);
/* Write out the CHFS_BUF_SIZE buffer of f (0 or -errno of the write). */
int io_flush(struct chfs_file *f);

/* errno helper for the public edge: r < 0 -> errno = -r, return -1. */
static inline int set_err(int r)
{
	extern int *__errno_location(void);
	if (r < 0) {
		*__errno_location() = -r;
		return -1;
	}
	return r;
}

/* Send one request to several servers concurrently (rpc.c). Replies land in reps + i*cap;
 * rc[i] is each server's status. Returns the first error (0 if none). */
int rpc_multi(struct srvlist *s, const unsigned *idx, unsigned n, uint8_t *msg, size_t len, unsigned op,
              uint8_t *reps, size_t cap, size_t *replen, int *rc);
/* The server of an rpc_multi that answered -ERESTART (to fetch the newer list from). */
unsigned rpc_multi_refused(const unsigned *idx, unsigned n, const int *rc);
/* One request to many servers with rpc_multi: the buffers, on the heap (rpc.c). */
struct rpc_fanout {
	unsigned n;    /* servers asked: idx[0..n) */
	unsigned *idx; /* their indexes in the server list */
	uint8_t *reps; /* reply i at reps + i * cap */
	size_t cap;
	size_t *rl; /* reply lengths */
	int *rcs;   /* each server's status */
};
/* Buffers for s's servers, replies of cap bytes; every server (idx[i] = i) until the caller
 * sets n and idx. 0 or -ENOMEM (nothing to free then). */
int rpc_fanout_init(struct rpc_fanout *f, const struct srvlist *s, size_t cap);
void rpc_fanout_free(struct rpc_fanout *f);
/* rpc_multi of msg to f's servers: the first error (0 if none). */
int rpc_fanout_call(struct srvlist *s, struct rpc_fanout *f, uint8_t *msg, size_t len, unsigned op);
/* Server i's reply body into d: 0, or its status (-EIO if too short). */
int rpc_fanout_reply(const struct rpc_fanout *f, unsigned i, struct wdec *d);
int ns_truncate(struct srvlist *s, const char *cp, const struct chfs_md *md, off_t len);
#endif
