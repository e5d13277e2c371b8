/*
 * xprt.h — the RPC transport of CHFS on libfabric (FI_EP_RDM).
 *
 * One xprt_t per process: a fabric, domain, reliable-datagram endpoint, completion queue, address
 * vector, and one progress thread that owns the completion queue. libfabric 1.17's tcp and shm
 * providers progress data only while some thread calls into them (a peer's RMA stalls until the
 * target polls), so the progress thread runs for the life of the xprt_t; it blocks on the CQ's
 * wait object (tcp, verbs) or, on shm (no wait object in 1.17), polls with an adaptive back-off so
 * an idle process uses no measurable CPU.
 *
 * Messages are opaque byte strings to this layer: a request from a client, a reply from the
 * server, matched by a per-xprt request id carried in the message header (untagged messages: libfabric
 * 1.17 shm never delivers unexpected tagged messages received with ignore bits). Bodies up to xprt_max_msg() bytes
 * travel inline; bulk data moves by RMA into or out of memory the client registered with
 * xprt_mem_register() and described in its request (the server calls xprt_rma_read/write).
 * The layer above (common/wire.h) defines what the bytes mean.
 *
 * Addresses are printable strings "<proto>://<provider address>", e.g. "tcp://10.0.0.2:40001" or
 * "shm://chfsd-1234"; xprt_self_addr() gives one, xprt_connect() accepts one from any process.
 * A peer learns a client's address from the first message (libfabric's FI_SOURCE is unreliable on
 * first contact), so servers need no address exchange beforehand.
 *
 * Errors are negative errno values: -ETIMEDOUT when no reply arrived within the timeout,
 * -EHOSTUNREACH/-ECONNREFUSED when the peer is known to be gone, -EMSGSIZE for an oversized
 * message, -EINVAL for bad arguments, -ENOMEM.
 */
#ifndef CHFS_XPRT_H
#define CHFS_XPRT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct xprt xprt_t;
typedef struct xprt_peer xprt_peer_t; /* owned by the xprt_t; valid until xprt_close */
typedef struct xprt_req xprt_req_t;   /* one incoming request on a server */
typedef struct xprt_mem xprt_mem_t;   /* one registered memory region */
typedef struct xprt_call xprt_call_t; /* one outstanding asynchronous call */

struct xprt_opts {
	/* "tcp" (tcp;ofi_rxm), "shm", "verbs" (verbs;ofi_rxm), "sockets"; upstream spellings such as
	 * "ofi+tcp", "ofi+tcp;ofi_rxm", "sm", "na+sm", "ofi+verbs;ofi_rxm" are accepted too. */
	const char *proto;
	/* Where to listen (servers): IPv4 address, host name or interface name, optionally
	 * ":port" (0 or absent = ephemeral). NULL = 127.0.0.1 for tcp/verbs; a unique name for shm.
	 * Clients pass NULL (or the address to bind, for multi-homed nodes). */
	const char *host;
	int is_server;     /* accept requests (xprt_serve) */
	unsigned nworkers; /* server worker threads calling the handler (default 4) */
};

/* Bring the endpoint up and start the progress thread. */
int xprt_open(const struct xprt_opts *o, xprt_t **out);
/* Stop threads (in-flight handlers finish first), release every resource. */
void xprt_close(xprt_t *x);
/* Forget the state inherited from a parent process after fork() without touching it (the
 * parent still uses it); the child must xprt_open() anew. */
void xprt_abandon_after_fork(xprt_t *x);

int xprt_self_addr(const xprt_t *x, char *buf, size_t size);
/* Canonical name of the protocol ("tcp", "shm", "verbs", "sockets"). */
const char *xprt_proto(const xprt_t *x);
/* Largest request or reply body sent inline (at least 64 KiB + 4 KiB). */
size_t xprt_max_msg(const xprt_t *x);

/* Resolve an address string (cached: the same string gives the same peer). No traffic. */
/* With CHFS_XPRT_LOCAL=1 (the default) a client reaches a server of its own user on its node over the
 * server's Unix socket and process_vm_readv/writev (xprt_local.c) and opens the libfabric
 * endpoint only for the first peer without one. */
int xprt_connect(xprt_t *x, const char *addr, xprt_peer_t **out);
const char *xprt_peer_addr(const xprt_peer_t *p);
/* Who serves an "shm://name" address on this node, for error messages: 0 (this user), -EACCES
 * (another user, *uid: libfabric shm joins processes of one user only), -ENOENT (nobody),
 * -EINVAL (not an shm address). */
int xprt_shm_owner(const char *addr, uid_t *uid);

/* ---- client side (any xprt_t, servers included, can call) ---- */

/* Send req, wait for the reply (copied into rep, at most repcap bytes; *replen gets the full
 * length, -EMSGSIZE if it did not fit). timeout_ms <= 0 means wait forever. Thread-safe; any
 * number of calls may be in flight from any number of threads. */
int xprt_call(xprt_t *x, xprt_peer_t *p, const void *req, size_t reqlen, void *rep, size_t repcap,
              size_t *replen, int timeout_ms);
/* Asynchronous form: start, then wait (exactly once) for each started call. */
int xprt_call_start(xprt_t *x, xprt_peer_t *p, const void *req, size_t reqlen, void *rep, size_t repcap,
                    int timeout_ms, xprt_call_t **out);
int xprt_call_wait(xprt_call_t *c, size_t *replen);

/* Memory the peer may read (XPRT_MEM_REMOTE_READ) or write (XPRT_MEM_REMOTE_WRITE) by RMA. */
#define XPRT_MEM_REMOTE_READ 1
#define XPRT_MEM_REMOTE_WRITE 2
struct xprt_rma_desc { /* travels inside a request, fixed 24 bytes, little endian on the wire */
	uint64_t addr; /* the buffer's virtual address (providers without FI_MR_VIRT_ADDR ignore it) */
	uint64_t key;  /* remote key */
	uint64_t len;  /* bytes exposed */
};
int xprt_mem_register(xprt_t *x, void *buf, size_t len, int access, xprt_mem_t **mr,
                      struct xprt_rma_desc *desc);
void xprt_mem_deregister(xprt_mem_t *mr);

/* ---- server side ---- */

typedef void (*xprt_handler_fn)(xprt_req_t *r, void *arg);
/* Admission: called on the progress thread with each request's body before the transport keeps
 * any state for its sender (the sender's address in a request is only claimed, not proven). A
 * request it rejects (returns 0) is dropped: no peer or address-vector entry, no reply to the
 * claimed address. Must be cheap and must not block. Set it before xprt_serve. */
typedef int (*xprt_admit_fn)(const void *body, size_t len, void *arg);
int xprt_serve_admit(xprt_t *x, xprt_admit_fn fn, void *arg);
/* Start calling h(r, arg) on the worker threads for every request; returns at once. Each request
 * must be answered with exactly one xprt_reply() (which releases r). */
int xprt_serve(xprt_t *x, xprt_handler_fn h, void *arg);
/* Small requests without a thread hand-off: fn(r, arg) is called on the progress thread for each
 * admitted request before it is queued for the workers. It either answers r (xprt_reply, which
 * releases r) and returns nonzero, or returns 0 without touching r and the request goes to a
 * worker as usual. It must not block, wait for another call, or use RMA: while it runs nobody
 * reads the completion queue. Set it before xprt_serve. */
typedef int (*xprt_inline_fn)(xprt_req_t *r, void *arg);
int xprt_serve_inline(xprt_t *x, xprt_inline_fn fn, void *arg);
const void *xprt_req_data(const xprt_req_t *r, size_t *len);
/* The client's address string (for logs and membership). */
const char *xprt_req_peer_addr(const xprt_req_t *r);
/* Pull len bytes at remote->addr + off of the requesting client into local (write RPCs), or push
 * local to it (read RPCs). Blocks the calling worker until the transfer completed or failed;
 * -ETIMEDOUT only when no XPRT_RMA_CHUNK completed for XPRT_RMA_STALL_MS (a slow transfer that
 * progresses never times out). After a failure, parts of the transfer may still be running and
 * touch `local`: hand that buffer (from malloc) to xprt_rma_retire() and never use it again. */
#define XPRT_RMA_CHUNK ((size_t)1 << 20)
#define XPRT_RMA_STALL_MS 10000
int xprt_rma_read(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, void *local, size_t len);
int xprt_rma_write(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, const void *local,
                   size_t len);
/* Give up the malloc'd buffer of a failed xprt_rma_read/write of request r (before replying): it
 * is freed once no operation of r can touch it any more (at once if none is left). */
void xprt_rma_retire(xprt_req_t *r, void *buf);
/* 1 when the kernel copies every byte an RMA of r moves (the node-local transport's
 * process_vm_readv/writev): a fault in `local` then fails the RMA with EFAULT, never a signal,
 * so `local` may be a mapping of a file that can shrink meanwhile. Providers may memcpy. */
int xprt_rma_by_kernel(const xprt_req_t *r);
int xprt_reply(xprt_req_t *r, const void *rep, size_t len);
/* Client side: the timeout for a call whose server moves `bytes` by RMA, given the timeout of a
 * call without bulk data (<= 0: none): base_ms plus the time the bytes take at
 * XPRT_TRANSFER_MIN_RATE. The client cannot see the server's progress, so this is a rate, not a
 * stall detector: generous enough for slow links, short enough that a dead server is noticed
 * (a 1 MiB write to a killed server fails after base_ms + 1 s, not base_ms + 10 s). */
#define XPRT_TRANSFER_MIN_RATE ((uint64_t)1 << 20) /* bytes per second */
int xprt_transfer_timeout_ms(int base_ms, uint64_t bytes);

/* Counters for benchmarks and tests. */
struct xprt_stats {
	uint64_t calls, requests, replies, rma_reads, rma_writes, rma_bytes, timeouts, wakeups;
	uint64_t refused;     /* requests the admission function rejected */
	uint64_t peers;       /* entries in the peer cache */
	uint64_t local_peers; /* of which reached over their node-local socket (CHFS_XPRT_LOCAL=1) */
};
void xprt_get_stats(const xprt_t *x, struct xprt_stats *s);

#endif /* CHFS_XPRT_H */
