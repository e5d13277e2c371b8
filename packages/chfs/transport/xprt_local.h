/*
 * xprt_local.h — what xprt_local.c (client side, teardown) and xprt_local_serve.c (server
 * side) share: the connection and listener state and the message helpers.
 */
#ifndef CHFS_XPRT_LOCAL_H
#define CHFS_XPRT_LOCAL_H

#include "xprt_internal.h"

#define HELLO_MAGIC 0x4f4c4843u /* "CHLO" */
#define HELLO_TIMEOUT_MS 2000
#define SEND_TIMEOUT_MS 10000
#define SOCK_BUF (1 << 20)
#define RECV_SLICE_MS 50 /* client: a reader looks at its call's deadline this often */

struct xprt_lconn {
	xprt_t *x;
	int fd;
	atomic_int refs;
	atomic_bool dead;
	pid_t pid; /* server side: the client's, from SO_PEERCRED */
	uid_t uid;
	pthread_t thr;       /* server: the connection's thread */
	pthread_mutex_t mu;  /* client: reconnecting, and readers below */
	pthread_cond_t idle; /* client: readers fell to 0 (a reconnect waits for it) */
	int readers;         /* client: callers reading the socket (0 or 1; under mu) */
	/* Client: the caller that reads replies for everyone (xprt_call.c, call_wait_local), the
	 * calls waiting on this connection (their wnext/wprev) — both under x->call_mu — and its
	 * receive buffer (only the reader touches it). */
	bool reading;
	struct xprt_call *waitq;
	char *rbuf;
	char path[108];           /* client: the server's socket */
	bool ever;                /* client: connected once (counted in local_peers) */
	xprt_peer_t *_Atomic ofi; /* client: the libfabric peer used instead (hello refused) */
	xprt_peer_t *peer;        /* client: the peer it serves; server: the synthetic peer below */
	struct xprt_lconn *next;  /* x->local->conns */
	struct xprt_peer srvpeer; /* server side: "local://<pid>" for xprt_req_peer_addr */
};

struct xprt_local {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct xprt_lconn *conns; /* server: open connections; client: every local peer's */
	int nthreads;             /* server: connection threads still running */
	int lfd;                  /* server: listening socket, -1 if none */
	int stop[2];              /* server: wakes the acceptor */
	pthread_t acceptor;
	bool acceptor_started;
	char path[108];
};

void xprt_local_thread(pthread_t *t, void *(*fn)(void *), void *arg, int *rc); /* signals blocked */
void xprt_local_timeout(int fd, int opt, int ms); /* SO_SNDTIMEO / SO_RCVTIMEO, 0 = none */
struct xprt_local *xprt_local_state(xprt_t *x);   /* created on first use */
/* One message (header, for requests a one-byte address placeholder, body) in one sendmsg. */
int xprt_local_send(int fd, int kind, uint64_t id, const void *body, size_t len);
/* The same with sendmsg flags; with MSG_DONTWAIT a full socket gives -EAGAIN at once. */
int xprt_local_send_flags(int fd, int kind, uint64_t id, const void *body, size_t len, int flags);
/* One message into buf (XPRT_RBUF_SIZE bytes): its length, 0 at EOF, -errno (-EPROTO: too big). */
ssize_t xprt_local_recv(int fd, void *buf);
/* Client: read replies from c's socket and deliver each to its call until *done (the reader's
 * own call), the deadline, or the connection's end (every call on it then fails). */
void xprt_local_read_replies(xprt_t *x, struct xprt_lconn *c, atomic_bool *done,
                             const struct timespec *deadline);

#endif /* CHFS_XPRT_LOCAL_H */
