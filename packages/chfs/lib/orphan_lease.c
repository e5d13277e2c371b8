/*
 * orphan_lease.c — the leases that keep this process's orphans (lib/orphan.c) alive at the
 * servers, so that the data of an unlinked file this process holds open go if it dies.
 *
 * When orphan_hold() keeps a file's data for open descriptors, orphan_lease_hold() registers
 * the file id at one server (WOP_ORPHAN_HOLD to the server of the file's chunk 0, remembered
 * by address: the request is not placed by the ring, so the same server is renewed even after
 * a membership change) and the server answers with its lease (chfsd --orphan-lease, 60 s by
 * default). A renewal thread then sends one small HOLD per orphan every quarter lease — one
 * request per held file per 15 s by default, nothing at all for a process that holds none. At
 * the last close or chfs_term the data are removed as before and orphan_lease_drop() tells the
 * server (WOP_ORPHAN_DROP; not if the removal missed a server: the lease then runs out, and the
 * server removes the data again on every member); a server that stops hearing renewals removes
 * the data itself (server/orphans.c).
 *
 * Why a thread of its own: the transport's progress thread is the only reader of the
 * completion queue and must never wait for a reply, and libchfs has no timer. The thread is
 * started by the first orphan and ends when the last lease is dropped, so processes that never
 * unlink an open file (nearly all) never have it. It blocks every signal, as the progress
 * thread does (under the hook it runs on another libc than the program's). A forked child
 * starts with an empty table: the parent keeps renewing its own orphans.
 *
 * The same thread renews this process's open leases (open_lease.c) while it has files open or
 * closes to report: its first round comes soon after it starts (to learn the servers' lease),
 * then one a lease quarter.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

struct lease {
	uint64_t fileid, size;
	uint32_t pkey;
	char addr[WIRE_ADDR_MAX]; /* the server holding it */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct lease *v;
	int n, cap;
	int interval_ms; /* a quarter of the shortest lease a server gave */
	int known;       /* a server told its lease (else the first round comes soon) */
	int alive;       /* the renewal thread (detached) runs; it clears this, under the lock, as its last
	            * touch of library state, so waiting for alive == 0 is as good as a join */
	int stop;
	pid_t pid;
} L = {.lock = PTHREAD_MUTEX_INITIALIZER, .interval_ms = 15000};

/* The renewal wait runs on the monotonic clock: a wall clock set back must not delay a renewal
 * past the lease (the server would take the data). */
static void cv_init(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&L.cv, &a);
	pthread_condattr_destroy(&a);
}
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

/* L.lock held. After fork the child owns none of the parent's leases, nor its thread. */
static void adopt_after_fork(void)
{
	if (L.pid == getpid())
		return;
	L.pid = getpid();
	L.n = 0;
	L.alive = 0;
	L.stop = 0;
}

static void lock(void)
{
	/* A child forked while another thread held the lock has a copy that stays locked. */
	pthread_once(&cv_once, cv_init);
	if (L.pid && L.pid != getpid()) {
		pthread_mutex_init(&L.lock, NULL);
		cv_init();
	}
	pthread_mutex_lock(&L.lock);
	adopt_after_fork();
}

/* HOLD or DROP of fileid at addr; HOLD: the server's lease into *lease_ms. */
static int lease_call(struct srvlist *s, const char *addr, unsigned op, uint64_t fileid, uint64_t size,
                      int *lease_ms)
{
	int idx = client_server_index(s, addr);
	if (idx < 0)
		return -ENOENT; /* it left the pool */
	RPC_DECL(r);
	rpc_begin(&r, op);
	wenc_u64(&r.e, fileid);
	if (op == WOP_ORPHAN_HOLD)
		wenc_u64(&r.e, size);
	int rc = rpc_call(s, (unsigned)idx, &r);
	if (rc == 0 && op == WOP_ORPHAN_HOLD) {
		uint32_t ms = wdec_u32(&r.d);
		if (r.d.err || ms == 0)
			return -EBADMSG;
		*lease_ms = (int)ms;
	}
	return rc;
}

/* Register at the server of chunk 0 (whichever the current list says). */
static int hold_at_owner(struct srvlist *s, struct lease *l, int *lease_ms)
{
	snprintf(l->addr, sizeof l->addr, "%s", s->addrs[placement_chunk_server(s->ring, l->pkey, 0)]);
	return lease_call(s, l->addr, WOP_ORPHAN_HOLD, l->fileid, l->size, lease_ms);
}

/* L.lock held: a server's lease is ms. */
static void learn(int ms)
{
	if (!L.known || ms / 4 < L.interval_ms)
		L.interval_ms = ms / 4 > 50 ? ms / 4 : 50;
	L.known = 1;
}

/* L.lock held: anything to renew? */
static int busy(void) { return L.n > 0 || open_lease_active(); }

static void renew_all(void)
{
	struct srvlist *s;
	if (client_begin(&s) != 0)
		return;
	lock();
	int n = L.n;
	struct lease *copy = n ? malloc((size_t)n * sizeof *copy) : NULL;
	if (copy)
		memcpy(copy, L.v, (size_t)n * sizeof *copy);
	pthread_mutex_unlock(&L.lock);
	for (int i = 0; copy && i < n; i++) {
		int ms = 0,
		    rc = lease_call(s, copy[i].addr, WOP_ORPHAN_HOLD, copy[i].fileid, copy[i].size, &ms);
		if (rc == -ENOENT) /* the server left: register where chunk 0 lives now */
			rc = hold_at_owner(s, &copy[i], &ms);
		if (rc)
			log_warn("orphaned file %016llx: lease renewal at %s failed (%s); its data go if "
			         "this keeps failing for a lease",
			         (unsigned long long)copy[i].fileid, copy[i].addr, strerror(-rc));
		lock();
		for (int k = 0; k < L.n; k++)
			if (L.v[k].fileid == copy[i].fileid)
				memcpy(L.v[k].addr, copy[i].addr, sizeof L.v[k].addr);
		if (ms > 0)
			learn(ms);
		pthread_mutex_unlock(&L.lock);
	}
	free(copy);
	int ms = open_lease_renew(s);
	if (ms > 0) {
		lock();
		learn(ms);
		pthread_mutex_unlock(&L.lock);
	}
}

static void *renewer(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "chfs-lease"); /* what ps -L and /proc/PID/task/TID/comm show */
	lock();
	while (!L.stop && busy()) {
		struct timespec ts;
		int wait_ms = L.known ? L.interval_ms : 200;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		long ns = ts.tv_nsec + (long)(wait_ms % 1000) * 1000000L;
		ts.tv_sec += wait_ms / 1000 + ns / 1000000000L;
		ts.tv_nsec = ns % 1000000000L;
		pthread_cond_timedwait(&L.cv, &L.lock, &ts);
		if (L.stop || !busy())
			break;
		pthread_mutex_unlock(&L.lock);
		renew_all();
		lock();
	}
	L.alive = 0;
	pthread_cond_broadcast(&L.cv); /* orphan_lease_stop() waits for this */
	pthread_mutex_unlock(&L.lock);
	return NULL;
}

/* L.lock held. The thread is detached: one that ran out of leases ends on its own, and a process
 * that exits without chfs_term leaves nothing to join. */
static void start_renewer(void)
{
	if (L.alive)
		return; /* it sees the new lease at its next round */
	pthread_attr_t a;
	pthread_t t;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, &a, renewer, NULL) == 0) {
		L.alive = 1;
		/* Named before this returns, not only once it runs (its own prctl, for a system
		 * without /proc): a caller listing its threads right after sees it as chfs-lease.
		 * (t is valid: the thread takes L.lock first, which we hold, so it has not ended.) */
		pthread_setname_np(t, "chfs-lease");
	} else {
		log_warn("orphan lease renewal thread: cannot start; unlinked open files may be removed "
		         "by the servers after their lease");
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
}

void orphan_lease_hold(struct srvlist *s, const struct chfs_md *md)
{
	struct lease l = {.fileid = md->fileid, .size = md->size, .pkey = md->pkey};
	int ms = 0, rc = hold_at_owner(s, &l, &ms);
	if (rc) {
		log_warn("orphaned file %016llx: no lease at %s (%s); if this process dies its data stay "
		         "on the servers",
		         (unsigned long long)md->fileid, l.addr, strerror(-rc));
		return;
	}
	lock();
	for (int k = 0; k < L.n; k++)
		if (L.v[k].fileid == l.fileid) {
			pthread_mutex_unlock(&L.lock);
			return;
		}
	if (L.n == L.cap) {
		int cap = L.cap ? 2 * L.cap : 8;
		struct lease *v = realloc(L.v, (size_t)cap * sizeof *v);
		if (!v) {
			pthread_mutex_unlock(&L.lock);
			return;
		}
		L.v = v;
		L.cap = cap;
	}
	L.v[L.n++] = l;
	learn(ms);
	start_renewer();
	pthread_mutex_unlock(&L.lock);
}

void orphan_lease_drop(struct srvlist *s, uint64_t fileid, int removed)
{
	char addr[WIRE_ADDR_MAX] = "";
	lock();
	for (int k = 0; k < L.n; k++)
		if (L.v[k].fileid == fileid) {
			memcpy(addr, L.v[k].addr, sizeof addr);
			L.v[k] = L.v[--L.n];
			break;
		}
	if (!busy())
		pthread_cond_broadcast(&L.cv);
	pthread_mutex_unlock(&L.lock);
	if (addr[0] && removed)
		lease_call(s, addr, WOP_ORPHAN_DROP, fileid, 0, NULL); /* best effort: it expires anyway */
}

void lease_renewer_need(void)
{
	lock();
	if (!L.stop)
		start_renewer();
	pthread_mutex_unlock(&L.lock);
}

void orphan_lease_stop(void)
{
	lock();
	L.stop = 1;
	pthread_cond_broadcast(&L.cv);
	while (L.alive) /* the thread leaves within its current round (RPCs bounded by the timeout) */
		pthread_cond_wait(&L.cv, &L.lock);
	L.stop = 0;
	pthread_mutex_unlock(&L.lock);
}
