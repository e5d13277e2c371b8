/*
 * xprt_local.c — the node-local transport: Unix sockets and process_vm_readv/writev.
 *
 * Every process that loads Debian's libfabric sleeps ~0.2 s in PSM constructors, and a hooked
 * workflow runs hundreds of short processes that each start a CHFS client. A client whose
 * servers are all on its node needs no fabric at all: a server (xprt_serve) also listens on a
 * SOCK_SEQPACKET Unix socket named after its transport address (xprt_local_dir.c says where,
 * and why it can be trusted), and a client with CHFS_XPRT_LOCAL=1 reaches every server that has
 * such a socket through it; only the first peer without one opens the libfabric endpoint
 * (xprt_open.c), so a one-node pool never loads libfabric.
 *
 * Messages keep their bytes and framing (xprt_call.c's header; a request carries a one-byte
 * placeholder for the sender address): the server runs the same admission function, inline
 * handler and worker queue on them. SOCK_SEQPACKET keeps message boundaries, so one sendmsg is
 * one message and concurrent senders never interleave. Who the client is comes from
 * SO_PEERCRED (pid, uid), never from the message. Bulk data: a request's xprt_rma_desc holds the
 * client's virtual address (xprt_mem.c), and the server copies with process_vm_readv/writev on
 * the client's pid, in XPRT_RMA_CHUNK pieces, bounded by the descriptor's length.
 *
 * xprt_connect only checks the file system (no traffic, as over libfabric: a hung server costs
 * nothing until called); the first call connects. A connection starts with a hello: the client
 * sends the address and value of a cookie in its memory; the server reads the cookie by
 * process_vm_readv and answers whether it could. Where the kernel refuses (another uid, a
 * non-dumpable client, a foreign pid namespace), the client closes the socket and uses
 * libfabric for that server from then on.
 *
 * Client side: no thread of its own. One waiting caller at a time reads the connection's
 * replies and delivers each by call id (xprt_call.c's call_wait_local), its own included, so a
 * lone call costs one wake-up on the client (its reply), not two (a reader's, then the
 * caller's); when its own reply came it passes the role to another waiter. Requests go out
 * without blocking: a sender that finds the socket full reads the replies that have arrived
 * first (make_room), since the server may have stopped reading because nobody read them. When
 * the server goes away (EOF, ECONNRESET) every call in flight to it fails with -EHOSTUNREACH at
 * once, and the next call tries to connect again (a restarted server publishes a fresh
 * socket). Server side: an acceptor thread, and one thread per connection reading its
 * requests. Sockets are SOCK_CLOEXEC, and after fork() the child closes its copies.
 */
#define _GNU_SOURCE
#include "xprt_local.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

static uint64_t hello_cookie; /* client: what the server must be able to read from us */

void xprt_local_thread(pthread_t *t, void *(*fn)(void *), void *arg, int *rc)
{
	sigset_t all, old;
	sigfillset(&all); /* see xprt_progress_start: the program's signals are not for us */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	*rc = -pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void xprt_local_timeout(int fd, int opt, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

struct xprt_local *xprt_local_state(xprt_t *x)
{
	pthread_mutex_lock(&x->peer_mu);
	if (!x->local) {
		struct xprt_local *l = calloc(1, sizeof *l);
		if (l) {
			pthread_mutex_init(&l->mu, NULL);
			pthread_cond_init(&l->cv, NULL);
			l->lfd = l->stop[0] = l->stop[1] = -1;
			x->local = l;
		}
	}
	pthread_mutex_unlock(&x->peer_mu);
	return x->local;
}

void xprt_local_conn_put(struct xprt_lconn *c)
{
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->idle);
	free(c);
}

/* One message out (header, optional one-byte address placeholder, body) in one sendmsg. */
int xprt_local_send(int fd, int kind, uint64_t id, const void *body, size_t len)
{
	return xprt_local_send_flags(fd, kind, id, body, len, 0);
}

int xprt_local_send_flags(int fd, int kind, uint64_t id, const void *body, size_t len, int flags)
{
	if (len > XPRT_MAX_BODY) /* the peer would drop the connection (as xprt_send_msg refuses it) */
		return -EMSGSIZE;
	unsigned char hdr[XPRT_HDR_SIZE], addr = 0;
	bool req = kind == XPRT_MSG_REQUEST;
	struct xprt_hdr h = {kind, req ? 1 : 0, (uint32_t)len, id};
	xprt_put_hdr(hdr, &h);
	struct iovec iov[3] = {{hdr, sizeof hdr}, {&addr, req ? 1 : 0}, {(void *)body, len}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 3};
	ssize_t n;
	do
		n = sendmsg(fd, &m, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN) /* full: at once with MSG_DONTWAIT, else after SO_SNDTIMEO */
		return flags & MSG_DONTWAIT ? -EAGAIN : -ETIMEDOUT;
	if (n < 0)
		return errno == EMSGSIZE ? -EMSGSIZE : -EHOSTUNREACH;
	return 0;
}

/* Receive one message into buf (XPRT_RBUF_SIZE bytes); 0 at EOF, -errno on error or when the
 * message was larger than any valid one. */
ssize_t xprt_local_recv(int fd, void *buf)
{
	struct iovec iov = {buf, XPRT_RBUF_SIZE};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;
	do
		n = recvmsg(fd, &m, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (m.msg_flags & MSG_TRUNC) ? -EPROTO : n;
}

/* ---------------- client ---------------- */

/* The connection ended (EOF, reset, nonsense): nothing more will come on it; every call in
 * flight to its server fails at once, and the next call connects again. */
static void conn_lost(xprt_t *x, struct xprt_lconn *c, int fd)
{
	shutdown(fd, SHUT_RDWR);
	atomic_store(&c->dead, true);
	xprt_call_fail_peer(x, c->peer, -EHOSTUNREACH);
}

/* One reply from the socket, delivered to its call: 1; 0 if none came (the receive timeout,
 * a signal, or none waiting with MSG_DONTWAIT); -1 if the connection is over (conn_lost). */
static int take_reply(xprt_t *x, struct xprt_lconn *c, int fd, int flags)
{
	struct iovec iov = {c->rbuf, XPRT_RBUF_SIZE};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n = recvmsg(fd, &m, flags);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	struct xprt_hdr h;
	if (n <= 0 || (m.msg_flags & MSG_TRUNC) || xprt_get_hdr(c->rbuf, (size_t)n, &h) < 0 ||
	    h.kind != XPRT_MSG_REPLY) {
		conn_lost(x, c, fd);
		return -1;
	}
	xprt_call_deliver(x, h.id, c->rbuf + XPRT_HDR_SIZE, h.bodylen, 0);
	return 1;
}

/* A reader (or a sender making room) takes the socket: its fd, counted so that a reconnect
 * waits for it; -1 if the connection is dead. reader_leave gives it back. */
static int reader_enter(struct xprt_lconn *c)
{
	pthread_mutex_lock(&c->mu);
	int fd = atomic_load(&c->dead) ? -1 : c->fd;
	if (fd >= 0)
		c->readers++;
	pthread_mutex_unlock(&c->mu);
	return fd;
}

static void reader_leave(struct xprt_lconn *c)
{
	pthread_mutex_lock(&c->mu);
	if (--c->readers == 0)
		pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->mu);
}

/* The receive buffer, allocated by the first reader (only the reader touches it). */
static bool rbuf_ready(struct xprt_lconn *c) { return c->rbuf || (c->rbuf = malloc(XPRT_RBUF_SIZE)); }

/* No reader thread: a waiting caller reads (xprt_call.c, call_wait_local), so a lone call's
 * reply wakes its own thread, not a reader that then wakes the caller. The socket's receive
 * timeout (RECV_SLICE_MS) lets the reader look at its deadline. The fd cannot change under a
 * reader: a reconnect (conn_start) first waits until no reader is left, and whoever marks the
 * connection dead shuts the socket down first, so a reader blocked in it returns. */
static void read_replies(xprt_t *x, struct xprt_lconn *c, int fd, atomic_bool *done,
                         const struct timespec *deadline)
{
	if (!rbuf_ready(c)) {
		xprt_call_fail_peer(x, c->peer, -ENOMEM);
		return;
	}
	while (!atomic_load(done)) /* (a stream of others' replies must not hold our deadline off) */
		if (take_reply(x, c, fd, 0) < 0 || xprt_past(deadline))
			return;
	/* Our reply came. Others in flight: deliver what has already arrived before the role
	 * passes on, so their threads are not woken only to read it. */
	while (atomic_load(&x->calls_in_flight) > 1 && take_reply(x, c, fd, MSG_DONTWAIT) > 0)
		;
}

void xprt_local_read_replies(xprt_t *x, struct xprt_lconn *c, atomic_bool *done,
                             const struct timespec *deadline)
{
	int fd = reader_enter(c);
	if (fd < 0) {
		xprt_call_fail_peer(x, c->peer, -EHOSTUNREACH);
		return;
	}
	read_replies(x, c, fd, done, deadline);
	reader_leave(c);
}

/* Milliseconds until ts, for a socket timeout: at least 1; 0 (none) for "forever". */
static int ms_left(const struct timespec *ts)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long ms = (long long)(ts->tv_sec - now.tv_sec) * 1000 + (ts->tv_nsec - now.tv_nsec) / 1000000;
	if (ms > 365LL * 86400 * 1000)
		return 0;
	return ms < 1 ? 1 : ms > 1 << 30 ? 1 << 30 : (int)ms;
}

/* Connect to the socket at path and pass the hello, within the deadline of the call that
 * needs it. Returns the fd; -ENOENT (nobody published it), -EHOSTUNREACH (a socket nobody
 * listens on: its server is gone), -ETIMEDOUT, or -EPERM/-ESRCH/-EPROTO (the server cannot
 * read our memory, or is not our user's). */
static int dial(const char *path, const struct timespec *deadline)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	struct ucred cr;
	socklen_t crlen = sizeof cr;
	int rc = 0, ms = ms_left(deadline);
	xprt_local_timeout(fd, SO_SNDTIMEO, ms);
	xprt_local_timeout(fd, SO_RCVTIMEO, ms);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		rc = errno == ENOENT                           ? -ENOENT
		     : errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT
		                                               : -EHOSTUNREACH;
	else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0)
		rc = -errno;
	else if (cr.uid != geteuid())
		rc = -EPERM; /* not our user's server, whatever the file system said */
	if (rc == 0) {
		uint64_t hello[3] = {HELLO_MAGIC, (uint64_t)(uintptr_t)&hello_cookie, hello_cookie};
		int32_t status = -EPROTO;
		ssize_t n = send(fd, hello, sizeof hello, MSG_NOSIGNAL);
		if (n == (ssize_t)sizeof hello)
			n = recv(fd, &status, sizeof status, 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			rc = -ETIMEDOUT; /* a hung server: the call times out, as over libfabric */
		else if (n == 0)
			rc = -EPROTO; /* closed without an answer: it cannot see our pid (namespaces) */
		else if (n != (ssize_t)sizeof status)
			rc = -EHOSTUNREACH;
		else
			rc = status; /* -EPERM: the server may not read our memory */
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	int sz = SOCK_BUF;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
	xprt_local_timeout(fd, SO_SNDTIMEO, SEND_TIMEOUT_MS);
	xprt_local_timeout(fd, SO_RCVTIMEO, RECV_SLICE_MS);
	return fd;
}

/* c->mu held, c->dead: (re)connect, once the last reader of the old socket (shut down when
 * it was marked dead) has left it. */
static int conn_start(struct xprt_lconn *c, const struct timespec *deadline)
{
	while (c->readers > 0)
		pthread_cond_wait(&c->idle, &c->mu);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	int fd = dial(c->path, deadline);
	if (fd < 0)
		return fd;
	c->fd = fd;
	atomic_store(&c->dead, false);
	if (!c->ever) {
		c->ever = true;
		atomic_fetch_add(&c->x->st.local_peers, 1);
	}
	return 0;
}

/* Connecting costs no traffic (as xprt_connect promises): only the file system is checked
 * here; the first call connects (xprt_local_route). */
int xprt_local_connect(xprt_t *x, const char *addr, xprt_peer_t **out)
{
	char dir[XPRT_LOCAL_PATH_MAX];
	struct xprt_local *l = xprt_local_state(x);
	if (!l)
		return -ENOMEM;
	pthread_mutex_lock(&l->mu);
	for (struct xprt_lconn *c = l->conns; c; c = c->next)
		if (strcmp(c->peer->addr, addr) == 0) {
			*out = c->peer;
			pthread_mutex_unlock(&l->mu);
			return 0;
		}
	pthread_mutex_unlock(&l->mu);
	struct xprt_lconn *c = calloc(1, sizeof *c);
	xprt_peer_t *p = calloc(1, sizeof *p);
	int rc = c && p ? xprt_local_dir(dir, sizeof dir) : -ENOMEM;
	if (rc == 0)
		rc = xprt_local_dir_check(dir);
	if (rc == 0)
		rc = xprt_local_sock_path(dir, addr, c->path, sizeof c->path);
	if (rc == 0)
		rc = xprt_local_sock_check(c->path);
	if (rc < 0) {
		free(c);
		free(p);
		return rc;
	}
	pthread_mutex_lock(&l->mu);
	if (!hello_cookie && getrandom(&hello_cookie, sizeof hello_cookie, 0) != sizeof hello_cookie)
		hello_cookie = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
	c->x = x;
	c->fd = -1;
	c->peer = p;
	atomic_init(&c->refs, 1);
	atomic_init(&c->dead, true); /* not connected yet */
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->idle, NULL);
	snprintf(p->addr, sizeof p->addr, "%s", addr);
	p->local = c;
	p->fi_addr = FI_ADDR_NOTAVAIL;
	c->next = l->conns;
	l->conns = c;
	pthread_mutex_unlock(&l->mu);
	atomic_fetch_add(&x->st.peers, 1);
	*out = p;
	return 0;
}

int xprt_local_route(xprt_t *x, xprt_peer_t *p, const struct timespec *deadline, xprt_peer_t **via)
{
	struct xprt_lconn *c = p->local;
	*via = p;
	if (!atomic_load(&c->dead) && !atomic_load(&c->ofi))
		return 0;
	pthread_mutex_lock(&c->mu);
	int rc = 0;
	xprt_peer_t *ofi = atomic_load(&c->ofi);
	if (!ofi && atomic_load(&c->dead)) {
		rc = conn_start(c, deadline);
		/* The server cannot read our memory (another uid, we are not dumpable): libfabric
		 * from now on. Nobody published the socket (any more): libfabric for this call. */
		if (rc == -EPERM || rc == -ESRCH || rc == -EPROTO || rc == -ENOENT) {
			bool forever = rc != -ENOENT;
			rc = xprt_ofi_connect(x, p->addr, via);
			if (rc == 0 && forever)
				atomic_store(&c->ofi, *via);
		}
	} else if (ofi) {
		*via = ofi;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* The request socket is full: the server stopped reading it, maybe because its replies fill
 * ours and nobody reads them (a thread that starts many calls before it waits for any). Read
 * what has arrived, as the reader if nobody else is, then wait a moment for room or replies. */
static void make_room(xprt_t *x, struct xprt_lconn *c)
{
	pthread_mutex_lock(&x->call_mu);
	bool read = !c->reading;
	c->reading = true;
	pthread_mutex_unlock(&x->call_mu);
	int fd = reader_enter(c);
	if (fd >= 0) {
		if (read && rbuf_ready(c))
			while (take_reply(x, c, fd, MSG_DONTWAIT) > 0)
				;
		struct pollfd pf = {fd, POLLOUT | (read ? POLLIN : 0), 0};
		poll(&pf, 1, 10);
		reader_leave(c);
	}
	if (read) {
		pthread_mutex_lock(&x->call_mu);
		c->reading = false;
		if (c->waitq)
			pthread_cond_signal(&c->waitq->cv); /* a waiter may read again */
		pthread_mutex_unlock(&x->call_mu);
	}
}

int xprt_local_send_request(xprt_t *x, xprt_peer_t *p, uint64_t id, const void *body, size_t len,
                            const struct timespec *deadline)
{
	struct xprt_lconn *c = p->local;
	for (;;) {
		/* Under c->mu: a reconnect replaces c->fd, and a descriptor number closed meanwhile
		 * may already name another file of the program. Never blocking under it: a reader
		 * needs it to begin. */
		pthread_mutex_lock(&c->mu);
		int rc = atomic_load(&c->dead) ? -EHOSTUNREACH
		                               : xprt_local_send_flags(c->fd, XPRT_MSG_REQUEST, id, body, len,
		                                                       MSG_DONTWAIT);
		if (rc == -EHOSTUNREACH && !atomic_load(&c->dead)) {
			/* The server closed the connection while no call waited on it, so no reader saw
			 * its end. Nothing was sent: the caller routes the call again (-ECONNRESET). */
			shutdown(c->fd, SHUT_RDWR);
			atomic_store(&c->dead, true);
			rc = -ECONNRESET;
		}
		pthread_mutex_unlock(&c->mu);
		if (rc != -EAGAIN)
			return rc;
		if (xprt_past(deadline))
			return -ETIMEDOUT;
		make_room(x, c);
	}
}

/* ---------------- teardown ---------------- */

void xprt_local_stop(xprt_t *x)
{
	struct xprt_local *l = x->local;
	if (!l)
		return;
	if (l->acceptor_started) {
		if (write(l->stop[1], "x", 1) < 0)
			perror("xprt: waking the local acceptor");
		pthread_join(l->acceptor, NULL);
		l->acceptor_started = false;
	}
	if (l->lfd >= 0) {
		unlink(l->path);
		close(l->lfd);
		l->lfd = -1;
	}
	for (int i = 0; i < 2; i++)
		if (l->stop[i] >= 0)
			close(l->stop[i]);
	l->stop[0] = l->stop[1] = -1;
	pthread_mutex_lock(&l->mu);
	if (x->is_server) {
		for (struct xprt_lconn *c = l->conns; c; c = c->next)
			shutdown(c->fd, SHUT_RDWR);
		while (l->nthreads > 0)
			pthread_cond_wait(&l->cv, &l->mu);
	}
	pthread_mutex_unlock(&l->mu);
}

void xprt_local_free(xprt_t *x)
{
	struct xprt_local *l = x->local;
	if (!l)
		return;
	while (!x->is_server && l->conns) {
		struct xprt_lconn *c = l->conns;
		l->conns = c->next;
		free(c->rbuf);
		free(c->peer);
		xprt_local_conn_put(c);
	}
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
	x->local = NULL;
}

void xprt_local_after_fork(xprt_t *x)
{
	/* The child has copies of the descriptors, no threads; the parent keeps using the
	 * connections, so the child closes its copies (never shutdown: that would cut the
	 * parent's) and leaks the rest. */
	struct xprt_local *l = x ? x->local : NULL;
	if (!l)
		return;
	for (struct xprt_lconn *c = l->conns; c; c = c->next)
		if (c->fd >= 0)
			close(c->fd);
	for (int i = 0; i < 2; i++)
		if (l->stop[i] >= 0)
			close(l->stop[i]);
	if (l->lfd >= 0)
		close(l->lfd);
}
