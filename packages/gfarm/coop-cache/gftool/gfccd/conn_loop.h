/*
 * conn_loop.h - gfccd's connection handling: one poll thread, fixed
 * pools of workers (one for node-local requests, one for peers), bounded
 * connection counts, idle and auth timeouts
 * (see conn_loop.c).
 */
#ifndef CONN_LOOP_H
#define CONN_LOOP_H

#include <stdint.h>
#include <time.h>

#include "coop_cache_wire.h"
#include "coop_cache_auth.h"

#define CONN_WORKERS_LOCAL	4	/* threads serving node-local requests */
#define CONN_WORKERS_PEER	8	/* threads serving peers' requests */
#define CONN_MAX_LOCAL		256	/* node-local (UNIX socket) */
#define CONN_MAX_PEER		128	/* peers (TCP) */
#define CONN_AUTH_TIMEOUT	5	/* s for a peer to pass AUTH */
#define CONN_IDLE_TIMEOUT	60	/* s without a request */
#define CONN_IO_TIMEOUT_MS	5000	/* one request's send/receive */

/* one connection's state: peers authenticate first (gfccd.c) */
struct conn {
	int fd, from_peer, authed;
	uint64_t seq;				/* GET replies sent */
	unsigned char nonce_s[COOP_NONCE_LEN];
	unsigned char session[COOP_MAC_LEN];
	/* owned by conn_loop.c */
	int busy;
	time_t opened, last;
};

struct conn_handlers {
	/* a new connection; < 0 closes it */
	int (*open)(struct conn *);
	/* read and serve one request (blocking, within the IO timeout);
	 * < 0 closes the connection */
	int (*request)(struct conn *);
};

/* serve both listeners forever; returns only on a setup error (-errno) */
int conn_loop_run(int unix_fd, int tcp_fd, const struct conn_handlers *);
/* connections open now (local + peer), for the counters */
int conn_loop_count(void);

#endif /* CONN_LOOP_H */
