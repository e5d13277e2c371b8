/*
 * xprt_addr.c — protocol names, printable addresses and the peer cache.
 *
 * Printable address = "<proto>://<rest>". For tcp, verbs and sockets the raw provider address is
 * a struct sockaddr_in and <rest> is "IPv4:port" (libfabric 1.17 cannot turn its own address
 * strings back into addresses, so we parse them). For shm the raw address is the endpoint's
 * NUL-terminated endpoint name "<name>~<tag>" (set with fi_setname; the tag is new for every
 * incarnation) and <rest> is the stable <name>. Peers are cached by raw address: a peer connected
 * by string has the bare name as key and follows restarts through the doorbell file; a peer seen
 * in a request is pinned to that incarnation (replies must go to the process that asked). How an
 * shm peer is resolved and re-resolved lives in xprt_shm.c.
 */
#include "xprt_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fi_errno.h>

static const struct {
	const char *spelling;
	enum xprt_kind kind;
} proto_names[] = {
        {"tcp", XPRT_TCP},
        {"ofi+tcp", XPRT_TCP},
        {"tcp;ofi_rxm", XPRT_TCP},
        {"ofi+tcp;ofi_rxm", XPRT_TCP},
        {"ofi+sockets", XPRT_SOCKETS},
        {"sockets", XPRT_SOCKETS},
        {"shm", XPRT_SHM},
        {"sm", XPRT_SHM},
        {"na+sm", XPRT_SHM},
        {"ofi+shm", XPRT_SHM},
        {"verbs", XPRT_VERBS},
        {"ofi+verbs", XPRT_VERBS},
        {"verbs;ofi_rxm", XPRT_VERBS},
        {"ofi+verbs;ofi_rxm", XPRT_VERBS},
};

int xprt_parse_proto(const char *proto, enum xprt_kind *kind)
{
	if (!proto || !*proto) {
		*kind = XPRT_TCP;
		return 0;
	}
	for (size_t i = 0; i < sizeof proto_names / sizeof proto_names[0]; i++)
		if (strcasecmp(proto, proto_names[i].spelling) == 0) {
			*kind = proto_names[i].kind;
			return 0;
		}
	return -EINVAL;
}

const char *xprt_kind_name(enum xprt_kind k)
{
	switch (k) {
	case XPRT_TCP: return "tcp";
	case XPRT_SHM: return "shm";
	case XPRT_VERBS: return "verbs";
	case XPRT_SOCKETS: return "sockets";
	}
	return "?";
}

#define SHM_PREFIX "fi_shm://"

int xprt_format_addr(enum xprt_kind k, const void *raw, size_t rawlen, char *buf, size_t size)
{
	int n;
	if (k == XPRT_SHM) {
		size_t pl = strlen(SHM_PREFIX);
		const char *s = raw;
		size_t sl = strnlen(s, rawlen);
		if (sl == rawlen || sl == 0)
			return -EINVAL;
		if (sl > pl && memcmp(s, SHM_PREFIX, pl) == 0)
			s += pl;
		const char *tag = strchr(s, XPRT_SHM_TAG_SEP);
		n = snprintf(buf, size, "shm://%.*s", tag ? (int)(tag - s) : (int)strlen(s), s);
	} else {
		struct sockaddr_in sin;
		char ip[INET_ADDRSTRLEN];
		if (rawlen < sizeof sin)
			return -EINVAL;
		memcpy(&sin, raw, sizeof sin);
		if (sin.sin_family != AF_INET || !inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip))
			return -EINVAL;
		n = snprintf(buf, size, "%s://%s:%u", xprt_kind_name(k), ip, ntohs(sin.sin_port));
	}
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* "host:port" (IPv4 literal or resolvable name) -> sockaddr_in. */
static int parse_inet(const char *rest, struct sockaddr_in *sin)
{
	const char *colon = strrchr(rest, ':');
	if (!colon || colon == rest || !colon[1])
		return -EINVAL;
	char host[256];
	size_t hl = (size_t)(colon - rest);
	if (hl >= sizeof host)
		return -EINVAL;
	memcpy(host, rest, hl);
	host[hl] = 0;
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port == 0 || port > 65535)
		return -EINVAL;
	memset(sin, 0, sizeof *sin);
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1)
		return 0;
	struct addrinfo hints = {.ai_family = AF_INET}, *res;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return -EINVAL;
	sin->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}

void xprt_peer_check(xprt_t *x, xprt_peer_t *p)
{
	if (x->kind == XPRT_SHM && !p->local)
		xprt_shm_peer_check(x, p);
}

fi_addr_t xprt_peer_fi_addr(xprt_t *x, xprt_peer_t *p)
{
	return x->kind == XPRT_SHM ? xprt_shm_peer_fi_addr(x, p) : p->fi_addr;
}

static unsigned raw_hash(const void *raw, size_t len)
{
	const unsigned char *p = raw;
	unsigned h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h % XPRT_HASH;
}

int xprt_peer_by_raw(xprt_t *x, const void *raw, size_t rawlen, xprt_peer_t **out)
{
	if (rawlen == 0 || rawlen > XPRT_ADDR_MAX)
		return -EINVAL;
	unsigned h = raw_hash(raw, rawlen);
	pthread_mutex_lock(&x->peer_mu);
	for (xprt_peer_t *p = x->peers[h]; p; p = p->next)
		if (p->rawlen == rawlen && memcmp(p->raw, raw, rawlen) == 0) {
			pthread_mutex_unlock(&x->peer_mu);
			*out = p;
			return 0;
		}
	xprt_peer_t *p = calloc(1, sizeof *p);
	int rc = -ENOMEM;
	if (!p)
		goto out;
	p->rawlen = rawlen;
	memcpy(p->raw, raw, rawlen);
	rc = xprt_format_addr(x->kind, raw, rawlen, p->addr, sizeof p->addr);
	if (rc < 0)
		goto out;
	if (x->kind == XPRT_SHM) {
		p->pinned = memchr(raw, XPRT_SHM_TAG_SEP, rawlen) != NULL;
		xprt_shm_resolve(x, p); /* may leave FI_ADDR_NOTAVAIL: resolved at the next send */
	} else {
		int n = fi_av_insert(x->av, p->raw, 1, &p->fi_addr, 0, NULL);
		if (n != 1) {
			rc = n < 0 ? xprt_fi_err(-n) : -EHOSTUNREACH;
			goto out;
		}
	}
	p->next = x->peers[h];
	x->peers[h] = p;
	atomic_fetch_add(&x->st.peers, 1);
	*out = p;
	p = NULL;
	rc = 0;
out:
	pthread_mutex_unlock(&x->peer_mu);
	free(p);
	return rc;
}

void xprt_peers_free(xprt_t *x)
{
	for (int i = 0; i < XPRT_HASH; i++)
		while (x->peers[i]) {
			xprt_peer_t *p = x->peers[i];
			x->peers[i] = p->next;
			shm_doorbell_unmap(p->db);
			free(p);
		}
	xprt_shm_retired_free(x);
}

static int split_addr(xprt_t *x, const char *addr, const char **rest, struct sockaddr_in *sin)
{
	if (!x || !addr)
		return -EINVAL;
	const char *sep = strstr(addr, "://");
	if (!sep)
		return -EINVAL;
	char proto[32];
	size_t pl = (size_t)(sep - addr);
	if (pl == 0 || pl >= sizeof proto)
		return -EINVAL;
	memcpy(proto, addr, pl);
	proto[pl] = 0;
	enum xprt_kind k;
	if (xprt_parse_proto(proto, &k) < 0 || k != x->kind)
		return -EINVAL;
	*rest = sep + 3;
	if (k == XPRT_SHM ? !xprt_shm_name_ok(*rest) : parse_inet(*rest, sin) < 0)
		return -EINVAL;
	return 0;
}

int xprt_ofi_connect(xprt_t *x, const char *addr, xprt_peer_t **out)
{
	const char *rest;
	struct sockaddr_in sin;
	int rc = split_addr(x, addr, &rest, &sin);
	if (rc == 0)
		rc = xprt_ofi_ensure(x);
	if (rc < 0)
		return rc;
	if (x->kind == XPRT_SHM)
		return xprt_peer_by_raw(x, rest, strlen(rest) + 1, out);
	return xprt_peer_by_raw(x, &sin, sizeof sin, out);
}

int xprt_connect(xprt_t *x, const char *addr, xprt_peer_t **out)
{
	const char *rest;
	struct sockaddr_in sin;
	if (!out)
		return -EINVAL;
	int rc = split_addr(x, addr, &rest, &sin);
	if (rc < 0)
		return rc;
	/* A server of ours on this node: no libfabric (xprt_local.c); else open it now. */
	if (x->local_on && xprt_local_connect(x, addr, out) == 0)
		return 0;
	return xprt_ofi_connect(x, addr, out);
}

const char *xprt_peer_addr(const xprt_peer_t *p) { return p->addr; }

int xprt_self_addr(const xprt_t *x, char *buf, size_t size)
{
	size_t n = strlen(x->self_addr);
	if (n >= size)
		return -ENAMETOOLONG;
	memcpy(buf, x->self_addr, n + 1);
	return 0;
}

const char *xprt_proto(const xprt_t *x) { return x->proto; }
