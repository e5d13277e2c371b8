/*
 * xprt_local_serve.c — the server side of the node-local transport (see xprt_local.c): the
 * published socket, an acceptor thread, one thread per connection reading requests into the
 * server's queue (admission, inline handler, workers as for libfabric requests), replies, and
 * RMA by process_vm_readv/writev on the client's SO_PEERCRED pid.
 */
#define _GNU_SOURCE
#include "xprt_local.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

/* The hello: can we read the client's memory (process_vm_readv is what RMA will use)? */
static int hello_check(struct xprt_lconn *c)
{
	uint64_t hello[3], v = 0;
	if (recv(c->fd, hello, sizeof hello, 0) != sizeof hello || hello[0] != HELLO_MAGIC)
		return -EPROTO;
	struct iovec li = {&v, sizeof v}, ri = {(void *)(uintptr_t)hello[1], sizeof v};
	int32_t status = 0;
	if (process_vm_readv(c->pid, &li, 1, &ri, 1, 0) != (ssize_t)sizeof v)
		status = errno == ESRCH ? -ESRCH : -EPERM;
	else if (v != hello[2])
		status = -EPERM; /* not the memory of the process that connected */
	if (send(c->fd, &status, sizeof status, MSG_NOSIGNAL) != sizeof status)
		return -EHOSTUNREACH;
	return status;
}

/* Connection c's thread is over (or never started): out of the server's list, which
 * xprt_local's teardown waits to empty, and the list's reference dropped. */
static void conn_unlist(struct xprt_local *l, struct xprt_lconn *c)
{
	pthread_mutex_lock(&l->mu);
	for (struct xprt_lconn **pp = &l->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	l->nthreads--;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	xprt_local_conn_put(c);
}

static void *server_conn(void *arg)
{
	struct xprt_lconn *c = arg;
	xprt_t *x = c->x;
	if (hello_check(c) == 0) {
		xprt_local_timeout(c->fd, SO_RCVTIMEO, 0);
		xprt_local_timeout(c->fd, SO_SNDTIMEO, SEND_TIMEOUT_MS);
		for (;;) {
			struct xprt_rbuf *b = xprt_rbuf_get();
			if (!b)
				break;
			ssize_t n = xprt_local_recv(c->fd, b->data);
			struct xprt_hdr h;
			if (n <= 0 || xprt_get_hdr(b->data, (size_t)n, &h) < 0 ||
			    h.kind != XPRT_MSG_REQUEST) {
				xprt_rbuf_put(b);
				break;
			}
			atomic_fetch_add(&c->refs, 1); /* the request's */
			xprt_serve_local_request(x, &c->srvpeer, c, b, &h);
		}
	}
	atomic_store(&c->dead, true);
	shutdown(c->fd, SHUT_RDWR);
	conn_unlist(x->local, c);
	return NULL;
}

static void accept_one(xprt_t *x, struct xprt_local *l, int fd)
{
	struct ucred cr;
	socklen_t crlen = sizeof cr;
	struct xprt_lconn *c = NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 || cr.pid <= 0 ||
	    !(c = calloc(1, sizeof *c))) {
		close(fd);
		return;
	}
	int sz = SOCK_BUF;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
	xprt_local_timeout(fd, SO_RCVTIMEO, HELLO_TIMEOUT_MS);
	c->x = x;
	c->fd = fd;
	c->pid = cr.pid;
	c->uid = cr.uid;
	atomic_init(&c->refs, 1);
	pthread_mutex_init(&c->mu, NULL);
	c->peer = &c->srvpeer;
	c->srvpeer.fi_addr = FI_ADDR_NOTAVAIL;
	c->srvpeer.local = c;
	snprintf(c->srvpeer.addr, sizeof c->srvpeer.addr, "local://pid-%d-uid-%u", (int)cr.pid,
	         (unsigned)cr.uid);
	pthread_mutex_lock(&l->mu);
	c->next = l->conns;
	l->conns = c;
	l->nthreads++;
	pthread_mutex_unlock(&l->mu);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&c->thr, &a, server_conn, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc)
		conn_unlist(l, c);
}

static void *acceptor_main(void *arg)
{
	xprt_t *x = arg;
	struct xprt_local *l = x->local;
	for (;;) {
		struct pollfd p[2] = {{l->lfd, POLLIN, 0}, {l->stop[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			accept_one(x, l, fd);
		else if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
			usleep(10000); /* out of descriptors: let the pending one wait */
	}
	return NULL;
}

/* Our socket's path (in path, XPRT_LOCAL_PATH_MAX bytes) in our trusted directory (made first
 * if make), and the directory cleared: the sockets killed servers left (xprt_local_sweep.c),
 * and any socket under our own address, however young (a killed predecessor's: we hold the
 * address now). */
static int clear_path(xprt_t *x, bool make, char *path)
{
	char dir[XPRT_LOCAL_PATH_MAX];
	int rc = xprt_local_dir(dir, sizeof dir);
	if (rc == 0)
		rc = make ? xprt_local_dir_make(dir) : xprt_local_dir_check(dir);
	if (rc == 0)
		rc = xprt_local_sock_path(dir, x->self_addr, path, XPRT_LOCAL_PATH_MAX);
	if (rc < 0)
		return rc;
	xprt_local_sweep(dir);
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	return 0;
}

void xprt_local_unpublished(xprt_t *x)
{
	char path[XPRT_LOCAL_PATH_MAX];
	clear_path(x, false, path);
}

int xprt_local_listen(xprt_t *x)
{
	struct xprt_local *l = xprt_local_state(x);
	if (!l)
		return -ENOMEM;
	_Static_assert(sizeof l->path == XPRT_LOCAL_PATH_MAX, "l->path holds a socket path");
	int rc = clear_path(x, true, l->path);
	if (rc < 0)
		return rc;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", l->path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 256) < 0 ||
	    pipe2(l->stop, O_CLOEXEC) < 0) {
		rc = -errno;
		close(fd);
		l->path[0] = 0;
		return rc;
	}
	l->lfd = fd;
	xprt_local_thread(&l->acceptor, acceptor_main, x, &rc);
	if (rc < 0)
		return rc;
	l->acceptor_started = true;
	return 0;
}

/* ---------------- requests of local connections (server) ---------------- */

int xprt_local_reply(xprt_req_t *r, const void *rep, size_t len)
{
	struct xprt_lconn *c = r->lconn;
	if (atomic_load(&c->dead))
		return -EHOSTUNREACH;
	return xprt_local_send(c->fd, XPRT_MSG_REPLY, r->id, rep, len);
}

/* Copy between our buffer and the client's memory at remote->addr + off (bounds checked by
 * the caller), in XPRT_RMA_CHUNK pieces; a short transfer (a page unmapped meanwhile) fails. */
int xprt_local_rma(xprt_req_t *r, const struct xprt_rma_desc *remote, uint64_t off, void *local, size_t len,
                   bool is_read)
{
	struct xprt_lconn *c = r->lconn;
	size_t done = 0;
	while (done < len) {
		size_t k = len - done > XPRT_RMA_CHUNK ? XPRT_RMA_CHUNK : len - done;
		struct iovec li = {(char *)local + done, k};
		struct iovec ri = {(void *)(uintptr_t)(remote->addr + off + done), k};
		ssize_t n = is_read ? process_vm_readv(c->pid, &li, 1, &ri, 1, 0)
		                    : process_vm_writev(c->pid, &li, 1, &ri, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno == ESRCH ? -EHOSTUNREACH : n < 0 ? -errno : -EFAULT;
		done += (size_t)n;
	}
	return 0;
}
