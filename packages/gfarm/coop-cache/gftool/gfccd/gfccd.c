/*
 * gfccd - the node cache daemon of the Gfarm cooperative cache, and the
 * command that reads its counters.
 *
 *   gfccd serve --socket PATH --listen IP:PORT --secret-file FILE
 *               [--size BYTES] [--pid-file FILE]
 *   gfccd stat  --socket PATH        per-client counters, "key value" lines
 *   gfccd drop  --socket PATH        evict every cached page
 *
 * One daemon per client node holds that node's cache (page_cache.c).  The
 * node's processes reach it through the UNIX socket (mode 0600): the
 * patched libgfarm asks it first on every read, stores what it read from a
 * peer or gfsd, stages what it writes (or, for gfreg, reads the writer's
 * source file itself through the descriptor it is handed: PUT_REF), and
 * adds its peer/gfsd counters.
 * Peers reach it through the TCP endpoint, which gfmd hands out as the
 * "cache endpoint" of this client; a peer must first prove it holds the
 * cluster's cache secret by a challenge-response that never sends the
 * secret (AUTH, coop_cache_auth.c), and may then only GET; every reply to
 * a peer carries a MAC over its data.  Connections are watched by one
 * poll thread and served by two fixed worker pools, one for the node's
 * processes and one for peers (a peer that stops reading never delays a
 * local request), with bounded counts and idle/auth timeouts
 * (conn_loop.c); requests on one connection are sequential.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "coop_cache_wire.h"
#include "coop_cache_auth.h"
#include "conn_loop.h"
#include "page_cache.h"

static struct page_cache *cache;
static char endpoint[COOP_ENDPOINT_MAX];
static unsigned char secret[COOP_SECRET_LEN];

static pthread_mutex_t stat_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint64_t served_requested, served;	/* pages, GETs from peers */
	struct coop_stat_add client;		/* reported by libgfarm */
} stats;

static int
full_io(int fd, void *buf, size_t len, int writing)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return (-1);
		p += n;
		len -= n;
	}
	return (0);
}

static int
send_reply(int fd, int32_t status, const void *data, uint32_t len)
{
	struct coop_rep rep = { (int32_t)htonl((uint32_t)status), htonl(len) };

	if (full_io(fd, &rep, sizeof(rep), 1) < 0)
		return (-1);
	return (len > 0 ? full_io(fd, (void *)data, len, 1) : 0);
}

static uint64_t
pages_of(uint64_t off, uint64_t len)
{
	if (len == 0)
		return (0);
	return ((off + len - 1) / COOP_PAGE_SIZE - off / COOP_PAGE_SIZE + 1);
}

static void
stat_text(char *buf, size_t size)
{
	struct coop_stat_add c;

	pthread_mutex_lock(&stat_mu);
	c = stats.client;
	/* hit_rate: pages not read from gfsd, of all pages this node read */
	snprintf(buf, size,
	    "endpoint %s\npage_size %d\ncached_pages %zu\n"
	    "capacity_pages %zu\nlocal_requested %llu\nlocal_hit %llu\n"
	    "peer_requested %llu\npeer_transferred %llu\n"
	    "peer_hit_rate %.4f\nhit_rate %.4f\ngfsd_pages %llu\n"
	    "served_requested %llu\nserved_pages %llu\nconnections %d\n",
	    endpoint, COOP_PAGE_SIZE, page_cache_npages(cache),
	    page_cache_capacity_pages(cache),
	    (unsigned long long)c.local_requested,
	    (unsigned long long)c.local_hit,
	    (unsigned long long)c.peer_requested,
	    (unsigned long long)c.peer_transferred,
	    c.peer_requested ? (double)c.peer_transferred /
	    c.peer_requested : 0.0,
	    c.local_requested ? (double)(c.local_hit + c.peer_transferred)
	    / c.local_requested : 0.0,
	    (unsigned long long)stats.client.gfsd_pages,
	    (unsigned long long)stats.served_requested,
	    (unsigned long long)stats.served, conn_loop_count());
	pthread_mutex_unlock(&stat_mu);
}

static struct coop_key
key_of(const struct coop_req *rq)
{
	struct coop_key k = { rq->fs, rq->inc, rq->ino, rq->gen };

	return (k);
}

/* a GET; a peer's reply is the data followed by their MAC */
static int
do_get(struct conn *c, const struct coop_req *rq)
{
	struct coop_key k = key_of(rq);
	char *buf = malloc((size_t)rq->len + COOP_MAC_LEN);
	size_t n;
	int r;

	if (buf == NULL)
		return (c->from_peer ? -1 : send_reply(c->fd, -ENOMEM, NULL, 0));
	n = page_cache_get(cache, &k, rq->off, buf, rq->len);
	if (c->from_peer) {
		pthread_mutex_lock(&stat_mu);
		stats.served_requested += pages_of(rq->off, rq->len);
		stats.served += pages_of(rq->off, n);
		pthread_mutex_unlock(&stat_mu);
		if (coop_reply_mac(c->session, c->seq++, rq->fs, rq->inc,
		    rq->ino, rq->gen, rq->off, rq->len, 0, buf, (uint32_t)n,
		    (unsigned char *)buf + n) < 0) {
			free(buf);
			return (-1);
		}
		n += COOP_MAC_LEN;
	}
	r = send_reply(c->fd, 0, buf, (uint32_t)n);
	free(buf);
	return (r);
}

/* the payload of a PUT_REF and the descriptor that travels with it */
static int
recv_with_fd(int fd, void *buf, size_t len, int *passed)
{
	struct iovec iov = { buf, len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct msghdr mh;
	struct cmsghdr *c;
	ssize_t n;

	*passed = -1;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n > 0 && (c = CMSG_FIRSTHDR(&mh)) != NULL &&
	    c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(passed, CMSG_DATA(c), sizeof(int));
	if (n <= 0 || ((size_t)n < len &&
	    full_io(fd, (char *)buf + n, len - n, 0) < 0))
		return (-1);
	return (0);
}

/* stage by reference: read the writer's source range ourselves */
static int
do_put_ref(int fd, const struct coop_req *rq)
{
	struct coop_key k = key_of(rq);
	struct coop_put_ref ref;
	uint64_t src_off, len, done = 0;
	int src = -1, status = 0;
	char *buf = NULL;

	if (rq->len != sizeof(ref) || recv_with_fd(fd, &ref, sizeof(ref),
	    &src) < 0) {
		if (src >= 0)
			close(src);
		return (-1);
	}
	if (src < 0)
		return (send_reply(fd, -EBADF, NULL, 0));
	src_off = be64toh(ref.src_off);
	len = be64toh(ref.len);
	if (len > COOP_MAX_IO)
		status = -EINVAL;
	else if ((buf = malloc(len > 0 ? len : 1)) == NULL)
		status = -ENOMEM;
	while (status == 0 && done < len) {
		ssize_t n = pread(src, buf + done, len - done, src_off + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)	/* the source shrank: its bytes are unknown */
			status = n < 0 ? -errno : -EIO;
		else
			done += n;
	}
	if (status == 0)
		page_cache_put(cache, &k, rq->off, buf, len,
		    rq->aux & COOP_PUT_EOF);
	free(buf);
	close(src);
	return (send_reply(fd, status, NULL, 0));
}

/* one request from the node-local socket; returns -1 to close */
static int
serve_local(struct conn *c, const struct coop_req *rq)
{
	char text[1024];
	char *payload = NULL;
	int fd = c->fd, r;

	if (rq->op == COOP_OP_GET)
		return (do_get(c, rq));
	if (rq->op == COOP_OP_PUT_REF)
		return (do_put_ref(fd, rq));
	if (rq->len > 0 && rq->op != COOP_OP_PUT &&
	    rq->op != COOP_OP_STAT_ADD && rq->op != COOP_OP_RETAG)
		return (-1);
	if (rq->len > 0) {
		if ((payload = malloc(rq->len)) == NULL)
			return (-1);
		if (full_io(fd, payload, rq->len, 0) < 0) {
			free(payload);
			return (-1);
		}
	}
	switch (rq->op) {
	case COOP_OP_HELLO:
		memcpy(text, endpoint, COOP_ENDPOINT_MAX);
		memcpy(text + COOP_ENDPOINT_MAX, secret, COOP_SECRET_LEN);
		r = send_reply(fd, 0, text, COOP_ENDPOINT_MAX + COOP_SECRET_LEN);
		break;
	case COOP_OP_PUT: {
		struct coop_key k = key_of(rq);

		page_cache_put(cache, &k, rq->off, payload, rq->len,
		    rq->aux & COOP_PUT_EOF);
		r = send_reply(fd, 0, NULL, 0);
		break;
	}
	case COOP_OP_INVAL:
		page_cache_inval(cache, rq->ino);
		r = send_reply(fd, 0, NULL, 0);
		break;
	case COOP_OP_RETAG: {
		struct coop_key from = key_of(rq), to;

		if (rq->len != sizeof(to)) {
			r = send_reply(fd, -EINVAL, NULL, 0);
			break;
		}
		memcpy(&to, payload, sizeof(to));
		to.fs = be64toh(to.fs);
		to.inc = be64toh(to.inc);
		to.ino = be64toh(to.ino);
		to.gen = be64toh(to.gen);
		page_cache_retag(cache, &from, &to, rq->off);
		r = send_reply(fd, 0, NULL, 0);
		break;
	}
	case COOP_OP_STAT_ADD: {
		struct coop_stat_add a;

		if (rq->len != sizeof(a)) {
			r = send_reply(fd, -EINVAL, NULL, 0);
			break;
		}
		memcpy(&a, payload, sizeof(a));
		pthread_mutex_lock(&stat_mu);
		stats.client.local_requested += be64toh(a.local_requested);
		stats.client.local_hit += be64toh(a.local_hit);
		stats.client.peer_requested += be64toh(a.peer_requested);
		stats.client.peer_transferred += be64toh(a.peer_transferred);
		stats.client.gfsd_pages += be64toh(a.gfsd_pages);
		pthread_mutex_unlock(&stat_mu);
		r = send_reply(fd, 0, NULL, 0);
		break;
	}
	case COOP_OP_STAT:
		stat_text(text, sizeof(text));
		r = send_reply(fd, 0, text, (uint32_t)strlen(text));
		break;
	case COOP_OP_HAS: {
		struct coop_key k = key_of(rq);
		uint64_t have = htobe64(page_cache_get(cache, &k, 0, NULL,
		    rq->off));

		r = send_reply(fd, 0, &have, sizeof(have));
		break;
	}
	case COOP_OP_DROP:
		page_cache_drop_all(cache);
		r = send_reply(fd, 0, NULL, 0);
		break;
	default:
		r = send_reply(fd, -EINVAL, NULL, 0);
	}
	free(payload);
	return (r);
}

/* a peer connection starts with the server's nonce (the challenge) */
static int
peer_challenge(struct conn *c)
{
	if (coop_random(c->nonce_s, sizeof(c->nonce_s)) < 0)
		return (-1);
	return (send_reply(c->fd, 0, c->nonce_s, sizeof(c->nonce_s)));
}

/* peers: AUTH (nonce_c, proof of the secret) first, then GET only */
static int
serve_peer(struct conn *c, const struct coop_req *rq)
{
	unsigned char got[COOP_NONCE_LEN + COOP_MAC_LEN], want[COOP_MAC_LEN];
	unsigned char *nonce_c = got, *proof = got + COOP_NONCE_LEN;

	if (c->authed)
		return (rq->op == COOP_OP_GET ? do_get(c, rq) : -1);
	if (rq->op != COOP_OP_AUTH || rq->len != sizeof(got) ||
	    full_io(c->fd, got, sizeof(got), 0) < 0 ||
	    coop_handshake_mac(secret, "GFCC-client", c->nonce_s, nonce_c,
	    want) < 0)
		return (-1);
	if (!coop_mac_equal(want, proof)) {
		send_reply(c->fd, -EACCES, NULL, 0);
		return (-1);
	}
	if (coop_handshake_mac(secret, "GFCC-server", c->nonce_s, nonce_c,
	    want) < 0 ||
	    coop_handshake_mac(secret, "GFCC-session", c->nonce_s, nonce_c,
	    c->session) < 0)
		return (-1);
	c->authed = 1;
	return (send_reply(c->fd, 0, want, sizeof(want)));
}

/* conn_loop: a new connection; a peer's starts with the challenge */
static int
conn_open(struct conn *c)
{
	return (c->from_peer ? peer_challenge(c) : 0);
}

/* conn_loop: one request is waiting on c */
static int
conn_request(struct conn *c)
{
	struct coop_req rq;

	if (full_io(c->fd, &rq, sizeof(rq), 0) < 0)
		return (-1);
	rq.magic = ntohl(rq.magic);
	rq.op = ntohl(rq.op);
	rq.ino = be64toh(rq.ino);
	rq.gen = be64toh(rq.gen);
	rq.off = be64toh(rq.off);
	rq.len = ntohl(rq.len);
	rq.aux = ntohl(rq.aux);
	rq.fs = be64toh(rq.fs);
	rq.inc = be64toh(rq.inc);
	if (rq.magic != COOP_WIRE_MAGIC || rq.len > COOP_MAX_IO)
		return (-1);
	return (c->from_peer ? serve_peer(c, &rq) : serve_local(c, &rq));
}

static int
listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path))
		return (-1);
	strcpy(sa.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0600) < 0 || listen(fd, 128) < 0)
		return (-1);
	return (fd);
}

static int
listen_tcp(const char *ep)
{
	char host[COOP_ENDPOINT_MAX], *colon;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd, one = 1;

	if (strlen(ep) >= sizeof(host))
		return (-1);
	strcpy(host, ep);
	if ((colon = strrchr(host, ':')) == NULL)
		return (-1);
	*colon = '\0';
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return (-1);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return (-1);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 128) < 0)
		return (-1);
	return (fd);
}

static int
read_secret(const char *path)
{
	unsigned char buf[256];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return (-1);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < COOP_SECRET_LEN)
		return (-1);
	memcpy(secret, buf, COOP_SECRET_LEN);
	return (0);
}

static void
usage(FILE *f)
{
	fputs("usage: gfccd serve --socket PATH --listen IP:PORT "
	    "--secret-file FILE [--size BYTES] [--pid-file FILE]\n"
	    "       gfccd stat --socket PATH\n"
	    "       gfccd drop --socket PATH\n"
	    "Node cache daemon of the Gfarm cooperative cache (chfs-stack).\n"
	    "serve: hold this node's pages (LRU, --size bytes, default "
	    "256MiB), serve\n  local processes on PATH and peers on "
	    "IP:PORT (secret required).\n"
	    "stat: print this node's counters; drop: evict every page.\n", f);
}

static int
serve(const char *sock, const char *listen_ep, const char *secret_file,
	size_t size, const char *pid_file)
{
	static const struct conn_handlers h = { conn_open, conn_request };
	int lu, lt, r;

	if (read_secret(secret_file) < 0) {
		fprintf(stderr, "gfccd: %s: cannot read a %d-byte secret\n",
		    secret_file, COOP_SECRET_LEN);
		return (1);
	}
	if ((cache = page_cache_new(size)) == NULL) {
		fprintf(stderr, "gfccd: out of memory\n");
		return (1);
	}
	snprintf(endpoint, sizeof(endpoint), "%s", listen_ep);
	if ((lu = listen_unix(sock)) < 0) {
		fprintf(stderr, "gfccd: %s: %s\n", sock, strerror(errno));
		return (1);
	}
	if ((lt = listen_tcp(listen_ep)) < 0) {
		fprintf(stderr, "gfccd: listen %s: %s\n", listen_ep,
		    strerror(errno));
		return (1);
	}
	signal(SIGPIPE, SIG_IGN);
	if (pid_file != NULL) {
		FILE *f = fopen(pid_file, "w");

		if (f == NULL) {
			fprintf(stderr, "gfccd: %s: %s\n", pid_file,
			    strerror(errno));
			return (1);
		}
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	r = conn_loop_run(lu, lt, &h);
	fprintf(stderr, "gfccd: %s\n", strerror(-r));
	return (1);
}

static int
local_request(const char *sock, uint32_t op)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct coop_req rq = { htonl(COOP_WIRE_MAGIC), htonl(op) };
	struct coop_rep rep;
	char buf[4096];
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	uint32_t len;

	if (fd < 0 || strlen(sock) >= sizeof(sa.sun_path))
		return (1);
	strcpy(sa.sun_path, sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "gfccd: %s: %s\n", sock, strerror(errno));
		return (1);
	}
	if (full_io(fd, &rq, sizeof(rq), 1) < 0 ||
	    full_io(fd, &rep, sizeof(rep), 0) < 0 ||
	    (len = ntohl(rep.len)) >= sizeof(buf) ||
	    full_io(fd, buf, len, 0) < 0) {
		fprintf(stderr, "gfccd: %s: no reply\n", sock);
		return (1);
	}
	buf[len] = '\0';
	fputs(buf, stdout);
	close(fd);
	return ((int32_t)ntohl(rep.status) == 0 ? 0 : 1);
}

int
main(int argc, char **argv)
{
	const char *sock = NULL, *listen_ep = NULL, *secret_file = NULL;
	const char *pid_file = NULL, *cmd;
	size_t size = 256u << 20;
	char *end;
	int i;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return (argc < 2 ? 2 : 0);
	}
	cmd = argv[1];
	for (i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (v == NULL) {
			fprintf(stderr, "gfccd: %s needs a value\n", argv[i]);
			return (2);
		}
		if (strcmp(argv[i], "--socket") == 0)
			sock = v;
		else if (strcmp(argv[i], "--listen") == 0)
			listen_ep = v;
		else if (strcmp(argv[i], "--secret-file") == 0)
			secret_file = v;
		else if (strcmp(argv[i], "--pid-file") == 0)
			pid_file = v;
		else if (strcmp(argv[i], "--size") == 0) {
			size = strtoull(v, &end, 10);
			if (*end != '\0' || size < COOP_PAGE_SIZE) {
				fprintf(stderr, "gfccd: --size %s: need a "
				    "byte count >= %d\n", v, COOP_PAGE_SIZE);
				return (2);
			}
		} else {
			fprintf(stderr, "gfccd: unknown option %s\n", argv[i]);
			return (2);
		}
		i++;
	}
	if (sock == NULL) {
		fprintf(stderr, "gfccd: --socket is required\n");
		return (2);
	}
	if (strcmp(cmd, "stat") == 0)
		return (local_request(sock, COOP_OP_STAT));
	if (strcmp(cmd, "drop") == 0)
		return (local_request(sock, COOP_OP_DROP));
	if (strcmp(cmd, "serve") != 0) {
		fprintf(stderr, "gfccd: unknown command %s\n", cmd);
		return (2);
	}
	if (listen_ep == NULL || secret_file == NULL) {
		fprintf(stderr, "gfccd: serve needs --listen and "
		    "--secret-file\n");
		return (2);
	}
	return (serve(sock, listen_ep, secret_file, size, pid_file));
}
