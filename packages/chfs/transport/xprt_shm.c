/*
 * xprt_shm.c — what only the shm provider needs: endpoint names, the doorbell, peers that follow
 * a restarted process, and a progress loop that sleeps on a futex.
 *
 * libfabric 1.17's shm has no CQ wait object and keeps a name-keyed peer map that cannot take
 * a peer back under the same name (see shm_doorbell.h), so this backend (1) names every
 * incarnation "<name>~<tag>" and publishes that in its doorbell file, (2) resolves a peer known
 * by <name> through the doorbell and re-resolves it when the doorbell says the incarnation
 * changed, and (3) polls the CQ while busy and sleeps on the doorbell when idle. The generic
 * modules call in here at one place each (x->kind == XPRT_SHM), as libuv's shared code calls
 * its platform files.
 *
 * Waiting when idle: the thread polls with fi_cq_read, yields for a few empty polls after the
 * last activity, then sleeps on its futex doorbell. Whoever posts work for this process — a peer
 * sending to it, a local thread starting a send or an RMA — rings the bell; the sleep timeout
 * doubles from 1 ms to 100 ms as a safety net, so an idle process wakes ~10 times a second
 * (0.1% CPU measured).
 */
#include "xprt_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static atomic_uint shm_name_seq;
static pthread_once_t shm_sweep_once = PTHREAD_ONCE_INIT;

/* Empty polls (each followed by sched_yield) before the progress thread sleeps on its doorbell.
 * Every party that posts work rings the bell, so spinning buys little and costs a core that
 * the peer process needs: profiles showed half the CPU in clock/lock calls of idle polls. */
#define SHM_IDLE_POLLS 4
/* Polls a waiting thread makes itself: enough to pick up a completion that is already queued
 * (a CMA RMA completes inside fi_read) without a hand-off through the progress thread. */
#define SHM_WAITER_POLLS 2
#define SHM_SLEEP_MIN_US 1000L
#define SHM_SLEEP_MAX_US 100000L

/* ---- names and the own doorbell ---- */

/* Valid shm endpoint names: what shm_open accepts and a shell prints safely. */
bool xprt_shm_name_ok(const char *s)
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

int xprt_shm_name(xprt_t *x, const char *host, char *name, size_t size)
{
	if (host && *host) {
		if (strchr(host, XPRT_SHM_TAG_SEP) || strlen(host) > 64)
			return -EINVAL;
		snprintf(name, size, "%s", host);
	} else {
		snprintf(name, size, "chfs-%d-%u", (int)getpid(), atomic_fetch_add(&shm_name_seq, 1));
	}
	uint32_t tag = 0;
	if (getrandom(&tag, sizeof tag, 0) != (ssize_t)sizeof tag)
		tag = (uint32_t)getpid() ^ (uint32_t)time(NULL) ^ atomic_load(&shm_name_seq) << 20;
	snprintf(x->shm_epname, sizeof x->shm_epname, "%s%c%08x", name, XPRT_SHM_TAG_SEP, tag);
	return 0;
}

int xprt_shm_open_doorbell(xprt_t *x)
{
	pthread_once(&shm_sweep_once, shm_doorbell_sweep);
	x->self_db = shm_doorbell_create(x->shm_name, x->shm_epname);
	return x->self_db ? 0 : (errno ? -errno : -EIO);
}

/* ---- peers ---- */

static void doorbell_name(const xprt_peer_t *p, char *name, size_t size)
{
	snprintf(name, size, "%s", p->addr + strlen("shm://"));
}

/* peer_mu held. Other threads may still use a replaced mapping (they load p->db without a lock
 * and ring it or read `closed`), so it stays mapped until xprt_close; 4 KiB per peer restart. If
 * even the list cannot grow, the mapping is leaked rather than unmapped under a user. */
static void db_retire(xprt_t *x, struct shm_doorbell *db)
{
	if (!db)
		return;
	if (x->ndb_retired == x->capdb_retired) {
		size_t cap = x->capdb_retired ? 2 * x->capdb_retired : 16;
		struct shm_doorbell **v = realloc(x->db_retired, cap * sizeof *v);
		if (!v)
			return;
		x->db_retired = v;
		x->capdb_retired = cap;
	}
	x->db_retired[x->ndb_retired++] = db;
}

/* shm, peer_mu held: find the endpoint name now serving p and make fi_addr point at it. A name
 * seen for the first time gets its own AV entry; the entry of a previous incarnation is left in
 * the AV unused (removing it is what crashes libfabric 1.17, see shm_doorbell.h). The new
 * doorbell mapping is published only once it is final. */
void xprt_shm_resolve(xprt_t *x, xprt_peer_t *p)
{
	char name[XPRT_ADDR_MAX], ep[XPRT_ADDR_MAX];
	doorbell_name(p, name, sizeof name);
	p->db_ident = shm_doorbell_ident(name);
	struct shm_doorbell *db = shm_doorbell_open(name);
	int have = shm_doorbell_epname(db, ep, sizeof ep);
	if (p->pinned) {
		/* The incarnation is fixed; its doorbell is useful only while it is that one's. */
		if (have < 0 || strcmp(ep, (const char *)p->raw) != 0) {
			shm_doorbell_unmap(db); /* never published */
			db = NULL;
		}
		snprintf(ep, sizeof ep, "%s", (const char *)p->raw);
	}
	db_retire(x, atomic_exchange(&p->db, db));
	if (!p->pinned && have < 0) {
		p->fi_addr = FI_ADDR_NOTAVAIL;
		p->ep[0] = 0;
		return;
	}
	if (p->ep[0] && strcmp(p->ep, ep) == 0)
		return;
	fi_addr_t fa;
	if (fi_av_insert(x->av, ep, 1, &fa, 0, NULL) != 1) {
		p->fi_addr = FI_ADDR_NOTAVAIL;
		p->ep[0] = 0;
		return;
	}
	p->fi_addr = fa;
	snprintf(p->ep, sizeof p->ep, "%s", ep);
}

void xprt_shm_peer_check(xprt_t *x, xprt_peer_t *p)
{
	(void)x;
	if (atomic_load(&p->stale))
		return;
	char name[XPRT_ADDR_MAX];
	doorbell_name(p, name, sizeof name);
	if (shm_doorbell_ident(name) != p->db_ident)
		atomic_store(&p->stale, true);
}

fi_addr_t xprt_shm_peer_fi_addr(xprt_t *x, xprt_peer_t *p)
{
	/* One load per send: the owner marks its doorbell closed at close, a successor marks its
	 * predecessor's; a peer first resolved while nobody served the name has no doorbell. */
	struct shm_doorbell *db = p->db;
	if (!atomic_load(&p->stale) && db && !atomic_load(&db->closed))
		return p->fi_addr;
	pthread_mutex_lock(&x->peer_mu);
	db = p->db;
	if (atomic_load(&p->stale) || !db || atomic_load(&db->closed)) {
		atomic_store(&p->stale, false);
		xprt_shm_resolve(x, p);
	}
	fi_addr_t fa = p->fi_addr;
	pthread_mutex_unlock(&x->peer_mu);
	return fa;
}

void xprt_shm_retired_free(xprt_t *x)
{
	for (size_t i = 0; i < x->ndb_retired; i++)
		shm_doorbell_unmap(x->db_retired[i]);
	free(x->db_retired);
	x->db_retired = NULL;
	x->ndb_retired = x->capdb_retired = 0;
}

/* ---- progress ---- */

void xprt_shm_poll_before_wait(xprt_t *x, atomic_bool *flag)
{
	for (int i = 0; i < SHM_WAITER_POLLS && !atomic_load(flag); i++)
		xprt_poll_cq(x, -1);
}

/* A caller polls for its own reply (caller-progress mode): the progress loop below, ending
 * when *flag is set or at `until`; the sleep never runs past `until`. */
bool xprt_shm_poll_until(xprt_t *x, atomic_bool *flag, const struct timespec *until)
{
	struct shm_doorbell *db = x->self_db;
	long sleep_us = SHM_SLEEP_MIN_US;
	int idle = 0;
	while (!atomic_load(flag)) {
		if (xprt_poll_cq(x, -1) > 0) {
			idle = 0;
			sleep_us = SHM_SLEEP_MIN_US;
			continue;
		}
		if (xprt_past(until))
			break;
		if (++idle < SHM_IDLE_POLLS) {
			sched_yield();
			continue;
		}
		idle = 0;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left =
		        (long)(until->tv_sec - now.tv_sec) * 1000000L + (until->tv_nsec - now.tv_nsec) / 1000;
		long us = left < sleep_us ? (left > 0 ? left : 1) : sleep_us;
		uint32_t seq = atomic_load(&db->seq);
		atomic_store(&db->sleeping, 1);
		atomic_thread_fence(memory_order_seq_cst);
		if (xprt_poll_cq(x, -1) > 0 || atomic_load(flag)) {
			atomic_store(&db->sleeping, 0);
			continue;
		}
		shm_doorbell_wait(db, seq, us);
		atomic_store(&db->sleeping, 0);
		if (atomic_load(&db->seq) == seq && sleep_us < SHM_SLEEP_MAX_US)
			sleep_us *= 2;
		else if (atomic_load(&db->seq) != seq)
			sleep_us = SHM_SLEEP_MIN_US;
	}
	return atomic_load(flag);
}

void xprt_shm_progress(xprt_t *x)
{
	struct shm_doorbell *db = x->self_db;
	long sleep_us = SHM_SLEEP_MIN_US;
	int idle = 0;
	while (!atomic_load(&x->stopping)) {
		if (xprt_poll_cq(x, -1) > 0) {
			idle = 0;
			sleep_us = SHM_SLEEP_MIN_US;
			continue;
		}
		if (++idle < SHM_IDLE_POLLS) {
			sched_yield();
			continue;
		}
		idle = 0;
		uint32_t seq = atomic_load(&db->seq);
		atomic_store(&db->sleeping, 1);
		atomic_thread_fence(memory_order_seq_cst);
		if (xprt_poll_cq(x, -1) > 0 || atomic_load(&x->stopping)) {
			atomic_store(&db->sleeping, 0);
			continue;
		}
		shm_doorbell_wait(db, seq, sleep_us);
		atomic_store(&db->sleeping, 0);
		atomic_fetch_add(&x->st.wakeups, 1);
		if (atomic_load(&db->seq) != seq) {
			sleep_us = SHM_SLEEP_MIN_US;
		} else if (sleep_us < SHM_SLEEP_MAX_US) {
			sleep_us *= 2;
		}
	}
}

void xprt_shm_kick(xprt_t *x, xprt_peer_t *peer)
{
	struct shm_doorbell *db = peer ? peer->db : NULL; /* one load: may be replaced meanwhile */
	if (db)
		shm_doorbell_ring(db);
	shm_doorbell_ring(x->self_db);
}

int xprt_shm_owner(const char *addr, uid_t *uid)
{
	if (strncmp(addr, "shm://", strlen("shm://")) != 0)
		return -EINVAL;
	return shm_doorbell_owner(addr + strlen("shm://"), uid);
}
