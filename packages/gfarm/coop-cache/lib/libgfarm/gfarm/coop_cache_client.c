/*
 * coop_cache_client.c - libgfarm's side of the gfccd wire protocol (see
 * coop_cache_wire.h).
 *
 * Each call opens its own connection: a UNIX-socket connect costs a few
 * microseconds next to a 1 MiB read, and it keeps multi-threaded users such
 * as gfarm2fs free of shared connection state.  Every socket gets send and
 * receive timeouts, and TCP connects are non-blocking with poll(), so a
 * dead or wedged peer costs at most the timeout before the caller falls
 * back to gfsd.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <gfarm/gflog.h>

#include "coop_cache_wire.h"
#include "coop_cache_client.h"

static struct coop_cache_config config;
static int config_ok;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static void
config_load(void)
{
	const char *sock = getenv("GFARM_COOP_CACHE_SOCKET");
	const char *t = getenv("GFARM_COOP_CACHE_TIMEOUT_MS");
	const char *ref = getenv("GFARM_COOP_CACHE_STAGE_BY_REFERENCE");
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
	config.stage_by_reference = ref == NULL || strcmp(ref, "0") != 0;
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

/* send one request (+payload); receive the reply into buf (up to cap) */
static const struct coop_key no_key;

static int
exchange(int fd, uint32_t op, const struct coop_key *k, uint64_t off,
	uint32_t len, uint32_t aux, const void *payload, uint32_t plen,
	void *buf, size_t cap, size_t *gotp)
{
	struct coop_req rq;
	struct coop_rep rep;
	uint32_t rlen;
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
	    (plen > 0 && (r = full_io(fd, (void *)payload, plen, 1)) < 0) ||
	    (r = full_io(fd, &rep, sizeof(rep), 0)) < 0)
		return (r);
	rlen = ntohl(rep.len);
	if (rlen > cap)
		return (-EPROTO);
	if (rlen > 0 && (r = full_io(fd, buf, rlen, 0)) < 0)
		return (r);
	if (gotp != NULL)
		*gotp = rlen;
	return ((int32_t)ntohl(rep.status));
}

static int
local_call(uint32_t op, const struct coop_key *k, uint64_t off,
	uint32_t len, uint32_t aux, const void *payload, uint32_t plen,
	void *buf, size_t cap, size_t *gotp)
{
	int fd = connect_local(), r;

	if (fd < 0)
		return (fd);
	r = exchange(fd, op, k, off, len, aux, payload, plen,
	    buf, cap, gotp);
	close(fd);
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
	int s = connect_local(), r = 0;
	uint64_t done, n;

	*nreqp = 0;
	if (s < 0)
		return (s);
	for (done = 0; r == 0 && done < len; done += n) {
		n = len - done < COOP_MAX_IO ? len - done : COOP_MAX_IO;
		if ((r = send_put_ref(s, k, off + done, fd, src_off + done,
		    n)) == 0)
			++*nreqp;
	}
	if (r < 0) {
		close(s);
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

int
coop_cache_peer_get(const char *endpoint, const unsigned char *secret,
	const struct coop_key *k, uint64_t off, char *buf, size_t len,
	size_t *gotp)
{
	int fd = connect_peer(endpoint), r;

	if (fd < 0)
		return (fd);
	if (len > COOP_MAX_IO)
		len = COOP_MAX_IO;
	r = exchange(fd, COOP_OP_AUTH, &no_key, 0, COOP_SECRET_LEN, 0,
	    secret, COOP_SECRET_LEN, NULL, 0, NULL);
	if (r == 0)
		r = exchange(fd, COOP_OP_GET, k, off, (uint32_t)len, 0,
		    NULL, 0, buf, len, gotp);
	close(fd);
	return (r);
}
