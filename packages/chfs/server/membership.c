/*
 * membership.c — the pool's server list.
 *
 * A new chfsd sends JOIN(self) to its bootstrap server; the bootstrap adds it, bumps the epoch,
 * answers with the list and pushes SET_LIST to every other member. Servers persist the list in
 * DIR/members ("epoch\naddr\naddr..."), so restarting any server on the same storage directory
 * (with the same address, which chfsd reuses from DIR/chfsd.addr) restores the pool view. There
 * is no failure detection or data migration (as upstream): a dead server stays in the list and
 * requests for its data fail with EIO until it comes back.
 */
#define _GNU_SOURCE
#include "chfsd.h"

#include "log.h"
#include "placement.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int has_addr(struct members *m, const char *a)
{
	for (unsigned i = 0; i < m->n; i++)
		if (strcmp(m->addrs[i], a) == 0)
			return 1;
	return 0;
}

static int push(struct members *m, const char *a, size_t len)
{
	char **na = realloc(m->addrs, (m->n + 1) * sizeof *na);
	if (!na)
		return -ENOMEM;
	m->addrs = na;
	if (!(na[m->n] = strndup(a, len)))
		return -ENOMEM;
	m->n++;
	return 0;
}

static void clear(struct members *m)
{
	for (unsigned i = 0; i < m->n; i++)
		free(m->addrs[i]);
	m->n = 0;
}

static void save(struct members *m)
{
	char tmp[] = "members.tmp";
	int fd = openat(m->rootfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return;
	}
	fprintf(f, "%llu\n", (unsigned long long)m->epoch);
	for (unsigned i = 0; i < m->n; i++)
		fprintf(f, "%s\n", m->addrs[i]);
	if (fclose(f) == 0)
		renameat(m->rootfd, tmp, m->rootfd, "members");
}

int members_init(struct members *m, int rootfd, const char *self)
{
	pthread_mutex_init(&m->lock, NULL);
	m->epoch = 0;
	m->n = 0;
	m->addrs = NULL;
	m->rootfd = rootfd;
	int fd = openat(rootfd, "members", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		FILE *f = fdopen(fd, "r");
		char line[WIRE_ADDR_MAX + 2];
		if (f && fgets(line, sizeof line, f))
			m->epoch = strtoull(line, NULL, 10);
		while (f && fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = '\0';
			if (wire_addr_ok(line, strlen(line)) && !has_addr(m, line))
				push(m, line, strlen(line));
		}
		if (f)
			fclose(f);
		else
			close(fd);
	}
	if (!has_addr(m, self)) {
		int rc = push(m, self, strlen(self));
		if (rc)
			return rc;
		m->epoch++;
	}
	placement_sort_servers(m->addrs, m->n);
	save(m);
	return 0;
}

int members_add(struct members *m, const char *addr)
{
	pthread_mutex_lock(&m->lock);
	int rc = 0;
	if (!has_addr(m, addr)) {
		rc = push(m, addr, strlen(addr));
		if (rc == 0) {
			placement_sort_servers(m->addrs, m->n);
			m->epoch++;
			save(m);
			rc = 1;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int members_set(struct members *m, uint64_t epoch, const char *list, size_t len)
{
	pthread_mutex_lock(&m->lock);
	int rc = 0;
	if (epoch > m->epoch) {
		clear(m);
		size_t s = 0;
		for (size_t i = 0; i <= len && rc == 0; i++)
			if (i == len || list[i] == ',') {
				rc = push(m, list + s, i - s);
				s = i + 1;
			}
		placement_sort_servers(m->addrs, m->n);
		m->epoch = epoch;
		save(m);
		rc = rc ? rc : 1;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

uint64_t members_get(struct members *m, char *buf, size_t size)
{
	pthread_mutex_lock(&m->lock);
	size_t o = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < m->n; i++) {
		int k = snprintf(buf + o, size - o, "%s%s", i ? "," : "", m->addrs[i]);
		if (k < 0 || (size_t)k >= size - o)
			break;
		o += (size_t)k;
	}
	uint64_t e = m->epoch;
	pthread_mutex_unlock(&m->lock);
	return e;
}

void chfsd_req_hdr(struct chfsd *d, struct wenc *e, unsigned op)
{
	struct wire_hdr h = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .op = (uint16_t)op};
	memcpy(h.secret, d->secret, CHFS_SECRET_LEN);
	wenc_reserve(e, WIRE_HDR_LEN);
	wire_hdr_put(e->p, &h);
}

static void finish_hdr(struct wenc *e)
{
	uint8_t *p = e->p;
	uint32_t n = (uint32_t)(e->len - WIRE_HDR_LEN);
	for (int i = 0; i < 4; i++)
		p[48 + i] = (uint8_t)(n >> (8 * i));
}

void members_broadcast(struct chfsd *d, const char *except)
{
	static char list[WIRE_LIST_MAX];
	static pthread_mutex_t bl = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&bl);
	uint64_t epoch = members_get(&d->mem, list, sizeof list);
	uint8_t *msg = malloc(WIRE_HDR_LEN + 16 + WIRE_LIST_MAX);
	char *copy = strdup(list);
	if (msg && copy) {
		struct wenc e;
		wenc_init(&e, msg, WIRE_HDR_LEN + 16 + WIRE_LIST_MAX);
		chfsd_req_hdr(d, &e, WOP_SET_LIST);
		wenc_u64(&e, epoch);
		wenc_str(&e, list);
		finish_hdr(&e);
		for (char *save = NULL, *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
			if (strcmp(a, d->self) == 0 || (except && strcmp(a, except) == 0))
				continue;
			xprt_peer_t *p;
			uint8_t rep[WIRE_HDR_LEN + 64];
			size_t rl;
			int rc = xprt_connect(d->x, a, &p);
			if (rc == 0)
				rc = xprt_call(d->x, p, msg, e.len, rep, sizeof rep, &rl, d->timeout_ms);
			if (rc)
				log_warn("membership: could not send the server list to %s: %s", a, strerror(-rc));
		}
	}
	free(copy);
	free(msg);
	pthread_mutex_unlock(&bl);
}

int members_join(struct chfsd *d, const char *bootstrap)
{
	uint8_t msg[WIRE_HDR_LEN + WIRE_ADDR_MAX + 8];
	size_t cap = WIRE_HDR_LEN + WIRE_LIST_MAX + 64, rl;
	uint8_t *rep = malloc(cap);
	struct wenc e;
	xprt_peer_t *p;
	if (!rep)
		return -ENOMEM;
	wenc_init(&e, msg, sizeof msg);
	chfsd_req_hdr(d, &e, WOP_JOIN);
	wenc_str(&e, d->self);
	finish_hdr(&e);
	int rc = xprt_connect(d->x, bootstrap, &p);
	if (rc == 0)
		rc = xprt_call(d->x, p, msg, e.len, rep, cap, &rl, d->timeout_ms);
	struct wire_hdr h;
	if (rc == 0)
		rc = wire_hdr_get(rep, rl, &h);
	if (rc == 0 && h.status)
		rc = h.status;
	if (rc == 0) {
		struct wdec dd;
		size_t n;
		wdec_init(&dd, rep + WIRE_HDR_LEN, rl - WIRE_HDR_LEN);
		uint64_t epoch = wdec_u64(&dd);
		const char *list = wdec_bytes(&dd, WIRE_LIST_MAX, &n);
		rc = wdec_finish(&dd);
		if (rc == 0) {
			/* Take the bootstrap's list even if our saved epoch is higher. */
			pthread_mutex_lock(&d->mem.lock);
			d->mem.epoch = 0;
			pthread_mutex_unlock(&d->mem.lock);
			members_set(&d->mem, epoch, list, n);
		}
	}
	free(rep);
	return rc;
}
