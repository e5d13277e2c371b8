/*
 * handover.c — the giving side of a rebalance (see rebalance.h). After the ring changed, a
 * server that was a member before walks everything it holds — namespace records and the
 * chunks in its data files (their placement tag says where each chunk belongs) — and HINTs
 * each key another server now owns to that server, in batches of at most WIRE_MIG_HINT_MAX keys
 * and HINT_BYTES encoded bytes (names are up to CHFS_PATH_MAX: a count alone could make a
 * request larger than any transport carries). The new
 * owner takes each key (from its previous owner, normally this server) before it answers, so a
 * HINT that succeeded means those keys are at their new owner; a copy still here (a leftover
 * the new owner did not need) is dropped. When the walk found nothing left to hand over and
 * every HINT succeeded, the server sends DONE to every member; failures are retried with a
 * back-off (1..16 s), so a member that was down gets its keys when it is back.
 *
 * Graceful leave (SIGUSR1 → handover_leave): the server first asks the other members for the
 * backend names it missed (relink_owed.c: a rename that reached the backend while it was
 * stopped or cut off — its dirty chunks are flushed as they are handed over, and must go to the
 * file's new name), then takes itself out of the member list (epoch + 1, a ring change), pushes
 * the list to every member, hands everything over the same way and returns when done; chfsd
 * then exits.
 */
#define _GNU_SOURCE
#include "chfsd.h"
#include "rebalance.h"
#include "relink.h"

#include "log.h"
#include "placement.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HINT_TIMEOUT_MS 120000
#define HINT_BYTES (96 * 1024) /* encoded items per HINT: below every transport's message size */

/* The items for one member, encoded as the HINT carries them. */
struct batch {
	uint8_t *items;
	size_t len;
	unsigned n;
};

struct scan {
	struct chfsd *d;
	struct ring *ring;
	struct wire_member *m;
	unsigned n;
	int self; /* index in m, -1 when leaving */
	struct batch *b;
	uint8_t *msg, *rep;
	size_t cap;
	unsigned long long sent, failed;
	uint64_t ring_epoch;
};

/* The member the last pass did not finish with (a HINT or DONE failed), for the status line. */
static pthread_mutex_t blocked_lock = PTHREAD_MUTEX_INITIALIZER;
static char blocked[WIRE_ADDR_MAX + WIRE_ID_LEN + 8];

static void set_blocked(const struct wire_member *m)
{
	pthread_mutex_lock(&blocked_lock);
	if (!m)
		blocked[0] = '\0';
	else
		snprintf(blocked, sizeof blocked, "%s(%s)", m->addr, m->id);
	pthread_mutex_unlock(&blocked_lock);
}

void handover_blocked(char *buf, size_t size)
{
	pthread_mutex_lock(&blocked_lock);
	snprintf(buf, size, "%s", blocked);
	pthread_mutex_unlock(&blocked_lock);
}

static pthread_mutex_t kick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kick_cond = PTHREAD_COND_INITIALIZER;
static int kicked, stopping, running;
static pthread_t thread;

void handover_kick(struct chfsd *d)
{
	(void)d;
	pthread_mutex_lock(&kick_lock);
	kicked = 1;
	pthread_cond_broadcast(&kick_cond);
	pthread_mutex_unlock(&kick_lock);
}

/* Drop the local copy of an item the new owner has (a leftover it did not take from here). */
static void drop_local(struct chfsd *d, const struct wire_mig_item *it)
{
	if (it->kind == WIRE_MIG_ENTRY) {
		struct chfs_md md;
		if (st_lookup(d->st, it->path, &md) == 0)
			st_remove_if(d->st, it->path, md.fileid);
	} else {
		st_data_punch(d->st, it->fileid, it->index * it->tag.chunk_size, it->tag.chunk_size);
	}
}

static int flush(struct scan *s, unsigned dest)
{
	struct batch *b = &s->b[dest];
	if (!b->n)
		return 0;
	struct wenc e;
	wenc_init(&e, s->msg, s->cap);
	chfsd_req_hdr(s->d, &e, WOP_MIG_HINT);
	wenc_u32(&e, b->n);
	wenc_raw(&e, b->items, b->len);
	int rc = chfsd_call(s->d, s->m[dest].addr, &e, s->rep, s->cap, NULL, HINT_TIMEOUT_MS);
	struct wire_mig_item *it = rc == 0 ? malloc(sizeof *it) : NULL;
	if (it) {
		struct wdec dec;
		wdec_init(&dec, b->items, b->len);
		for (unsigned i = 0; i < b->n && wire_mig_item_get(&dec, it) == 0; i++)
			drop_local(s->d, it);
		free(it);
	}
	if (rc == 0) {
		s->sent += b->n;
	} else {
		log_warn("rebalance: %s did not take %u keys: %s (will retry)", s->m[dest].addr, b->n,
		         rc < 0 && rc > -4096 ? strerror(-rc) : "the member list changed");
		s->failed += b->n;
		set_blocked(&s->m[dest]);
	}
	b->n = 0;
	b->len = 0;
	return rc;
}

static int add(struct scan *s, uint64_t ringkey, const struct wire_mig_item *it)
{
	if (atomic_load(&stopping) || members_ring_epoch(&s->d->mem) != s->ring_epoch)
		return 1; /* stop the walk */
	unsigned o = ring_owner(s->ring, ringkey);
	if ((int)o == s->self)
		return 0;
	struct batch *b = &s->b[o];
	size_t need = it->kind == WIRE_MIG_ENTRY ? 8 + strlen(it->path) : 32;
	if (b->len + need > HINT_BYTES)
		flush(s, o);
	struct wenc e;
	wenc_init(&e, b->items + b->len, HINT_BYTES - b->len);
	wire_mig_item_put(&e, it);
	b->len += e.len;
	if (++b->n == WIRE_MIG_HINT_MAX)
		flush(s, o);
	return 0;
}

static int on_entry(void *arg, const char *path, const struct chfs_md *md)
{
	(void)md;
	struct scan *s = arg;
	struct wire_mig_item *it = malloc(sizeof *it);
	if (!it)
		return -ENOMEM;
	it->kind = WIRE_MIG_ENTRY;
	snprintf(it->path, sizeof it->path, "%s", path);
	int rc = add(s, placement_chunk_key(placement_new_key(path), 0), it);
	free(it);
	return rc;
}

static int on_data(void *arg, uint64_t fileid)
{
	struct scan *s = arg;
	struct wire_tag tag;
	if (st_data_tag(s->d->st, fileid, &tag) != 0 || (tag.flags & MD_LOCAL))
		return 0; /* node-local files stay with their home */
	int fd = st_data_open(s->d->st, fileid, 0);
	if (fd < 0)
		return 0;
	struct wire_mig_item *it = malloc(sizeof *it);
	int rc = it ? 0 : -ENOMEM;
	for (off_t off = 0; rc == 0;) {
		off_t data = lseek(fd, off, SEEK_DATA);
		if (data < 0)
			break;
		uint64_t idx = (uint64_t)data / tag.chunk_size;
		*it = (struct wire_mig_item){
		        .kind = WIRE_MIG_CHUNK, .fileid = fileid, .index = idx, .tag = tag};
		rc = add(s, placement_chunk_key(tag.pkey, idx), it);
		off = (off_t)((idx + 1) * tag.chunk_size);
	}
	free(it);
	close(fd);
	return rc;
}

/* One pass: walk, hint, and say DONE if everything went. 0 when done, 1 to retry. */
static int pass(struct chfsd *d)
{
	struct scan s = {.d = d, .self = -1};
	char *list = malloc(WIRE_LIST_MAX);
	unsigned vnodes;
	int rc = 1;
	if (!list)
		return 1;
	uint64_t epoch = members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
	(void)epoch;
	s.ring_epoch = members_ring_epoch(&d->mem);
	int n = wire_list_parse(list, strlen(list), NULL, WIRE_LIST_MAX);
	s.cap = WIRE_HDR_LEN + 4 + HINT_BYTES + 64;
	if (n <= 0 || !(s.m = calloc((size_t)n, sizeof *s.m)) || !(s.b = calloc((size_t)n, sizeof *s.b)) ||
	    !(s.msg = malloc(2 * s.cap)))
		goto out;
	s.rep = s.msg + s.cap;
	s.n = (unsigned)n;
	wire_list_parse(list, strlen(list), s.m, s.n);
	const char **ids = calloc(s.n, sizeof *ids);
	for (unsigned i = 0; ids && i < s.n; i++) {
		ids[i] = s.m[i].id;
		if (strcmp(s.m[i].id, d->id) == 0)
			s.self = (int)i;
		if (!(s.b[i].items = malloc(HINT_BYTES))) {
			free(ids);
			goto out;
		}
	}
	if (!ids || ring_build(ids, s.n, vnodes, &s.ring) != 0) {
		free(ids);
		goto out;
	}
	free(ids);
	log_info("rebalance: handing over what this server holds for ring epoch %llu",
	         (unsigned long long)s.ring_epoch);
	int wrc = st_ns_walk(d->st, on_entry, &s);
	if (wrc == 0)
		wrc = st_data_walk(d->st, on_data, &s);
	for (unsigned i = 0; i < s.n; i++)
		flush(&s, i);
	if (wrc != 0 || s.failed || members_ring_epoch(&d->mem) != s.ring_epoch)
		goto out;
	/* Everything is at its new owner: tell every member. */
	unsigned missed = 0;
	for (unsigned i = 0; i < s.n; i++) {
		if ((int)i == s.self)
			continue;
		struct wenc e;
		wenc_init(&e, s.msg, s.cap);
		chfsd_req_hdr(d, &e, WOP_MIG_DONE);
		wenc_u64(&e, s.ring_epoch);
		wenc_str(&e, d->id);
		if (chfsd_call(d, s.m[i].addr, &e, s.rep, s.cap, NULL, d->timeout_ms) != 0) {
			missed++;
			set_blocked(&s.m[i]);
		}
	}
	if (missed)
		goto out;
	log_notice("rebalance: handed over %llu keys for ring epoch %llu", s.sent,
	           (unsigned long long)s.ring_epoch);
	rc = 0;
	set_blocked(NULL);
out:
	for (unsigned i = 0; s.b && i < s.n; i++)
		free(s.b[i].items);
	free(s.b);
	free(s.m);
	free(s.msg);
	ring_free(s.ring);
	free(list);
	return rc;
}

static void *handover_thread(void *arg)
{
	struct chfsd *d = arg;
	int backoff = 0;
	pthread_mutex_lock(&kick_lock);
	while (!stopping) {
		if (!atomic_load(&d->handover_pending)) {
			kicked = backoff = 0;
			pthread_cond_wait(&kick_cond, &kick_lock);
			continue;
		}
		if (backoff && !kicked) { /* the last pass failed: wait, unless something changed */
			struct timespec t;
			clock_gettime(CLOCK_REALTIME, &t);
			t.tv_sec += backoff;
			pthread_cond_timedwait(&kick_cond, &kick_lock, &t);
			if (stopping)
				break;
		}
		kicked = 0;
		pthread_mutex_unlock(&kick_lock);
		uint64_t re = members_ring_epoch(&d->mem);
		int again = pass(d);
		pthread_mutex_lock(&kick_lock);
		if (!again && members_ring_epoch(&d->mem) == re) {
			atomic_store(&d->handover_pending, 0);
			pthread_mutex_unlock(&kick_lock);
			rebalance_saved(d);
			pthread_mutex_lock(&kick_lock);
			backoff = 0;
			pthread_cond_broadcast(&kick_cond); /* handover_leave waits for this */
		} else {
			backoff = backoff ? (backoff < 16 ? backoff * 2 : 16) : 1;
		}
	}
	pthread_mutex_unlock(&kick_lock);
	return NULL;
}

int handover_start(struct chfsd *d)
{
	int rc = pthread_create(&thread, NULL, handover_thread, d);
	if (rc)
		return -rc;
	running = 1;
	handover_kick(d);
	return 0;
}

void handover_stop(struct chfsd *d)
{
	(void)d;
	if (!running)
		return;
	pthread_mutex_lock(&kick_lock);
	stopping = 1;
	pthread_cond_broadcast(&kick_cond);
	pthread_mutex_unlock(&kick_lock);
	pthread_join(thread, NULL);
	running = 0;
}

int handover_take_hinted(struct chfsd *d, const struct wire_req *q, struct wenc *e)
{
	(void)e;
	struct wdec dec;
	struct wire_mig_item *it = malloc(sizeof *it);
	if (!it)
		return -ENOMEM;
	wdec_init(&dec, q->items, q->items_len);
	int rc = 0;
	for (uint32_t i = 0; i < q->nitems && rc == 0; i++) {
		if ((rc = wire_mig_item_get(&dec, it)) != 0)
			break;
		if (it->kind == WIRE_MIG_ENTRY) {
			rc = rebalance_take_entry(d, it->path);
		} else {
			struct wire_seg sg = {.off = it->index * it->tag.chunk_size,
			                      .len = it->tag.chunk_size};
			rc = rebalance_take_chunks(d, it->fileid, &it->tag, &sg, 1);
		}
	}
	free(it);
	return rc;
}

int handover_leave(struct chfsd *d)
{
	for (int waited = 0; rebalance_active(d); waited++) {
		if (waited % 10 == 0)
			log_notice("leave: waiting for the running rebalance to finish first");
		sleep(1);
	}
	brelink_pull(d); /* while still a member: a debt to one that left is dropped */
	int rc = members_leave(d);
	if (rc < 0)
		return rc;
	log_notice("leave: left the member list; handing every key over");
	members_changed(d);
	handover_kick(d);
	pthread_mutex_lock(&kick_lock);
	while (atomic_load(&d->handover_pending) && !stopping) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		pthread_cond_timedwait(&kick_cond, &kick_lock, &t);
	}
	pthread_mutex_unlock(&kick_lock);
	members_flush_broadcast(d);
	return atomic_load(&d->handover_pending) ? -EINTR : 0;
}
