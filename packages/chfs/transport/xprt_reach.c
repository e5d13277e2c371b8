/*
 * xprt_reach.c — tell a refused or unreachable tcp peer from a slow one, quickly.
 *
 * libfabric 1.17's tcp;ofi_rxm never reports a failed connection to the caller: a send to a
 * port nobody listens on is queued while rxm reconnects again and again (each attempt refused
 * within microseconds), and the call only ends at its RPC timeout — 30 s by default, and a
 * client tries the bootstrap list twice, so a wrong CHFS_SERVER took a minute or more to fail.
 *
 * So a call still without a reply after XPRT_REACH_AFTER_MS (a peer that never answered this
 * process) or XPRT_REACH_AGAIN_MS (one that did: it may have died since — a server killed while
 * a send to it is queued or its reply is awaited), and again every XPRT_REACH_AGAIN_MS, asks the
 * kernel directly: one non-blocking TCP connect to the peer's address, waited for at most
 * XPRT_REACH_PROBE_MS. Refused or no route: the call fails at once (-ECONNREFUSED,
 * -EHOSTUNREACH) and the caller can say which address it was. No SYN-ACK in that time fails a
 * call to a peer that never answered (nobody is there); for one that answered before it proves
 * nothing (a full listen backlog drops SYNs too), and the call goes on waiting. A listener that
 * accepts — a server that is busy, hung or still starting — leaves the call waiting for its
 * normal timeout: a slow server is never taken for a dead one. The probe costs nothing when
 * replies come in time (the common case). The probe connection is closed at once; chfsd's tcp
 * listener sees a connection without a connection request and drops it.
 *
 * Only for tcp and sockets, whose addresses are TCP endpoints; verbs peers listen on RDMA CM
 * and shm peers are found through their doorbell file (a missing one fails the send at once).
 */
#include "xprt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool xprt_reach_applies(const xprt_t *x, const xprt_peer_t *p)
{
	return (x->kind == XPRT_TCP || x->kind == XPRT_SOCKETS) && p->rawlen >= sizeof(struct sockaddr_in);
}

int xprt_reach_first_ms(const xprt_peer_t *p)
{
	return atomic_load(&p->answered) ? XPRT_REACH_AGAIN_MS : XPRT_REACH_AFTER_MS;
}

static int probe(const xprt_peer_t *p, int timeout_ms);

int xprt_reach_probe(const xprt_peer_t *p, int timeout_ms)
{
	int rc = probe(p, timeout_ms);
	if (rc == -ETIMEDOUT)
		rc = atomic_load(&p->answered) ? 0 : -EHOSTUNREACH;
	return rc;
}

/* 0 (someone listens, or cannot tell), -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH, or
 * -ETIMEDOUT (no SYN-ACK within timeout_ms). */
static int probe(const xprt_peer_t *p, int timeout_ms)
{
	struct sockaddr_in sin;
	memcpy(&sin, p->raw, sizeof sin);
	if (sin.sin_family != AF_INET)
		return 0;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return 0; /* cannot tell: let the call wait */
	int rc = 0;
	if (connect(s, (struct sockaddr *)&sin, sizeof sin) < 0) {
		rc = -errno;
		if (rc == -EINPROGRESS) {
			struct pollfd pfd = {.fd = s, .events = POLLOUT};
			int n = poll(&pfd, 1, timeout_ms);
			int err = 0;
			socklen_t len = sizeof err;
			if (n == 0)
				rc = -ETIMEDOUT; /* no SYN-ACK */
			else if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
				rc = 0;
			else
				rc = -err;
		}
	}
	close(s);
	if (rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ENETUNREACH || rc == -ETIMEDOUT)
		return rc;
	return 0;
}
