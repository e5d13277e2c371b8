/*
 * coop_cache_client.c - libgfarm's side of the gfccd wire protocol (see
 * coop_cache_wire.h).
 *
 * Each local call opens its own connection: a UNIX-socket connect costs a
 * few microseconds next to a 1 MiB read, and it keeps multi-threaded users
 * such as gfarm2fs free of shared connection state.  Authenticated peer
 * connections are kept for reuse (see peer_conn_take).  Every socket gets send and
 * receive timeouts, and TCP connects are non-blocking with poll(), so a
 * dead or wedged peer costs at most the timeout before the caller falls
 * back to gfsd.  A peer is trusted only after it proved it knows the
 * cluster secret (challenge-response, coop_cache_auth.c; the secret is
 * never sent), and each byte it returns only after the reply's MAC
 * checked out: a fake or forged endpoint yields an error, never data.
 *
 * A local daemon that does not answer (hung, dead, socket gone) is noted
 * once, with one log line, and bypassed by every call of this process for
 * COOP_LOCAL_RETRY_SECONDS, then tried again: a hung gfccd costs one
 * timeout per process and period, not one per read.
 */
#include <arpa/inet.h>
#include <endian.h>
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
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <gfarm/gflog.h>

#include "coop_cache_wire.h"
#include "coop_cache_auth.h"
#include "coop_cache_client.h"

#define COOP_LOCAL_RETRY_SECONDS	10

static struct coop_cache_config config;
static pthread_mutex_t local_down_mutex = PTHREAD_MUTEX_INITIALIZER;
static time_t local_down_until;	/* bypass the local daemon until then */
static int config_ok;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static void
config_load(void)
{
	const char *sock = getenv("GFARM_COOP_CACHE_SOCKET");
	const char *t = getenv("GFARM_COOP_CACHE_TIMEOUT_MS");
	const char *ref = getenv("GFARM_COOP_CACHE_STAGE_BY_REFERENCE");
	const char *peers = getenv("GFARM_COOP_CACHE_PEERS");
	char *end;
	long ms = 1000;

	if (sock == NULL || *sock == '\0')
		return;		/* off: stock Gfarm behaviour */
	if (t != NULL && *t != '\0') {
		ms = strtol(t, &end, 10);
		if (*end != '\0' || ms <= 0 || ms > 600000) {
			gflog_error(GFARM_MSG_UNFIXED,
			    "GFARM_COOP_CACHE_TIMEOUT_MS=%s: need 1..600000 "
			    "milliseconds; cooperative cache disabled", t);
			return;
		}
	}
	/* 0: gfreg stages by copy, as before (for A/B measurements) */
	if (ref != NULL && strcmp(ref, "0") != 0 && strcmp(ref, "1") != 0) {
		gflog_error(GFARM_MSG_UNFIXED,
		    "GFARM_COOP_CACHE_STAGE_BY_REFERENCE=%s: need 0 or 1; "
		    "cooperative cache disabled", ref);
		return;
	}
	/* 0: node-local cache only, no peer is asked or told (a baseline) */
	if (peers != NULL && strcmp(peers, "0") != 0 &&
	    strcmp(peers, "1") != 0) {
		gflog_error(GFARM_MSG_UNFIXED,
		    "GFARM_COOP_CACHE_PEERS=%s: need 0 or 1; "
		    "cooperative cache disabled", peers);
		return;
	}
	config.stage_by_reference = ref == NULL || strcmp(ref, "0") != 0;
	config.peers = peers == NULL || strcmp(peers, "0") != 0;
	config.socket_path = sock;
	config.timeout_ms = (int)ms;
	config_ok = 1;
}

const struct coop_cache_config *
coop_cache_config(void)
{
	pthread_once(&config_once, config_load);
	return (config_ok ? &config : NULL);
}

uint64_t
coop_cache_pages(uint64_t off, uint64_t len)
{
	if (len == 0)
		return (0);
	return ((off + len - 1) / COOP_PAGE_SIZE - off / COOP_PAGE_SIZE + 1);
}

static int
set_timeouts(int fd)
{
	struct timeval tv;

	tv.tv_sec = config.timeout_ms / 1000;
	tv.tv_usec = (config.timeout_ms % 1000) * 1000;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return (-errno);
	return (0);
}

static int
full_io(int fd, void *buf, size_t len, int writing)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = writing ? send(fd, p, len, MSG_NOSIGNAL) :
		    recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return (errno == EAGAIN ? -ETIMEDOUT : -errno);
		if (n == 0)
			return (-ECONNRESET);
		p += n;
		len -= n;
	}
	return (0);
}

static int
connect_local(void)
{
	struct sockaddr_un sa;
	int fd, r;

	if (strlen(config.socket_path) >= sizeof(sa.sun_path))
		return (-ENAMETOOLONG);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, config.socket_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return (-errno);
	if ((r = set_timeouts(fd)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = r < 0 ? r : -errno;
		close(fd);
		return (r);
	}
	return (fd);
}

static int
connect_peer(const char *endpoint)
{
	char host[COOP_ENDPOINT_MAX], *colon;
	struct sockaddr_in sa;
	struct pollfd pfd;
	int fd, r, err = 0, one = 1;
	socklen_t elen = sizeof(err);

	if (strlen(endpoint) >= sizeof(host))
		return (-EINVAL);
	strcpy(host, endpoint);
	if ((colon = strrchr(host, ':')) == NULL)
		return (-EINVAL);
	*colon = '\0';
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return (-EINVAL);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return (-errno);
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0 && errno == EINPROGRESS) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		r = poll(&pfd, 1, config.timeout_ms);
		if (r == 0)
			err = ETIMEDOUT;
		else if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
		    &elen) < 0)
			err = errno;
	} else if (r < 0)
		err = errno;
	if (err == 0 && (fcntl(fd, F_SETFL, 0) < 0 || set_timeouts(fd) < 0))
		err = errno;
	if (err != 0) {
		close(fd);
		return (-err);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return (fd);
}

static const struct coop_key no_key;

static int
send_req(int fd, uint32_t op, const struct coop_key *k, uint64_t off,
	uint32_t len, uint32_t aux, const void *payload, uint32_t plen)
{
	struct coop_req rq;
	int r;

	memset(&rq, 0, sizeof(rq));
	rq.magic = htonl(COOP_WIRE_MAGIC);
	rq.op = htonl(op);
	rq.fs = htobe64(k->fs);
	rq.inc = htobe64(k->inc);
	rq.ino = htobe64(k->ino);
	rq.gen = htobe64(k->gen);
	rq.off = htobe64(off);
	rq.len = htonl(len);
	rq.aux = htonl(aux);
	if ((r = full_io(fd, &rq, sizeof(rq), 1)) < 0 ||
	    (plen > 0 && (r = full_io(fd, (void *)payload, plen, 1)) < 0))
		return (r);
	return (0);
}

/* a reply header: its status into *statusp, its payload length */
static int
recv_rep(int fd, int32_t *statusp, uint32_t *lenp)
{
	struct coop_rep rep;
	int r;

	if ((r = full_io(fd, &rep, sizeof(rep), 0)) < 0)
		return (r);
	*statusp = (int32_t)ntohl(rep.status);
	*lenp = ntohl(rep.len);
	return (0);
}

/* send one request (+payload); receive the reply into buf (up to cap) */
static int
exchange(int fd, uint32_t op, const struct coop_key *k, uint64_t off,
	uint32_t len, uint32_t aux, const void *payload, uint32_t plen,
	void *buf, size_t cap, size_t *gotp)
{
	int32_t status;
	uint32_t rlen;
	int r;

	if ((r = send_req(fd, op, k, off, len, aux, payload, plen)) < 0
	    || (r = recv_rep(fd, &status, &rlen)) < 0)
		return (r);
	if (rlen > cap)
		return (-EPROTO);
	if (rlen > 0 && (r = full_io(fd, buf, rlen, 0)) < 0)
		return (r);
	if (gotp != NULL)
		*gotp = rlen;
	return (status);
}

int
coop_cache_local_up(void)
{
	int up;

	pthread_mutex_lock(&local_down_mutex);
	up = local_down_until == 0 || time(NULL) >= local_down_until;
	pthread_mutex_unlock(&local_down_mutex);
	return (up);
}

/* the local daemon failed to answer: bypass it for a while */
static void
local_down(int err)
{
	time_t now = time(NULL);
	int first;

	pthread_mutex_lock(&local_down_mutex);
	first = local_down_until == 0 || now >= local_down_until;
	local_down_until = now + COOP_LOCAL_RETRY_SECONDS;
	pthread_mutex_unlock(&local_down_mutex);
	if (first)
		gflog_warning(GFARM_MSG_UNFIXED, "cooperative cache: gfccd at "
		    "%s does not answer (%s); bypassed for %d s",
		    config.socket_path, strerror(-err),
		    COOP_LOCAL_RETRY_SECONDS);
}

static int
local_call(uint32_t op, const struct coop_key *k, uint64_t off,
	uint32_t len, uint32_t aux, const void *payload, uint32_t plen,
	void *buf, size_t cap, size_t *gotp)
{
	int fd, r;

	if (!coop_cache_local_up())
		return (-EHOSTDOWN);
	if ((fd = connect_local()) < 0) {
		local_down(fd);
		return (fd);
	}
	r = exchange(fd, op, k, off, len, aux, payload, plen,
	    buf, cap, gotp);
	close(fd);
	/* a transport failure, not a daemon's -errno answer */
	if (r == -ETIMEDOUT || r == -ECONNRESET || r == -EPIPE ||
	    r == -EPROTO)
		local_down(r);
	return (r);
}

int
coop_cache_hello(char *endpoint, size_t size, unsigned char *secret)
{
	char buf[COOP_ENDPOINT_MAX + COOP_SECRET_LEN];
	size_t got;
	int r = local_call(COOP_OP_HELLO, &no_key, 0, 0, 0, NULL, 0,
	    buf, sizeof(buf), &got);

	if (r < 0)
		return (r);
	if (got != sizeof(buf) || size < COOP_ENDPOINT_MAX)
		return (-EPROTO);
	memcpy(endpoint, buf, COOP_ENDPOINT_MAX);
	endpoint[COOP_ENDPOINT_MAX - 1] = '\0';
	memcpy(secret, buf + COOP_ENDPOINT_MAX, COOP_SECRET_LEN);
	return (0);
}

int
coop_cache_local_get(const struct coop_key *k, uint64_t off,
	char *buf, size_t len, size_t *gotp)
{
	if (len > COOP_MAX_IO)
		len = COOP_MAX_IO;
	return (local_call(COOP_OP_GET, k, off, (uint32_t)len, 0,
	    NULL, 0, buf, len, gotp));
}

int
coop_cache_local_put(const struct coop_key *k, uint64_t off,
	const char *buf, size_t len, int eof)
{
	if (len > COOP_MAX_IO)	/* the tail is not stored: still correct */
		return (coop_cache_local_put(k, off, buf, COOP_MAX_IO, 0));
	return (local_call(COOP_OP_PUT, k, off, (uint32_t)len,
	    eof ? COOP_PUT_EOF : 0, buf, (uint32_t)len, NULL, 0, NULL));
}

int
coop_cache_local_has(const struct coop_key *k, uint64_t size,
	uint64_t *havep)
{
	uint64_t have;
	size_t got;
	int r = local_call(COOP_OP_HAS, k, size, 0, 0, NULL, 0,
	    &have, sizeof(have), &got);

	if (r < 0)
		return (r);
	if (got != sizeof(have))
		return (-EPROTO);
	*havep = be64toh(have);
	return (0);
}

/* one PUT_REF: the header, then the payload with fd attached (gfccd
 * reads the header with read(2), the payload with recvmsg(2)) */
static int
send_put_ref(int s, const struct coop_key *k, uint64_t off, int fd,
	uint64_t src_off, uint64_t len)
{
	struct coop_req rq;
	struct coop_put_ref ref;
	struct iovec iov = { &ref, sizeof(ref) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct msghdr mh;
	int r;

	memset(&rq, 0, sizeof(rq));
	rq.magic = htonl(COOP_WIRE_MAGIC);
	rq.op = htonl(COOP_OP_PUT_REF);
	rq.fs = htobe64(k->fs);
	rq.inc = htobe64(k->inc);
	rq.ino = htobe64(k->ino);
	rq.gen = htobe64(k->gen);
	rq.off = htobe64(off);
	rq.len = htonl(sizeof(ref));
	rq.aux = htonl(COOP_PUT_EOF);
	ref.src_off = htobe64(src_off);
	ref.len = htobe64(len);
	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
	CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
	CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &fd, sizeof(int));
	if ((r = full_io(s, &rq, sizeof(rq), 1)) < 0)
		return (r);
	if (sendmsg(s, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(ref))
		return (-EIO);
	return (0);
}

int
coop_cache_local_put_ref_start(const struct coop_key *k, uint64_t off,
	int fd, uint64_t src_off, uint64_t len, int *nreqp)
{
	int s, r = 0;
	uint64_t done, n;

	*nreqp = 0;
	if (!coop_cache_local_up())
		return (-EHOSTDOWN);
	if ((s = connect_local()) < 0) {
		local_down(s);
		return (s);
	}
	for (done = 0; r == 0 && done < len; done += n) {
		n = len - done < COOP_MAX_IO ? len - done : COOP_MAX_IO;
		if ((r = send_put_ref(s, k, off + done, fd, src_off + done,
		    n)) == 0)
			++*nreqp;
	}
	if (r < 0) {
		close(s);
		if (r == -ETIMEDOUT || r == -ECONNRESET || r == -EPIPE)
			local_down(r);
		return (r);
	}
	return (s);
}

int
coop_cache_local_put_ref_finish(int s, int nreq)
{
	struct coop_rep rep;
	int r = 0;

	while (r == 0 && nreq-- > 0)
		if ((r = full_io(s, &rep, sizeof(rep), 0)) == 0)
			r = rep.len != 0 ? -EPROTO :
			    (int32_t)ntohl(rep.status);
	close(s);
	/* a transport failure, not a daemon's -errno answer */
	if (r == -ETIMEDOUT || r == -ECONNRESET || r == -EPIPE ||
	    r == -EPROTO)
		local_down(r);
	return (r);
}

int
coop_cache_local_inval(uint64_t ino)
{
	struct coop_key k = { 0, 0, ino, 0 };

	return (local_call(COOP_OP_INVAL, &k, 0, 0, 0, NULL, 0,
	    NULL, 0, NULL));
}

int
coop_cache_local_retag(const struct coop_key *staging,
	const struct coop_key *to, uint64_t size)
{
	struct coop_key wire;

	wire.fs = htobe64(to->fs);
	wire.inc = htobe64(to->inc);
	wire.ino = htobe64(to->ino);
	wire.gen = htobe64(to->gen);
	return (local_call(COOP_OP_RETAG, staging, size, sizeof(wire), 0,
	    &wire, sizeof(wire), NULL, 0, NULL));
}

int
coop_cache_local_stat_add(uint64_t local_requested, uint64_t local_hit,
	uint64_t peer_requested, uint64_t peer_transferred, uint64_t gfsd_pages)
{
	struct coop_stat_add a;

	a.local_requested = htobe64(local_requested);
	a.local_hit = htobe64(local_hit);
	a.peer_requested = htobe64(peer_requested);
	a.peer_transferred = htobe64(peer_transferred);
	a.gfsd_pages = htobe64(gfsd_pages);
	return (local_call(COOP_OP_STAT_ADD, &no_key, 0, sizeof(a), 0,
	    &a, sizeof(a), NULL, 0, NULL));
}

/* mutual challenge-response (coop_cache_auth.h); the session key out */
static int
peer_handshake(int fd, const unsigned char *secret, unsigned char *session)
{
	unsigned char nonce_s[COOP_NONCE_LEN], auth[COOP_NONCE_LEN +
	    COOP_MAC_LEN], proof[COOP_MAC_LEN], want[COOP_MAC_LEN];
	unsigned char *nonce_c = auth;
	int32_t status;
	uint32_t rlen;
	size_t got;
	int r;

	if ((r = recv_rep(fd, &status, &rlen)) < 0)
		return (r);
	if (status != 0 || rlen != COOP_NONCE_LEN)
		return (-EPROTO);
	if ((r = full_io(fd, nonce_s, sizeof(nonce_s), 0)) < 0 ||
	    (r = coop_random(nonce_c, COOP_NONCE_LEN)) < 0 ||
	    (r = coop_handshake_mac(secret, "GFCC-client", nonce_s, nonce_c,
	    auth + COOP_NONCE_LEN)) < 0)
		return (r);
	r = exchange(fd, COOP_OP_AUTH, &no_key, 0, sizeof(auth), 0, auth,
	    sizeof(auth), proof, sizeof(proof), &got);
	if (r < 0)
		return (r);
	if (got != sizeof(proof) ||
	    (r = coop_handshake_mac(secret, "GFCC-server", nonce_s, nonce_c,
	    want)) < 0 || !coop_mac_equal(want, proof))
		return (r < 0 ? r : -EACCES);	/* not a holder of the secret */
	return (coop_handshake_mac(secret, "GFCC-session", nonce_s, nonce_c,
	    session));
}

/*
 * Authenticated peer connections are kept for reuse (COOP_PEER_CONNS, per
 * process), so a large read pays the connect and the handshake once, not
 * once per request.  A connection is taken out of the cache while in use
 * (threads never share one) and dropped on any error; one inherited across
 * fork() is never used by the child.  gfccd closes idle ones after 60 s:
 * a request whose reused connection turns out closed is retried once on a
 * fresh one (a timeout is not retried: a hung peer costs one timeout).
 */
#define COOP_PEER_CONNS	4

struct peer_conn {
	int fd;
	pid_t pid;
	uint64_t seq;
	char endpoint[COOP_ENDPOINT_MAX];
	unsigned char session[COOP_MAC_LEN];
};

static pthread_mutex_t peer_conns_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct peer_conn peer_conns[COOP_PEER_CONNS];
static int peer_conns_n;

/* a cached connection to endpoint, removed from the cache; 0 if none */
static int
peer_conn_take(const char *endpoint, struct peer_conn *pc)
{
	pid_t pid = getpid();
	int i, found = 0;

	pthread_mutex_lock(&peer_conns_mutex);
	for (i = 0; i < peer_conns_n; i++) {
		if (peer_conns[i].pid != pid) {		/* forked: not ours */
			peer_conns[i--] = peer_conns[--peer_conns_n];
			continue;
		}
		if (strcmp(peer_conns[i].endpoint, endpoint) == 0) {
			*pc = peer_conns[i];
			peer_conns[i] = peer_conns[--peer_conns_n];
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&peer_conns_mutex);
	return (found);
}

static void
peer_conn_put(const struct peer_conn *pc)
{
	int evict = -1;

	pthread_mutex_lock(&peer_conns_mutex);
	if (peer_conns_n == COOP_PEER_CONNS) {
		evict = peer_conns[0].pid == getpid() ? peer_conns[0].fd : -1;
		peer_conns[0] = peer_conns[--peer_conns_n];
	}
	peer_conns[peer_conns_n++] = *pc;
	pthread_mutex_unlock(&peer_conns_mutex);
	if (evict >= 0)
		close(evict);
}

static int
peer_conn_open(const char *endpoint, const unsigned char *secret,
	struct peer_conn *pc)
{
	int r;

	if ((pc->fd = connect_peer(endpoint)) < 0)
		return (pc->fd);
	if ((r = peer_handshake(pc->fd, secret, pc->session)) < 0) {
		close(pc->fd);
		return (r);
	}
	pc->pid = getpid();
	pc->seq = 0;
	snprintf(pc->endpoint, sizeof(pc->endpoint), "%s", endpoint);
	return (0);
}

/* one GET on an authenticated connection; < 0: drop the connection */
static int
peer_conn_get(struct peer_conn *pc, const struct coop_key *k, uint64_t off, char *buf, size_t len, size_t *gotp, int32_t *statusp)
{
	unsigned char mac[COOP_MAC_LEN], want[COOP_MAC_LEN];
	uint32_t rlen;
	int r;

	if ((r = send_req(pc->fd, COOP_OP_GET, k, off, (uint32_t)len,
	    0, NULL, 0)) < 0 ||
	    (r = recv_rep(pc->fd, statusp, &rlen)) < 0)
		return (r);
	if (rlen < COOP_MAC_LEN || rlen - COOP_MAC_LEN > len)
		return (-EPROTO);
	rlen -= COOP_MAC_LEN;
	if ((r = full_io(pc->fd, buf, rlen, 0)) < 0 ||
	    (r = full_io(pc->fd, mac, sizeof(mac), 0)) < 0 ||
	    (r = coop_reply_mac(pc->session, pc->seq++, k->fs, k->inc,
	    k->ino, k->gen, off, (uint32_t)len, *statusp, buf, rlen, want)) < 0)
		return (r);
	if (!coop_mac_equal(want, mac))
		return (-EBADMSG); /* forged or damaged: not one byte is used */
	*gotp = rlen;
	return (0);
}

int
coop_cache_peer_get(const char *endpoint, const unsigned char *secret,
	const struct coop_key *k, uint64_t off, char *buf, size_t len,
	size_t *gotp)
{
	struct peer_conn pc;
	int32_t status = 0;
	int reused, r;

	if (len > COOP_MAX_IO)
		len = COOP_MAX_IO;
	reused = peer_conn_take(endpoint, &pc);
	if (!reused && (r = peer_conn_open(endpoint, secret, &pc)) < 0)
		return (r);
	r = peer_conn_get(&pc, k, off, buf, len, gotp, &status);
	if (r < 0 && reused && (r == -ECONNRESET || r == -EPIPE)) {
		/* the daemon closed an idle connection: once more */
		close(pc.fd);
		if ((r = peer_conn_open(endpoint, secret, &pc)) < 0)
			return (r);
		r = peer_conn_get(&pc, k, off, buf, len, gotp, &status);
	}
	if (r < 0) {
		close(pc.fd);
		return (r);
	}
	peer_conn_put(&pc);
	return (status);
}
