/*
 * conn_loop.c - gfccd's connection handling (chfs-stack cooperative
 * cache): one poll thread watches the two listeners and every idle
 * connection; a connection with a request waiting is handed to a worker
 * thread, which serves that one request and gives the connection back.
 * So the thread count is fixed whatever the number of connections, and an
 * idle connection costs a slot, not a thread.  Node-local connections and
 * peer connections have separate queues and workers (CONN_WORKERS_LOCAL,
 * CONN_WORKERS_PEER): a peer that stops reading holds a peer worker in
 * its reply's send for up to CONN_IO_TIMEOUT_MS, and with one shared pool
 * a few such peers kept the node's own processes waiting - their requests
 * timed out and they bypassed their gfccd.
 *
 * Bounds: at most CONN_MAX_LOCAL node-local and CONN_MAX_PEER peer
 * connections.  A peer that has not passed AUTH within CONN_AUTH_TIMEOUT
 * is closed, and when the peer slots are full a new connection evicts the
 * oldest one still unauthenticated (a flood of idle connections cannot
 * lock out real peers); if all are authenticated the newcomer is refused.
 * Any connection idle for CONN_IDLE_TIMEOUT is closed; a request must
 * arrive and be answered within CONN_IO_TIMEOUT_MS (socket timeouts), so a
 * stalled client ties a worker up for a bounded time only.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "conn_loop.h"

#define CONN_SLOTS	(CONN_MAX_LOCAL + CONN_MAX_PEER)

/* connections with a request waiting, served by one kind's workers */
struct work_queue {
	pthread_cond_t cv;
	struct conn *q[CONN_SLOTS];
	int head, len;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn *slot[CONN_SLOTS];
static struct work_queue work[2] = {	/* [from_peer] */
	{ .cv = PTHREAD_COND_INITIALIZER }, { .cv = PTHREAD_COND_INITIALIZER }
};
static int nopen;
static int wake_pipe[2];
static const struct conn_handlers *handlers;

static void
wake_poller(void)
{
	char b = 0;

	(void)!write(wake_pipe[1], &b, 1);
}

/* under mu */
static void
slot_close(int i)
{
	close(slot[i]->fd);
	free(slot[i]);
	slot[i] = NULL;
	nopen--;
}

/* under mu */
static void
work_push(struct conn *c)
{
	struct work_queue *w = &work[c->from_peer != 0];

	w->q[(w->head + w->len) % CONN_SLOTS] = c;
	w->len++;
	pthread_cond_signal(&w->cv);
}

/* a worker of one kind: arg is &work[0] (local) or &work[1] (peers) */
static void *
worker_main(void *arg)
{
	struct work_queue *w = arg;
	struct conn *c;
	int i, r;

	for (;;) {
		pthread_mutex_lock(&mu);
		while (w->len == 0)
			pthread_cond_wait(&w->cv, &mu);
		c = w->q[w->head];
		w->head = (w->head + 1) % CONN_SLOTS;
		w->len--;
		pthread_mutex_unlock(&mu);

		r = handlers->request(c);

		pthread_mutex_lock(&mu);
		c->busy = 0;
		c->last = time(NULL);
		if (r < 0) {
			for (i = 0; i < CONN_SLOTS && slot[i] != c; i++)
				;
			if (i < CONN_SLOTS)
				slot_close(i);
		}
		pthread_mutex_unlock(&mu);
		wake_poller();
	}
	return (NULL);
}

static void
set_io_timeouts(int fd)
{
	struct timeval tv = { CONN_IO_TIMEOUT_MS / 1000,
	    (CONN_IO_TIMEOUT_MS % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* under mu: a free slot for a new connection of this kind, or -1 */
static int
slot_for(int from_peer, time_t now)
{
	int i, n = 0, free_i = -1, oldest = -1;

	for (i = 0; i < CONN_SLOTS; i++) {
		if (slot[i] == NULL) {
			if (free_i < 0)
				free_i = i;
			continue;
		}
		if (slot[i]->from_peer != from_peer)
			continue;
		n++;
		if (from_peer && !slot[i]->authed && !slot[i]->busy &&
		    (oldest < 0 || slot[i]->opened < slot[oldest]->opened))
			oldest = i;
	}
	if (n < (from_peer ? CONN_MAX_PEER : CONN_MAX_LOCAL))
		return (free_i);
	if (oldest < 0)
		return (-1);	/* full of real peers: refuse the newcomer */
	slot_close(oldest);
	(void)now;
	return (oldest);
}

static void
accept_one(int lfd, int from_peer)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1, i;
	time_t now = time(NULL);
	struct conn *c;

	if (fd < 0)
		return;	/* EMFILE, ECONNABORTED, ...: the next poll retries */
	if (from_peer)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	set_io_timeouts(fd);
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->from_peer = from_peer;
	c->opened = c->last = now;
	pthread_mutex_lock(&mu);
	if ((i = slot_for(from_peer, now)) < 0) {
		pthread_mutex_unlock(&mu);
		close(fd);
		free(c);
		return;
	}
	slot[i] = c;
	nopen++;
	pthread_mutex_unlock(&mu);
	/* the peer challenge is 40 bytes into a fresh socket: no blocking */
	if (handlers->open != NULL && handlers->open(c) < 0) {
		pthread_mutex_lock(&mu);
		slot_close(i);
		pthread_mutex_unlock(&mu);
	}
}

/* under mu: close connections past their auth or idle deadline */
static void
expire(time_t now)
{
	int i;

	for (i = 0; i < CONN_SLOTS; i++) {
		struct conn *c = slot[i];

		if (c == NULL || c->busy)
			continue;
		if ((c->from_peer && !c->authed &&
		    now - c->opened >= CONN_AUTH_TIMEOUT) ||
		    now - c->last >= CONN_IDLE_TIMEOUT)
			slot_close(i);
	}
}

int
conn_loop_count(void)
{
	int n;

	pthread_mutex_lock(&mu);
	n = nopen;
	pthread_mutex_unlock(&mu);
	return (n);
}

int
conn_loop_run(int unix_fd, int tcp_fd, const struct conn_handlers *h)
{
	static struct pollfd pfd[CONN_SLOTS + 3];
	static struct conn *polled[CONN_SLOTS + 3];
	pthread_t t;
	char drain[256];
	int i, n, r;

	handlers = h;
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return (-errno);
	for (i = 0; i < CONN_WORKERS_LOCAL + CONN_WORKERS_PEER; i++) {
		if ((r = pthread_create(&t, NULL, worker_main,
		    &work[i >= CONN_WORKERS_LOCAL])) != 0)
			return (-r);
		pthread_detach(t);
	}
	for (;;) {
		pfd[0].fd = wake_pipe[0];
		pfd[1].fd = unix_fd;
		pfd[2].fd = tcp_fd;
		for (i = 0; i < 3; i++)
			pfd[i].events = POLLIN;
		n = 3;
		pthread_mutex_lock(&mu);
		expire(time(NULL));
		for (i = 0; i < CONN_SLOTS; i++) {
			if (slot[i] == NULL || slot[i]->busy)
				continue;
			pfd[n].fd = slot[i]->fd;
			pfd[n].events = POLLIN;
			polled[n++] = slot[i];
		}
		pthread_mutex_unlock(&mu);
		if (poll(pfd, n, 1000) < 0) {
			if (errno == EINTR)
				continue;
			return (-errno);
		}
		if (pfd[0].revents != 0)
			while (read(wake_pipe[0], drain, sizeof(drain)) > 0)
				;
		pthread_mutex_lock(&mu);
		for (i = 3; i < n; i++) {
			if (pfd[i].revents == 0)
				continue;
			/* readable, hung up or failed: a worker finds out */
			polled[i]->busy = 1;
			work_push(polled[i]);
		}
		pthread_mutex_unlock(&mu);
		if (pfd[1].revents != 0)
			accept_one(unix_fd, 0);
		if (pfd[2].revents != 0)
			accept_one(tcp_fd, 1);
	}
}
