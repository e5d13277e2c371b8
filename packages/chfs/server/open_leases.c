/*
 * open_leases.c — which clients hold which files open, kept by the owner of each file's name,
 * so that a file unlinked (or renamed over) by one client stays readable and writable through
 * another client's descriptors until that client closes it, as on a local file system.
 *
 * An open tells the owner (WOP_STAT_OPEN, or WOP_CREATE with WIRE_CREATE_LEASE: the request the
 * open sends anyway) and the owner counts it under the file id and the client's lease identity
 * (the high half of its request ids, random per process: wire_lease_client). The client
 * renews all its leases at a server with one WOP_LEASE_RENEW per lease quarter, which also
 * carries the closes since the last one (lib/open_lease.c): closes cost no request of their
 * own. When an UNLINK, RENAME or INSERT removes the record of a file that another client
 * holds open, the handler makes the file an orphan (orphans_adopt) and answers MD_HELD, so the
 * remover leaves the data alone; orphans.c removes them once no live lease holds the file any
 * more — at the holders' closes, or a lease after a holder died (oleases_collect).
 *
 * Memory: one entry per (file, client) with opens not yet reported closed, at most
 * OLEASES_MAX; past it an open is not recorded (logged once) and that file falls back to the
 * old rule (an unlink removes the data). Leases live in memory only: a restarted server knows
 * none, so an orphan it kept is removed a lease after the restart.
 */
#define _GNU_SOURCE
#include "open_leases.h"

#include "log.h"
#include "orphans.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define NBUCKETS 4096 /* power of two */
#define OLEASES_MAX (1u << 20)

struct lease {
	uint64_t fileid;
	uint32_t client, opens;
	struct lease *next;
};
struct holder {
	uint32_t client;
	int64_t renewed_ms; /* CLOCK_MONOTONIC */
	struct holder *next;
};

static struct {
	pthread_mutex_t lock;
	struct lease *files[NBUCKETS];    /* by file id */
	struct holder *clients[NBUCKETS]; /* by client */
	unsigned n;
	int full_logged;
	int lease_ms;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .lease_ms = 60000};

void oleases_init(int lease_ms)
{
	pthread_mutex_lock(&T.lock);
	T.lease_ms = lease_ms;
	pthread_mutex_unlock(&T.lock);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned hash64(uint64_t v) { return (unsigned)((v * 0x9E3779B97F4A7C15ull) >> 52) & (NBUCKETS - 1); }

/* T.lock held: the client's record (made if absent and make), its renewal time set to now. */
static struct holder *touch(uint32_t client, int make)
{
	struct holder **hp = &T.clients[hash64(client)];
	for (struct holder *h = *hp; h; h = h->next)
		if (h->client == client) {
			h->renewed_ms = now_ms();
			return h;
		}
	struct holder *h = make ? malloc(sizeof *h) : NULL;
	if (h) {
		*h = (struct holder){client, now_ms(), *hp};
		*hp = h;
	}
	return h;
}

void oleases_add(uint32_t client, uint64_t fileid)
{
	if (!client || !fileid)
		return;
	pthread_mutex_lock(&T.lock);
	struct lease **bp = &T.files[hash64(fileid)], *l = *bp;
	while (l && (l->fileid != fileid || l->client != client))
		l = l->next;
	if (!l && T.n < OLEASES_MAX && (l = malloc(sizeof *l)) != NULL) {
		*l = (struct lease){fileid, client, 0, *bp};
		*bp = l;
		T.n++;
	}
	if (l && touch(client, 1))
		l->opens++;
	else if (!T.full_logged && (T.full_logged = 1))
		log_warn("open leases: table full (%u); files opened now lose their data if another "
		         "client unlinks them",
		         T.n);
	pthread_mutex_unlock(&T.lock);
}

/* T.lock held: remove lease *lp; 1 if no lease of its file is left. */
static int unlink_lease(struct lease **lp)
{
	struct lease *l = *lp;
	uint64_t fileid = l->fileid;
	*lp = l->next;
	free(l);
	T.n--;
	for (struct lease *o = T.files[hash64(fileid)]; o; o = o->next)
		if (o->fileid == fileid)
			return 0;
	return 1;
}

/* T.lock held: drop `closes` opens of fileid by client (every one if closes is 0); the file
 * ids that lost their last lease are appended to gone. */
static void drop(uint32_t client, uint64_t fileid, uint32_t closes, uint64_t *gone, unsigned *ngone)
{
	for (unsigned b = fileid ? hash64(fileid) : 0; b < NBUCKETS; b++) {
		for (struct lease **lp = &T.files[b]; *lp;) {
			struct lease *l = *lp;
			if (l->client != client || (fileid && l->fileid != fileid)) {
				lp = &l->next;
				continue;
			}
			l->opens = closes && l->opens > closes ? l->opens - closes : 0;
			if (l->opens) {
				lp = &l->next;
				continue;
			}
			uint64_t id = l->fileid;
			if (unlink_lease(lp))
				gone[(*ngone)++] = id;
		}
		if (fileid)
			return;
	}
}

/* Outside T.lock: the orphans that lost their last lease are due for removal. */
static void report_gone(const uint64_t *gone, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		orphans_due(gone[i]);
}

int oleases_renew(uint32_t client, const struct wire_req *q, struct wenc *e)
{
	if (!client)
		return -EINVAL;
	uint64_t *gone = malloc((q->nitems + 1) * sizeof *gone); /* one file per item at most */
	struct wdec d;
	wdec_init(&d, q->items, q->items_len);
	unsigned ngone = 0;
	pthread_mutex_lock(&T.lock);
	touch(client, 0);
	for (uint32_t i = 0; i < q->nitems; i++) {
		uint64_t id;
		uint32_t closes;
		wire_lease_item_get(&d, &id, &closes); /* validated */
		if (!id) {                             /* the client ends: all of its leases */
			unsigned n = 0;
			uint64_t *all = malloc(T.n * sizeof *all + 1);
			if (all)
				drop(client, 0, 0, all, &n);
			pthread_mutex_unlock(&T.lock);
			report_gone(all, n);
			free(all);
			pthread_mutex_lock(&T.lock);
			continue;
		}
		if (gone)
			drop(client, id, closes, gone, &ngone);
	}
	int lease_ms = T.lease_ms;
	pthread_mutex_unlock(&T.lock);
	report_gone(gone, ngone);
	free(gone);
	wenc_u32(e, (uint32_t)lease_ms);
	return 0;
}

/* T.lock held: is client alive (renewed within lease_ms)? */
static int alive(uint32_t client, int64_t now, int lease_ms)
{
	for (struct holder *h = T.clients[hash64(client)]; h; h = h->next)
		if (h->client == client)
			return now - h->renewed_ms < lease_ms;
	return 0;
}

static int held(uint64_t fileid, uint32_t except, int any)
{
	int found = 0;
	int64_t now = now_ms();
	pthread_mutex_lock(&T.lock);
	int lease_ms = T.lease_ms;
	for (struct lease *l = T.files[hash64(fileid)]; l && !found; l = l->next)
		found = l->fileid == fileid && (any || l->client != except) &&
		        alive(l->client, now, lease_ms);
	pthread_mutex_unlock(&T.lock);
	return found;
}

int oleases_others(uint64_t fileid, uint32_t client) { return held(fileid, client, 0); }
int oleases_held(uint64_t fileid) { return held(fileid, 0, 1); }

void oleases_on_remove(const struct wire_req *q, struct chfs_md *removed)
{
	if (!S_ISREG(removed->mode) || (removed->flags & MD_LINKED) || !removed->fileid ||
	    !oleases_others(removed->fileid, wire_lease_client(&q->h)))
		return;
	if (orphans_adopt(removed->fileid, removed->size) == 0)
		removed->flags |= MD_HELD;
}

void oleases_collect(void)
{
	int64_t now = now_ms();
	pthread_mutex_lock(&T.lock);
	int lease_ms = T.lease_ms;
	for (unsigned b = 0; b < NBUCKETS; b++)
		for (struct holder **hp = &T.clients[b]; *hp;) {
			struct holder *h = *hp;
			if (now - h->renewed_ms < lease_ms) {
				hp = &h->next;
				continue;
			}
			*hp = h->next;
			uint32_t client = h->client;
			free(h);
			unsigned n = 0;
			uint64_t *gone = malloc(T.n * sizeof *gone + 1);
			if (gone)
				drop(client, 0, 0, gone, &n);
			if (n)
				log_notice("open leases: client %08" PRIx32 " stopped renewing; its %u open "
				           "file(s) released",
				           client, n);
			pthread_mutex_unlock(&T.lock);
			report_gone(gone, n);
			free(gone);
			pthread_mutex_lock(&T.lock);
		}
	pthread_mutex_unlock(&T.lock);
}

void oleases_status(char *line, size_t size)
{
	pthread_mutex_lock(&T.lock);
	unsigned n = T.n;
	pthread_mutex_unlock(&T.lock);
	size_t len = strlen(line);
	if (len < size)
		snprintf(line + len, size - len, " open_leases=%u", n);
}
