/*
 * membership.c — the pool's member list: (stable id, address) pairs, an epoch and the ring's
 * virtual-node count.
 *
 * Identity: each server has an id made once in its storage directory (DIR/server.id, 32 hex
 * digits from getrandom, mode 0600, validated when read). The ring is keyed by ids, so a server
 * restarted on the same directory keeps its ring place even on a new address: its JOIN carries
 * (id, new address) and the entry with its id takes the new address.
 *
 * Forming a pool: a chfsd started without a bootstrap server begins a new pool holding only
 * itself (the epoch continues from DIR/members so it only grows); servers joining it — and
 * servers of an earlier run on the same directories restarting — come back through JOIN. So a
 * one-server pool started on the scratch directory of a bigger, stopped pool does not wait for
 * members that are gone. (A server restarted on its own while its pool lives names a live
 * member as bootstrap, as chfsctl and the test pools do.)
 *
 * Changes: the server handling a JOIN adds or updates the entry, bumps the epoch, answers with
 * the list and wakes the broadcaster thread, which pushes SET_LIST to every other member. The
 * push runs outside the request workers, so a dead member (each call bounded by the RPC
 * timeout) never holds a worker; a member that missed a push gets it again (back-off 1..16 s),
 * so a server that was stopped or partitioned does not keep handing clients an old list. A
 * member that joins again under its id (a restart) is up here at once, and the broadcaster
 * tells the other members so (WOP_REJOINED) before their failure detectors' next round. Newer epochs win; DIR/members keeps the last list seen
 * ("epoch\nvnodes\nid=addr\n...") for inspection and for the epoch.
 */
#define _GNU_SOURCE
#include "chfsd.h"

#include "log.h"
#include "nodelist.h"
#include "placement.h"
#include "relink.h"
#include "statefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int members_self_id(int rootfd, char id[WIRE_ID_LEN + 1])
{
	char buf[WIRE_ID_LEN + 2];
	int fd = openat(rootfd, "server.id", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		if (n == WIRE_ID_LEN + 1 && buf[WIRE_ID_LEN] == '\n' && wire_id_ok(buf, WIRE_ID_LEN)) {
			memcpy(id, buf, WIRE_ID_LEN);
			id[WIRE_ID_LEN] = '\0';
			return 0;
		}
		log_err("server.id in the storage directory is not %d hex digits and a newline; "
		        "remove it to give this directory a new identity",
		        WIRE_ID_LEN);
		return -EINVAL;
	}
	if (errno != ENOENT)
		return -errno;
	uint8_t r[WIRE_ID_LEN / 2];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return -EIO;
	for (int i = 0; i < WIRE_ID_LEN / 2; i++)
		snprintf(buf + 2 * i, 3, "%02x", r[i]);
	buf[WIRE_ID_LEN] = '\n';
	fd = openat(rootfd, "server.id.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int ok = write(fd, buf, WIRE_ID_LEN + 1) == WIRE_ID_LEN + 1 && fsync(fd) == 0;
	close(fd);
	/* linkat-free "create once": a concurrent second chfsd on the same dir loses the race. */
	if (!ok || renameat2(rootfd, "server.id.tmp", rootfd, "server.id", RENAME_NOREPLACE) < 0) {
		int e = ok ? errno : EIO;
		unlinkat(rootfd, "server.id.tmp", 0);
		return e == EEXIST ? members_self_id(rootfd, id) : -e;
	}
	memcpy(id, buf, WIRE_ID_LEN);
	id[WIRE_ID_LEN] = '\0';
	return 0;
}

static int member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct wire_member *)a)->id, ((const struct wire_member *)b)->id);
}

static int put_members(FILE *f, void *arg)
{
	const struct members *m = arg;
	fprintf(f, "%llu\n%u\n", (unsigned long long)m->epoch, m->vnodes);
	for (unsigned i = 0; i < m->n; i++)
		fprintf(f, "%s=%s\n", m->m[i].id, m->m[i].addr);
	return 0;
}

/* DIR/members (m->lock held). */
static void save(struct members *m) { statefile_write(m->rootfd, "members", 0, put_members, m); }

int members_init(struct members *m, int rootfd, const char *id, const char *addr, unsigned vnodes,
                 int joining)
{
	pthread_rwlockattr_t ga;
	pthread_rwlockattr_init(&ga);
	pthread_rwlockattr_setkind_np(&ga, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&m->gate, &ga);
	pthread_rwlockattr_destroy(&ga);
	pthread_mutex_init(&m->lock, NULL);
	m->prev = strdup("");
	if (!m->prev)
		return -ENOMEM;
	pthread_cond_init(&m->cond, NULL);
	m->epoch = 0;
	m->vnodes = vnodes;
	m->rootfd = rootfd;
	m->pending = 0;
	m->down = NULL;
	m->rejoined = NULL;
	m->tell_up = NULL;
	m->n = 1;
	if (!(m->m = calloc(1, sizeof *m->m)))
		return -ENOMEM;
	snprintf(m->m[0].id, sizeof m->m[0].id, "%s", id);
	snprintf(m->m[0].addr, sizeof m->m[0].addr, "%s", addr);
	if (joining) {
		/* Until the JOIN reply is in, this server knows no pool: epoch 0, which no client or
		 * server takes over its own list (a pool of one with the next epoch, as a new pool
		 * gets, would look newer than the pool it rejoins: clients and members catching up
		 * took it and forgot every other member). Requests get WIRE_ERETRY meanwhile. */
		m->ring_epoch = 0;
		return 0;
	}
	int fd = openat(rootfd, "members", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		char line[32] = "";
		ssize_t n = read(fd, line, sizeof line - 1);
		close(fd);
		if (n > 0)
			m->epoch = strtoull(line, NULL, 10);
	}
	m->epoch++;
	m->ring_epoch = m->epoch; /* a new pool: nothing to rebalance */
	save(m);
	return 0;
}

/* The list as "id=addr,..." (caller holds m->lock); NULL on allocation failure. */
static char *list_string(const struct members *m)
{
	char *b = malloc(WIRE_LIST_MAX);
	size_t o = 0;
	if (!b)
		return NULL;
	b[0] = '\0';
	for (unsigned i = 0; i < m->n; i++) {
		int k = snprintf(b + o, WIRE_LIST_MAX - o, "%s%s=%s", i ? "," : "", m->m[i].id, m->m[i].addr);
		if (k < 0 || (size_t)k >= WIRE_LIST_MAX - o)
			break;
		o += (size_t)k;
	}
	return b;
}

/* The member set changed (not just an address): remember the list before it for the
 * rebalance (caller holds m->lock; old is the list before the change, consumed). */
static void ring_change(struct members *m, char *old)
{
	if (!old)
		return;
	free(m->prev);
	m->prev = old;
	m->ring_epoch = m->epoch;
}

static int has_id(const struct members *m, const char *id)
{
	for (unsigned i = 0; i < m->n; i++)
		if (strcmp(m->m[i].id, id) == 0)
			return 1;
	return 0;
}

/* ids (comma-joined, may be NULL) without those in drop: a new string, NULL if out of memory. */
static char *ids_without(const char *ids, const char *drop)
{
	size_t len = ids ? strlen(ids) : 0, o = 0, nd = drop ? strlen(drop) : 0;
	char *out = malloc(len + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i + WIRE_ID_LEN <= len; i += WIRE_ID_LEN + 1)
		if (!wire_id_in(ids + i, drop ? drop : "", nd))
			o += (size_t)sprintf(out + o, "%s%.*s", o ? "," : "", WIRE_ID_LEN, ids + i);
	out[o] = '\0';
	return out;
}

/* Append id to the comma-joined list *ids (left as it is if out of memory). */
static void ids_add(char **ids, const char *id)
{
	size_t n = *ids ? strlen(*ids) : 0;
	char *more = realloc(*ids, n + WIRE_ID_LEN + 2);
	if (more) {
		snprintf(more + n, WIRE_ID_LEN + 2, "%s%s", n ? "," : "", id);
		*ids = more;
	}
}

/* id joined again (through this server, or another that told us): it is alive (m->lock
 * held). */
static void mark_alive(struct members *m, const char *id)
{
	char *down = ids_without(m->down, id);
	if (down) {
		free(m->down);
		m->down = down;
	}
	ids_add(&m->rejoined, id);
}

void members_rejoined(struct members *m, const char *id)
{
	pthread_mutex_lock(&m->lock);
	if (has_id(m, id))
		mark_alive(m, id);
	pthread_mutex_unlock(&m->lock);
}

int members_add(struct chfsd *d, const char *id, const char *addr)
{
	struct members *m = &d->mem;
	pthread_rwlock_wrlock(&m->gate);
	pthread_mutex_lock(&m->lock);
	int rc = 0, newid = !has_id(m, id);
	char *old = newid ? list_string(m) : NULL;
	if (newid && !old) {
		pthread_mutex_unlock(&m->lock);
		pthread_rwlock_unlock(&m->gate);
		return -ENOMEM;
	}
	pthread_mutex_unlock(&m->lock);
	if (newid && rebalance_active(d)) { /* one change at a time: the joiner retries */
		free(old);
		pthread_rwlock_unlock(&m->gate);
		return -EAGAIN;
	}
	pthread_mutex_lock(&m->lock);
	unsigned i, same_addr = m->n;
	for (i = 0; i < m->n && strcmp(m->m[i].id, id) != 0; i++)
		if (strcmp(m->m[i].addr, addr) == 0)
			same_addr = i;
	if (i < m->n) {
		mark_alive(m, id);
		ids_add(&m->tell_up, id); /* the others still count its misses: tell them */
		pthread_cond_signal(&m->cond);
		if (strcmp(m->m[i].addr, addr) != 0) { /* restarted elsewhere: same ring place */
			log_notice("server %s moved from %s to %s", id, m->m[i].addr, addr);
			snprintf(m->m[i].addr, sizeof m->m[i].addr, "%s", addr);
			rc = 1;
		}
		for (unsigned k = 0; rc && k < m->n; k++)
			if (k != i &&
			    strcmp(m->m[k].addr, addr) == 0) { /* an earlier tenant of that address */
				m->m[k] = m->m[--m->n];
				break;
			}
	} else if (same_addr < m->n) {
		/* Only one process can listen on an address: its previous server is gone. */
		log_notice("server %s at %s replaces server %s", id, addr, m->m[same_addr].id);
		snprintf(m->m[same_addr].id, sizeof m->m[same_addr].id, "%s", id);
		rc = 1;
	} else {
		struct wire_member *nm = realloc(m->m, (m->n + 1) * sizeof *nm);
		if (!nm) {
			rc = -ENOMEM;
		} else {
			m->m = nm;
			snprintf(nm[m->n].id, sizeof nm[m->n].id, "%s", id);
			snprintf(nm[m->n].addr, sizeof nm[m->n].addr, "%s", addr);
			m->n++;
			rc = 1;
		}
	}
	char *before = NULL;
	if (rc == 1) {
		qsort(m->m, m->n, sizeof *m->m, member_cmp);
		m->epoch++;
		if (newid) {
			before = strdup(old);
			ring_change(m, old);
			old = NULL;
		}
		save(m);
	}
	pthread_mutex_unlock(&m->lock);
	free(old);
	if (rc == 1 && newid)
		rebalance_ring_changed(d);
	pthread_rwlock_unlock(&m->gate);
	if (rc == 1 && newid) /* (before the JOIN is answered) */
		brelink_joined(d, before);
	free(before);
	return rc;
}

int members_set(struct chfsd *d, uint64_t epoch, unsigned vnodes, const char *list, size_t len,
                uint64_t ring_epoch, const char *prev, size_t plen)
{
	struct members *m = &d->mem;
	int n = wire_list_parse(list, len, NULL, WIRE_LIST_MAX);
	if (n <= 0)
		return -EINVAL;
	struct wire_member *nm = calloc((size_t)n, sizeof *nm);
	char *np = strndup(prev, plen);
	if (!nm || !np) {
		free(nm);
		free(np);
		return -ENOMEM;
	}
	if (wire_list_parse(list, len, nm, (unsigned)n) != n) {
		free(nm);
		free(np);
		return -EINVAL;
	}
	qsort(nm, (size_t)n, sizeof *nm, member_cmp);
	pthread_rwlock_wrlock(&m->gate);
	pthread_mutex_lock(&m->lock);
	int rc = 0, ringchg = 0;
	char *before = NULL; /* (a server still joining has no list of its own to compare) */
	if (epoch > m->epoch) {
		before = m->epoch && ring_epoch != m->ring_epoch ? list_string(m) : NULL;
		free(m->m);
		m->m = nm;
		m->n = (unsigned)n;
		m->epoch = epoch;
		m->vnodes = vnodes;
		ringchg = ring_epoch != m->ring_epoch;
		m->ring_epoch = ring_epoch;
		free(m->prev);
		m->prev = np;
		save(m);
		nm = NULL;
		np = NULL;
		rc = 1;
	}
	pthread_mutex_unlock(&m->lock);
	if (ringchg)
		rebalance_ring_changed(d);
	pthread_rwlock_unlock(&m->gate);
	if (ringchg)
		brelink_joined(d, before); /* (a member that joined: the renamed files' names) */
	free(before);
	free(nm);
	free(np);
	return rc;
}

int members_leave(struct chfsd *d)
{
	struct members *m = &d->mem;
	pthread_rwlock_wrlock(&m->gate);
	pthread_mutex_lock(&m->lock);
	unsigned i;
	for (i = 0; i < m->n && strcmp(m->m[i].id, d->id) != 0; i++)
		;
	int rc = 0;
	char *old = list_string(m);
	if (!old)
		rc = -ENOMEM;
	else if (i == m->n)
		rc = -ENOENT;
	else if (m->n == 1)
		rc = -EBUSY; /* the last member has nobody to hand its keys to */
	if (rc == 0) {
		memmove(&m->m[i], &m->m[i + 1], (m->n - i - 1) * sizeof *m->m);
		m->n--;
		m->epoch++;
		ring_change(m, old);
		old = NULL;
		save(m);
	}
	pthread_mutex_unlock(&m->lock);
	free(old);
	if (rc == 0)
		rebalance_ring_changed(d);
	pthread_rwlock_unlock(&m->gate);
	return rc;
}

uint64_t members_epoch(struct members *m)
{
	pthread_mutex_lock(&m->lock);
	uint64_t e = m->epoch;
	pthread_mutex_unlock(&m->lock);
	return e;
}

uint64_t members_ring_epoch(struct members *m)
{
	pthread_mutex_lock(&m->lock);
	uint64_t e = m->ring_epoch;
	pthread_mutex_unlock(&m->lock);
	return e;
}

void members_get_ring(struct members *m, uint64_t *ring_epoch, char *buf, size_t size, unsigned *vnodes)
{
	pthread_mutex_lock(&m->lock);
	*ring_epoch = m->ring_epoch;
	*vnodes = m->vnodes;
	snprintf(buf, size, "%s", m->prev ? m->prev : "");
	pthread_mutex_unlock(&m->lock);
}

void members_put_list(struct members *m, struct wenc *e)
{
	pthread_mutex_lock(&m->lock);
	char *list = list_string(m);
	struct wire_listinfo li = {.epoch = m->epoch,
	                           .ring_epoch = m->ring_epoch,
	                           .vnodes = m->vnodes,
	                           .list = list ? list : "",
	                           .down = m->down ? m->down : "",
	                           .prev = m->prev ? m->prev : ""};
	li.nlist = strlen(li.list);
	li.ndown = strlen(li.down);
	li.nprev = strlen(li.prev);
	wire_list_put(e, &li);
	if (!list)
		e->err = -ENOMEM;
	pthread_mutex_unlock(&m->lock);
	free(list);
}

void members_catch_up(struct chfsd *d, uint64_t epoch)
{
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&one);
	char *list = members_epoch(&d->mem) < epoch ? malloc(WIRE_LIST_MAX) : NULL;
	unsigned vnodes;
	if (list) {
		members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
		for (char *sv = NULL, *ent = strtok_r(list, ",", &sv); ent && members_epoch(&d->mem) < epoch;
		     ent = strtok_r(NULL, ",", &sv)) {
			const char *a = ent + WIRE_ID_LEN + 1;
			struct nodelist l;
			if (strcmp(a, d->self) == 0 ||
			    nodelist_fetch(d->x, a, d->secret, 1000, NULL, NULL, &l) != 0)
				continue;
			if (l.epoch > members_epoch(&d->mem))
				members_set(d, l.epoch, l.vnodes, l.list, l.len, l.ring_epoch, l.prev,
				            l.nprev);
			nodelist_free(&l);
		}
		free(list);
	}
	pthread_mutex_unlock(&one);
}

uint64_t members_get(struct members *m, char *buf, size_t size, unsigned *vnodes)
{
	pthread_mutex_lock(&m->lock);
	size_t o = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < m->n; i++) {
		int k = snprintf(buf + o, size - o, "%s%s=%s", i ? "," : "", m->m[i].id, m->m[i].addr);
		if (k < 0 || (size_t)k >= size - o) {
			buf[o] = '\0';
			break;
		}
		o += (size_t)k;
	}
	uint64_t e = m->epoch;
	*vnodes = m->vnodes;
	pthread_mutex_unlock(&m->lock);
	return e;
}

/* One push of the current list to every other member; returns how many did not take it. */
static unsigned broadcast_once(struct chfsd *d, char *list, uint8_t *msg, size_t cap)
{
	unsigned failed = 0;
	unsigned vnodes;
	members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
	struct wenc e;
	wenc_init(&e, msg, cap);
	chfsd_req_hdr(d, &e, WOP_SET_LIST);
	members_put_list(&d->mem, &e);
	for (char *sv = NULL, *ent = strtok_r(list, ",", &sv); ent; ent = strtok_r(NULL, ",", &sv)) {
		const char *a = ent + WIRE_ID_LEN + 1;
		if (strcmp(a, d->self) == 0)
			continue;
		uint8_t rep[WIRE_HDR_LEN + 64];
		int rc = chfsd_call(d, a, &e, rep, sizeof rep, NULL, d->timeout_ms);
		if (rc) {
			log_warn("membership: could not send the server list to %s: %s", a, strerror(-rc));
			failed++;
		}
	}
	return failed;
}

#define LIST_MSG_CAP (WIRE_HDR_LEN + 64 + 3 * (size_t)WIRE_LIST_MAX)

static pthread_t bc_thread;
static int bc_running;

/* Tell every other member that the members in ids (comma-joined) joined again through this
 * server: their failure detectors had them down, and would until their next round. */
static void tell_rejoined(struct chfsd *d, char *ids, uint8_t *msg, size_t cap)
{
	for (char *sv = NULL, *id = strtok_r(ids, ",", &sv); id; id = strtok_r(NULL, ",", &sv)) {
		struct wenc e;
		wenc_init(&e, msg, cap);
		chfsd_req_hdr(d, &e, WOP_REJOINED);
		wenc_str(&e, id);
		chfsd_call_peers(d, &e, NULL, NULL); /* best effort: the heartbeat is the fallback */
	}
}

static void *broadcaster(void *arg)
{
	struct chfsd *d = arg;
	char *list = malloc(WIRE_LIST_MAX);
	uint8_t *msg = malloc(LIST_MSG_CAP);
	int retry_s = 0; /* a member missed the last push: push again after this long */
	for (;;) {
		pthread_mutex_lock(&d->mem.lock);
		int due = 0; /* a retry of a missed push */
		if (retry_s) {
			struct timespec t;
			clock_gettime(CLOCK_REALTIME, &t);
			t.tv_sec += retry_s;
			while (!d->mem.pending && !d->mem.tell_up && !atomic_load(&d->stopping) && !due)
				due = pthread_cond_timedwait(&d->mem.cond, &d->mem.lock, &t) != 0;
		} else {
			while (!d->mem.pending && !d->mem.tell_up && !atomic_load(&d->stopping))
				pthread_cond_wait(&d->mem.cond, &d->mem.lock);
		}
		int push = d->mem.pending || due;
		d->mem.pending = 0; /* changes during this push trigger one more */
		char *up = d->mem.tell_up;
		d->mem.tell_up = NULL;
		pthread_mutex_unlock(&d->mem.lock);
		if (atomic_load(&d->stopping)) {
			free(up);
			break;
		}
		if (up && msg)
			tell_rejoined(d, up, msg, LIST_MSG_CAP);
		free(up);
		if (!push)
			continue;
		/* Members that are up to date ignore a repeated epoch, so a retry goes to everyone;
		 * the back-off (1, 2, 4 .. 16 s) bounds the cost of a member that stays down. */
		unsigned failed = list && msg ? broadcast_once(d, list, msg, LIST_MSG_CAP) : 0;
		retry_s = failed ? (retry_s ? (retry_s < 16 ? retry_s * 2 : 16) : 1) : 0;
	}
	free(list);
	free(msg);
	return NULL;
}

void members_flush_broadcast(struct chfsd *d)
{
	char *list = malloc(WIRE_LIST_MAX);
	uint8_t *msg = malloc(LIST_MSG_CAP);
	if (list && msg)
		broadcast_once(d, list, msg, LIST_MSG_CAP);
	free(list);
	free(msg);
}

void members_get_down(struct members *m, char *buf, size_t size)
{
	pthread_mutex_lock(&m->lock);
	snprintf(buf, size, "%s", m->down ? m->down : "");
	pthread_mutex_unlock(&m->lock);
}

int members_is_down(struct members *m, const char *id)
{
	pthread_mutex_lock(&m->lock);
	int down = m->down && wire_id_in(id, m->down, strlen(m->down));
	pthread_mutex_unlock(&m->lock);
	return down;
}

void members_set_down(struct members *m, const char *ids, char *rejoined)
{
	pthread_mutex_lock(&m->lock);
	char *c = ids_without(ids, m->rejoined);
	snprintf(rejoined, WIRE_LIST_MAX, "%s", c && m->rejoined ? m->rejoined : "");
	if (c) {
		free(m->down);
		m->down = c;
		free(m->rejoined);
		m->rejoined = NULL;
	}
	pthread_mutex_unlock(&m->lock);
}

int members_start_broadcaster(struct chfsd *d)
{
	int rc = pthread_create(&bc_thread, NULL, broadcaster, d);
	if (rc)
		return -rc;
	bc_running = 1;
	return 0;
}

/* d->stopping is set: wake the broadcaster and wait for it (its calls are bounded). */
void members_stop_broadcaster(struct chfsd *d)
{
	if (!bc_running)
		return;
	pthread_mutex_lock(&d->mem.lock);
	pthread_cond_broadcast(&d->mem.cond);
	pthread_mutex_unlock(&d->mem.lock);
	pthread_join(bc_thread, NULL);
	bc_running = 0;
}

void members_changed(struct chfsd *d)
{
	pthread_mutex_lock(&d->mem.lock);
	d->mem.pending = 1;
	pthread_cond_signal(&d->mem.cond);
	pthread_mutex_unlock(&d->mem.lock);
}

/* Whom server addr's rebalance waits for (its status line's waiting_for=, rebalance.c), or
 * "unknown" if it does not say. */
static void rebalance_waits_for(struct chfsd *d, const char *addr, char *out, size_t size)
{
	uint8_t msg[WIRE_HDR_LEN + 16], *rep = malloc(WIRE_HDR_LEN + 2048);
	char *line = malloc(1100);
	struct wenc e;
	struct wdec b;
	snprintf(out, size, "unknown");
	wenc_init(&e, msg, sizeof msg);
	chfsd_req_hdr(d, &e, WOP_STATUS);
	if (rep && line && chfsd_call(d, addr, &e, rep, WIRE_HDR_LEN + 2048, &b, d->timeout_ms) == 0) {
		wdec_str(&b, line, 1100);
		const char *w = wdec_finish(&b) ? NULL : strstr(line, " waiting_for=");
		if (w)
			snprintf(out, size, "%.*s", (int)strcspn(w + 13, " "), w + 13);
	}
	free(rep);
	free(line);
}

int members_join(struct chfsd *d, const char *bootstrap)
{
	struct nodelist l;
	int rc;
	/* A pool rebalancing after an earlier change refuses new members until it is done. */
	for (int waited = 0;; waited++) {
		rc = nodelist_fetch(d->x, bootstrap, d->secret, d->timeout_ms, d->id, d->self, &l);
		if (rc != -EAGAIN)
			break;
		if (waited % 10 == 0) {
			char who[WIRE_ADDR_MAX + WIRE_ID_LEN + 16];
			rebalance_waits_for(d, bootstrap, who, sizeof who);
			log_notice("joining through %s: the pool is still rebalancing after an earlier "
			           "change (it waits for member %s); waiting",
			           bootstrap, who);
		}
		sleep(1);
	}
	if (rc)
		return rc;
	if (d->vnodes_opt && d->vnodes_opt != l.vnodes)
		log_warn("-V %u ignored: the pool uses %u virtual nodes per server", d->vnodes_opt, l.vnodes);
	/* Take the bootstrap's list even if our saved epoch is higher. */
	pthread_mutex_lock(&d->mem.lock);
	d->mem.epoch = 0;
	pthread_mutex_unlock(&d->mem.lock);
	rc = members_set(d, l.epoch, l.vnodes, l.list, l.len, l.ring_epoch, l.prev, l.nprev);
	nodelist_free(&l);
	return rc < 0 ? rc : 0;
}
