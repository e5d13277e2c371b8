/*
 * xprt_internal.h — state the transport modules share privately.
 *
 * Module map: xprt_open.c (provider choice, endpoint set-up and teardown), xprt_addr.c (address
 * strings, the peer cache), xprt_progress.c (the progress thread: reads the CQ and routes each
 * completion to its operation), xprt_call.c (client calls matched to replies by id), xprt_serve.c
 * (request queue, worker pool, replies, RMA), xprt_mem.c (memory registration), xprt_fastinit.c
 * (cheap libfabric start-up), xprt_reach.c (failing fast on a refused tcp peer), xprt_shm.c (everything only the shm provider needs: incarnation
 * names, peers that follow restarts, the sleeping progress loop), shm_doorbell.c (the futex
 * wake-up file it uses, as shm has no CQ wait object in libfabric 1.17), xprt_local.c (the
 * node-local transport: Unix sockets and process_vm_readv/writev, no libfabric; its server side
 * in xprt_local_serve.c, what both share in xprt_local.h),
 * xprt_local_dir.c (where its sockets live and when they are trusted), xprt_local_sweep.c
 * (dead servers' sockets removed), xprt_fi_dl.c
 * (libfabric loaded on first use).
 *
 * Every posted libfabric operation carries a struct xprt_op as its context; the progress thread
 * dispatches on op->kind. Messages are untagged (fi_send/fi_recv): libfabric 1.17's shm matches
 * unexpected *tagged* messages with a stale ignore mask and never delivers them, while untagged
 * unexpected messages are matched by source only and work. Each message starts with a fixed
 * 24-byte little-endian header — magic, version, kind (request/reply), sender-address length,
 * body length, call id — followed by the sender's raw provider address (requests) and the body.
 */
#ifndef CHFS_XPRT_INTERNAL_H
#define CHFS_XPRT_INTERNAL_H

#include "xprt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "shm_doorbell.h"

#define XPRT_WIRE_MAGIC 0x52505843u /* "CXPR" little endian */
#define XPRT_WIRE_VERSION 1
#define XPRT_HDR_SIZE 24
#define XPRT_MSG_REQUEST 1
#define XPRT_MSG_REPLY 2
#define XPRT_ADDR_MAX 128 /* largest raw provider address carried in a request */
#define XPRT_MAX_BODY ((size_t)(128 + 4) * 1024)
#define XPRT_RBUF_SIZE (XPRT_HDR_SIZE + XPRT_ADDR_MAX + XPRT_MAX_BODY)
#define XPRT_NBUFS_SERVER 48 /* receive buffers posted at open by a server */
#define XPRT_NBUFS_CLIENT 16 /* ... by a client; both grow with the calls in flight */
/* Bound of the receive-buffer pool (~135 KiB each, so ~35 MB): with more calls in flight, the
 * extra replies arrive unexpected and the provider buffers them (untagged messages, see above).
 * Was 4096 (~550 MB, never freed). */
#define XPRT_NBUFS_MAX 256
#define XPRT_SHM_TAG_SEP '~' /* separates an shm name from its incarnation tag */

enum xprt_kind { XPRT_TCP, XPRT_SHM, XPRT_VERBS, XPRT_SOCKETS };
enum xprt_op_kind { XPRT_OP_RECV, XPRT_OP_SEND, XPRT_OP_RMA };

struct xprt_op {
	struct fi_context2 fictx; /* must stay first: libfabric hands back this pointer */
	enum xprt_op_kind kind;
};

struct xprt_rbuf { /* one posted receive buffer */
	struct xprt_op op;
	int slot; /* index in x->bufs */
	char data[XPRT_RBUF_SIZE];
};

struct xprt_sendop { /* an in-flight send; owns its copy of the message */
	struct xprt_op op;
	struct xprt_sendop *prev, *next; /* x->sends, for cleanup at close */
	uint64_t call_id;                /* nonzero: a request of a call to fail on error */
	size_t len;
	char data[];
};

struct xprt_rmaop { /* an RMA a worker waits for; two references (worker, completion) */
	struct xprt_op op;
	atomic_int refs;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_bool done;
	int err;
	struct fid_mr *local_mr;    /* only with FI_MR_LOCAL */
	struct xprt_rma_late *late; /* set when the worker gave up on it: freed with it */
};

struct xprt_peer {
	struct xprt_peer *next; /* hash chain */
	fi_addr_t fi_addr;
	size_t rawlen;
	unsigned char raw[XPRT_ADDR_MAX];
	char addr[XPRT_ADDR_MAX + 16]; /* printable "<proto>://..." */
	/* shm: the peer's wake-up word, NULL if unavailable. Loaded without a lock by senders; a
	 * mapping replaced after a restart is retired (x->db_retired), never unmapped before close. */
	struct shm_doorbell *_Atomic db;
	unsigned long db_ident; /* shm: which incarnation of the peer db belongs to */
	atomic_bool stale;      /* shm: the peer restarted; resolve again before the next send */
	/* shm: a raw address with a "~tag" names one incarnation (requests carry those); one
	 * without names "whoever serves this name now", resolved through the doorbell file to the
	 * incarnation's endpoint name `ep`. A new incarnation gets a new AV entry (a name is never
	 * inserted twice with different meanings); the old entry is retired, never fi_av_remove'd. */
	bool pinned;
	char ep[XPRT_ADDR_MAX]; /* shm: endpoint name fi_addr was inserted for ("" = none) */
	atomic_bool answered;   /* a reply from it arrived (xprt_reach.c probes only before) */
	/* Reached over its node-local socket (xprt_local.c), not libfabric: client side, the
	 * server's connection; server side, the connection a local request came on. */
	struct xprt_lconn *local;
};

struct xprt_call {
	struct xprt_call *next; /* hash chain in x->calls */
	uint64_t id;
	pthread_cond_t cv;
	atomic_bool done;
	bool heap;
	int result;
	void *rep;
	size_t repcap, replen;
	int timeout_ms;
	struct timespec deadline;
	struct timespec probe_at; /* xprt_reach.c: when to check a never-answered peer */
	xprt_t *x;
	xprt_peer_t *peer;
	struct xprt_call *wprev, *wnext; /* x->waitq (caller-progress mode) or its local connection's
	                                 * waitq (xprt_local.h), under call_mu */
};

struct xprt_req {
	struct xprt_req *next; /* worker queue */
	xprt_t *x;
	xprt_peer_t *peer;
	uint64_t id;
	const char *body;
	size_t bodylen;
	struct xprt_rbuf *buf;      /* owns body */
	struct xprt_rma_late *late; /* RMA operations given up on but maybe still running */
	struct xprt_lconn *lconn;   /* a local connection's request (holds a reference), else NULL */
};

#define XPRT_HASH 1024

struct xprt {
	enum xprt_kind kind;
	/* The libfabric endpoint: opened by xprt_open, except on a client with CHFS_XPRT_LOCAL=1,
	 * where the first peer without a node-local socket opens it (xprt_ofi_ensure). */
	pthread_mutex_t ofi_mu;
	atomic_bool ofi_open;
	int ofi_rc; /* the first failed attempt's error, returned to every later one */
	bool ofi_tried;
	char ofi_host[256]; /* xprt_opts.host, kept for the deferred open */
	bool ofi_has_host;
	bool local_on;            /* client: use servers' node-local sockets (CHFS_XPRT_LOCAL=1) */
	struct xprt_local *local; /* xprt_local.c state, NULL until used */
	char proto[16];
	bool is_server;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	size_t inject_size;
	uint64_t mr_mode;
	char self_addr[XPRT_ADDR_MAX + 16];
	unsigned char self_raw[XPRT_ADDR_MAX];
	size_t self_rawlen;

	/* progress */
	pthread_mutex_t cq_mu; /* held by the one thread reading the CQ (xprt_progress.c) */
	pthread_t progress;
	bool progress_started;
	atomic_bool stopping;
	struct shm_doorbell *self_db; /* shm only */
	char shm_name[80];            /* stable name: addresses, doorbell file */
	char shm_epname[96];          /* this incarnation's libfabric endpoint name "<shm_name>~<tag>" */

	/* peers, by raw address */
	pthread_mutex_t peer_mu;
	struct xprt_peer *peers[XPRT_HASH];
	struct shm_doorbell **db_retired; /* peer_mu: replaced doorbell mappings, unmapped at close */
	size_t ndb_retired, capdb_retired;

	/* calls in flight, by id */
	pthread_mutex_t call_mu;
	struct xprt_call *calls[XPRT_HASH];
	atomic_uint_fast64_t next_id;

	/* Caller-progress mode (clients; xprt_call.c): the threads waiting for calls read the CQ
	 * themselves, one at a time (`poller`), the others wait in `waitq` for their reply or for
	 * their turn to poll; the progress thread only polls when no caller waits. call_mu. */
	bool caller_progress;
	struct xprt_call *_Atomic poller;
	struct xprt_call *waitq;
	int waiters;
	bool calls_recent;      /* a wait ended since the progress thread last looked */
	bool progress_in_cq;    /* the progress thread reads the CQ (blocking): interrupt it */
	pthread_cond_t park_cv; /* the progress thread parks here */

	/* sends in flight */
	pthread_mutex_t send_mu;
	struct xprt_sendop *sends;

	/* posted receive buffers (for teardown) */
	/* Posted receive buffers: a base count plus one per call in flight, so replies rarely
	 * arrive unexpected. bufs[] tracks them for teardown; a request's buffer is swapped out. */
	pthread_mutex_t bufs_mu;
	struct xprt_rbuf **bufs;
	atomic_int nbufs;
	int nbufs_base;
	atomic_int calls_in_flight;

	/* server */
	xprt_handler_fn handler;
	void *handler_arg;
	void *inline_arg;
	_Atomic(xprt_inline_fn) inline_fn; /* tried on the progress thread first: published like admit */
	_Atomic(xprt_admit_fn) admit;      /* set after the progress thread runs: published with release */
	void *admit_arg;
	unsigned nworkers;
	pthread_t *workers;
	unsigned nworkers_started;
	pthread_mutex_t q_mu;
	pthread_cond_t q_cv;
	struct xprt_req *q_head, *q_tail;
	bool q_stop;
	atomic_int rbufs_posted;

	atomic_uint_fast64_t next_key;

	struct {
		atomic_uint_fast64_t calls, requests, replies, rma_reads, rma_writes, rma_bytes, timeouts,
		        wakeups, refused, peers, local_peers;
	} st;
};

/* xprt_progress.c */
int xprt_progress_start(xprt_t *x);
void xprt_progress_stop(xprt_t *x);
/* Wake this process's progress thread (shm), so a just-posted operation gets progressed. */
void xprt_kick(xprt_t *x, xprt_peer_t *peer);
int xprt_post_recv(xprt_t *x, struct xprt_rbuf *b);
/* shm: a thread about to wait for *flag polls the CQ itself for a short while first (any thread
 * may dispatch completions), saving the two thread wake-ups of a hand-off through the progress
 * thread. Returns when *flag is set or the spin budget is spent. No-op on other providers. */
void xprt_poll_before_wait(xprt_t *x, atomic_bool *flag);
int xprt_fi_err(int fi_err);

/* Read one batch of completions (timeout_ms < 0: do not wait); returns how many were handled. */
int xprt_poll_cq(xprt_t *x, int timeout_ms);
/* Caller-progress mode: read the CQ (blocking as the provider allows) until *flag is set or
 * `until` passed; true if *flag is set. Another thread that sets *flag calls xprt_wake_poller. */
bool xprt_poll_until(xprt_t *x, atomic_bool *flag, const struct timespec *until);
void xprt_wake_poller(xprt_t *x);
/* Nonzero on the thread that is reading the CQ for the xprt (progress thread or a polling
 * caller): a send that finds the queue full must read the CQ itself, nobody else will. */
extern _Thread_local int xprt_tls_polling;

/* xprt_shm.c — the shm backend; the generic modules call these only when kind == XPRT_SHM. */
bool xprt_shm_name_ok(const char *s);
/* Choose the stable name (host, or a unique "chfs-<pid>-<n>") and this incarnation's endpoint
 * name x->shm_epname. */
int xprt_shm_name(xprt_t *x, const char *host, char *name, size_t size);
/* Sweep what killed processes left (once per process), then create our doorbell. */
int xprt_shm_open_doorbell(xprt_t *x);
void xprt_shm_resolve(xprt_t *x, xprt_peer_t *p); /* peer_mu held */
void xprt_shm_peer_check(xprt_t *x, xprt_peer_t *p);
fi_addr_t xprt_shm_peer_fi_addr(xprt_t *x, xprt_peer_t *p);
void xprt_shm_retired_free(xprt_t *x); /* at close, threads stopped */
void xprt_shm_progress(xprt_t *x);
void xprt_shm_kick(xprt_t *x, xprt_peer_t *peer);
void xprt_shm_poll_before_wait(xprt_t *x, atomic_bool *flag);
bool xprt_shm_poll_until(xprt_t *x, atomic_bool *flag, const struct timespec *until);

/* xprt_fastinit.c: bracket the process's first fi_getinfo (see there). */
void xprt_fastinit_begin(void);
void xprt_fastinit_end(void);

/* xprt_reach.c: a call without a reply after XPRT_REACH_AFTER_MS (peer never answered) or
 * XPRT_REACH_AGAIN_MS (it did), and every XPRT_REACH_AGAIN_MS after, probes the peer's TCP port
 * (at most XPRT_REACH_PROBE_MS) and fails at once if nobody listens there. */
#define XPRT_REACH_AFTER_MS 100
#define XPRT_REACH_AGAIN_MS 1000
#define XPRT_REACH_PROBE_MS 1000
bool xprt_reach_applies(const xprt_t *x, const xprt_peer_t *p); /* a tcp/sockets peer */
int xprt_reach_first_ms(const xprt_peer_t *p);                  /* when to probe first */
/* 0 (someone listens, or cannot tell), -ECONNREFUSED, -EHOSTUNREACH or -ENETUNREACH. */
int xprt_reach_probe(const xprt_peer_t *p, int timeout_ms);
/* xprt_addr.c */
/* xprt_connect without the node-local transport (opens the libfabric endpoint if needed). */
int xprt_ofi_connect(xprt_t *x, const char *addr, xprt_peer_t **out);
int xprt_parse_proto(const char *proto, enum xprt_kind *kind);
const char *xprt_kind_name(enum xprt_kind k);
int xprt_format_addr(enum xprt_kind k, const void *raw, size_t rawlen, char *buf, size_t size);
int xprt_peer_by_raw(xprt_t *x, const void *raw, size_t rawlen, xprt_peer_t **out);
void xprt_peers_free(xprt_t *x);
/* After a timeout: notice whether an shm peer was restarted (its mapping is then stale). */
void xprt_peer_check(xprt_t *x, xprt_peer_t *p);
/* Before a send: the fi_addr to use; an shm peer that restarted (or was not up when first
 * resolved) is resolved again. FI_ADDR_NOTAVAIL if nobody serves the name now. */
fi_addr_t xprt_peer_fi_addr(xprt_t *x, xprt_peer_t *p);

/* xprt_call.c */
int xprt_grow_bufs(xprt_t *x, int want);
void xprt_call_deliver(xprt_t *x, uint64_t id, const void *body, size_t len, int err);
/* Fail every call in flight to p with err (its local connection ended). */
void xprt_call_fail_peer(xprt_t *x, xprt_peer_t *p, int err);
/* Post a message (header already in place), retrying -FI_EAGAIN until the deadline. */
int xprt_send_msg(xprt_t *x, xprt_peer_t *p, int kind, uint64_t id, const void *addr, size_t addrlen,
                  const void *body, size_t bodylen, const struct timespec *deadline);
void xprt_sends_free(xprt_t *x);
struct xprt_hdr {
	int kind;
	uint16_t addrlen;
	uint32_t bodylen;
	uint64_t id;
};
void xprt_put_hdr(void *buf, const struct xprt_hdr *h);
/* Decode and bounds-check a received message of len bytes; -EPROTO if malformed. */
int xprt_get_hdr(const void *buf, size_t len, struct xprt_hdr *h);

/* xprt_open.c: open the libfabric endpoint now if it is not open (once; a failure sticks). */
int xprt_ofi_ensure(xprt_t *x);

/* xprt_fi_dl.c */
int xprt_fi_load(void); /* dlopen libfabric.so.1 (once); -ELIBACC with a message if impossible */
bool xprt_fi_loaded(void);

/* xprt_local_dir.c */
#define XPRT_LOCAL_PATH_MAX 108 /* sun_path */
int xprt_local_dir(char *buf, size_t size);
int xprt_local_dir_make(const char *dir);  /* server: create or accept our own 0700 directory */
int xprt_local_dir_check(const char *dir); /* client: ours, a directory, closed to others */
/* The directory opened (never through a link) if it passes xprt_local_dir_check: its fd. */
int xprt_local_dir_open(const char *dir);
int xprt_local_sock_check(const char *path);
int xprt_local_sock_path(const char *dir, const char *addr, char *buf, size_t size);

/* xprt_local_sweep.c: remove the sockets of dead servers from our directory (bounded work);
 * the number removed, or -errno when the directory is not ours. */
int xprt_local_sweep(const char *dir);

/* xprt_local.c */
struct xprt_lconn;
/* Client: a peer reached over addr's node-local socket, or -errno (use libfabric then). */
int xprt_local_connect(xprt_t *x, const char *addr, xprt_peer_t **out);
/* Before a call to local peer p: connect if not connected (within the call's deadline); *via
 * is p, or the libfabric peer to use instead when the server cannot serve us locally. */
int xprt_local_route(xprt_t *x, xprt_peer_t *p, const struct timespec *deadline, xprt_peer_t **via);
/* -ECONNRESET: the connection had ended unseen and nothing was sent (route the call again);
 * -ETIMEDOUT: the server took no request until the deadline. */
int xprt_local_send_request(xprt_t *x, xprt_peer_t *p, uint64_t id, const void *body, size_t len,
                            const struct timespec *deadline);
/* Server: publish x->self_addr's socket and accept connections. */
int xprt_local_listen(xprt_t *x);
/* A server that publishes no socket: remove what killed servers left, ours included. */
void xprt_local_unpublished(xprt_t *x);
int xprt_local_reply(xprt_req_t *r, const void *rep, size_t len);
int xprt_local_rma(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, void *local, size_t len,
                   bool is_read);
void xprt_local_conn_put(struct xprt_lconn *c);
void xprt_local_stop(xprt_t *x); /* stop accepting, end the server's connections, unlink */
void xprt_local_free(xprt_t *x); /* after the workers stopped */
void xprt_local_after_fork(xprt_t *x);

/* xprt_serve.c */
struct xprt_rbuf *xprt_rbuf_get(void);
void xprt_rbuf_put(struct xprt_rbuf *b);
/* A request read from a local connection (which the request holds a reference to). */
void xprt_serve_local_request(xprt_t *x, xprt_peer_t *peer, struct xprt_lconn *lc, struct xprt_rbuf *b,
                              const struct xprt_hdr *h);
void xprt_enqueue_request(xprt_t *x, struct xprt_rbuf *b, const struct xprt_hdr *h);
void xprt_rma_complete(struct xprt_rmaop *op, int err);
void xprt_workers_stop(xprt_t *x);

/* time helpers */
void xprt_deadline(struct timespec *ts, int timeout_ms);
bool xprt_past(const struct timespec *ts);

#endif /* CHFS_XPRT_INTERNAL_H */
