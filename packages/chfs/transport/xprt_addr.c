/*
 * xprt_addr.c — protocol names, printable addresses and the peer cache.
 *
 * Printable address = "<proto>://<rest>". For tcp, verbs and sockets the raw provider address is
 * a struct sockaddr_in and <rest> is "IPv4:port" (libfabric 1.17 cannot turn its own address
 * strings back into addresses, so we parse them). For shm the raw address is the endpoint's
 * NUL-terminated name (set with fi_setname, so no "fi_shm://" prefix and no ":uid:index" suffix)
 * and <rest> is that name. Peers are cached by raw address, so a client
 * connected by string and the same client seen in a request share one entry and one fi_addr.
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
	{"tcp", XPRT_TCP},          {"ofi+tcp", XPRT_TCP},       {"tcp;ofi_rxm", XPRT_TCP},
	{"ofi+tcp;ofi_rxm", XPRT_TCP}, {"ofi+sockets", XPRT_SOCKETS}, {"sockets", XPRT_SOCKETS},
	{"shm", XPRT_SHM},          {"sm", XPRT_SHM},            {"na+sm", XPRT_SHM},
	{"ofi+shm", XPRT_SHM},      {"verbs", XPRT_VERBS},       {"ofi+verbs", XPRT_VERBS},
	{"verbs;ofi_rxm", XPRT_VERBS}, {"ofi+verbs;ofi_rxm", XPRT_VERBS},
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
		n = snprintf(buf, size, "shm://%s", s);
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

/* Valid shm endpoint names: what shm_open accepts and a shell prints safely. */
static bool shm_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
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

static void doorbell_name(const xprt_peer_t *p, char *name, size_t size)
{
	snprintf(name, size, "%s", p->addr + strlen("shm://"));
}

static void open_doorbell(xprt_peer_t *p)
{
	char name[XPRT_ADDR_MAX];
	doorbell_name(p, name, sizeof name);
	p->db_ident = shm_doorbell_ident(name);
	p->db = shm_doorbell_open(name);
}

void xprt_peer_check(xprt_t *x, xprt_peer_t *p)
{
	if (x->kind != XPRT_SHM || atomic_load(&p->stale))
		return;
	char name[XPRT_ADDR_MAX];
	doorbell_name(p, name, sizeof name);
	/* Only a live new incarnation is worth re-inserting: re-inserting a name whose region is
	 * gone leaves shm 1.17 with a half-mapped peer that crashes the next send. */
	unsigned long now = shm_doorbell_ident(name);
	if (now != 0 && now != p->db_ident)
		atomic_store(&p->stale, true);
}

void xprt_peer_refresh(xprt_t *x, xprt_peer_t *p)
{
	/* libfabric 1.17's shm keeps its mapping of the dead peer's region; removing and
	 * re-inserting the address maps the new incarnation. Calls racing with this use either
	 * fi_addr; those on the old one fail or time out as they would have anyway. */
	pthread_mutex_lock(&x->peer_mu);
	if (atomic_load(&p->stale)) {
		fi_addr_t fa;
		fi_av_remove(x->av, &p->fi_addr, 1, 0);
		if (fi_av_insert(x->av, p->raw, 1, &fa, 0, NULL) == 1)
			p->fi_addr = fa;
		shm_doorbell_unmap(p->db);
		open_doorbell(p);
		atomic_store(&p->stale, false);
	}
	pthread_mutex_unlock(&x->peer_mu);
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
	int n = fi_av_insert(x->av, p->raw, 1, &p->fi_addr, 0, NULL);
	if (n != 1) {
		rc = n < 0 ? xprt_fi_err(-n) : -EHOSTUNREACH;
		goto out;
	}
	if (x->kind == XPRT_SHM)
		open_doorbell(p);
	p->next = x->peers[h];
	x->peers[h] = p;
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
}

int xprt_connect(xprt_t *x, const char *addr, xprt_peer_t **out)
{
	if (!x || !addr || !out)
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
	const char *rest = sep + 3;
	if (k == XPRT_SHM) {
		if (!shm_name_ok(rest))
			return -EINVAL;
		return xprt_peer_by_raw(x, rest, strlen(rest) + 1, out);
	}
	struct sockaddr_in sin;
	if (parse_inet(rest, &sin) < 0)
		return -EINVAL;
	return xprt_peer_by_raw(x, &sin, sizeof sin, out);
}

const char *xprt_peer_addr(const xprt_peer_t *p)
{
	return p->addr;
}

int xprt_self_addr(const xprt_t *x, char *buf, size_t size)
{
	size_t n = strlen(x->self_addr);
	if (n >= size)
		return -ENAMETOOLONG;
	memcpy(buf, x->self_addr, n + 1);
	return 0;
}

const char *xprt_proto(const xprt_t *x)
{
	return x->proto;
}
