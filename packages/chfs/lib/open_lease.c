/*
 * open_lease.c — this process's open leases: the owners of the names of the files it has open
 * know it holds them, so an unlink or a rename over one of them by another process (another
 * hooked program, another node, another chfuse mount) keeps the data for our descriptors, as on
 * a local file system (server/open_leases.c).
 *
 * Riding on what an open sends anyway: the lookup of an existing file is a WOP_STAT_OPEN
 * instead of a STAT, a create carries WIRE_CREATE_LEASE; the process's lease identity is the
 * high half of its request ids (random, new after fork). Nothing is sent at close: the closes
 * are counted here and reported with the next renewal (WOP_LEASE_RENEW to every server, once
 * a lease quarter — 15 s by default — by the renewal thread of orphan_lease.c, only while this
 * process has files open or closes to report), and at chfs_term (or chfs_end_leases, which the
 * syscall hook calls at exit_group) one LEASE_RENEW to every server ends all of them. A process killed holds nothing a lease later.
 *
 * A forked child owns no lease: its copies of the parent's descriptors do not keep a file
 * (the parent's do, as long as it has them open); its own opens take leases of its own.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

struct close_note {
	uint64_t fileid;
	uint32_t n;
};

static struct {
	pthread_mutex_t lock;
	pid_t pid;
	uint32_t id;
	long opens; /* opens that took a lease, not yet reported closed */
	struct close_note *closes;
	unsigned nclose, cap;
	char **at; /* the servers that took a lease (addresses): the end goes to them only */
	unsigned nat, capat;
	int at_all; /* a lease taken where we could not note it: the end goes to every server */
} OL = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void free_at(char **at, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(at[i]);
	free(at);
}

/* OL.lock held, or the only thread (after fork). */
static void new_identity(void)
{
	uint32_t id = 0;
	while (id == 0 && getrandom(&id, sizeof id, GRND_NONBLOCK) == sizeof id)
		;
	if (id == 0) /* no entropy yet: pid and time differ between processes */
		id = ((uint32_t)getpid() * 2654435761u ^ (uint32_t)time(NULL)) | 1;
	OL.pid = getpid();
	OL.id = id;
	OL.opens = 0;
	OL.nclose = 0;
	free_at(OL.at, OL.nat); /* (a child's copy of the parent's) */
	OL.at = NULL;
	OL.nat = OL.capat = 0;
	OL.at_all = 0;
	atomic_store(&chfs_client.lease_id, id);
}

void open_lease_after_fork(void)
{
	pthread_mutex_init(&OL.lock, NULL); /* a copy taken while another thread held it */
	new_identity();
}

void open_lease_init(void)
{
	pthread_mutex_lock(&OL.lock);
	if (OL.pid != getpid())
		new_identity();
	pthread_mutex_unlock(&OL.lock);
}

/* OL.lock held. Note that server addr holds a lease of ours (the last one noted first). */
static void lease_at(const char *addr)
{
	for (unsigned i = OL.nat; i-- > 0;)
		if (strcmp(OL.at[i], addr) == 0)
			return;
	if (OL.nat == OL.capat) {
		unsigned cap = OL.capat ? 2 * OL.capat : 8;
		char **v = realloc(OL.at, cap * sizeof *v);
		if (!v) {
			OL.at_all = 1;
			return;
		}
		OL.at = v;
		OL.capat = cap;
	}
	if (!(OL.at[OL.nat] = strdup(addr)))
		OL.at_all = 1;
	else
		OL.nat++;
}

void open_lease_opened(const char *cpath)
{
	struct srvlist *s = atomic_load(&chfs_client.srv);
	pthread_mutex_lock(&OL.lock);
	OL.opens++;
	if (s && s->n)
		lease_at(s->addrs[placement_owner(s->ring, cpath)]);
	else
		OL.at_all = 1;
	pthread_mutex_unlock(&OL.lock);
	lease_renewer_need();
}

void open_lease_closed(uint64_t fileid)
{
	pthread_mutex_lock(&OL.lock);
	if (OL.pid == getpid()) { /* (a child's copies hold no lease of its own) */
		if (OL.nclose && OL.closes[OL.nclose - 1].fileid == fileid) {
			OL.closes[OL.nclose - 1].n++;
		} else {
			if (OL.nclose == OL.cap) {
				unsigned cap = OL.cap ? 2 * OL.cap : 64;
				struct close_note *v = realloc(OL.closes, cap * sizeof *v);
				if (v) {
					OL.closes = v;
					OL.cap = cap;
				}
			}
			if (OL.nclose < OL.cap) /* else the lease just lasts until chfs_term */
				OL.closes[OL.nclose++] = (struct close_note){fileid, 1};
		}
	}
	pthread_mutex_unlock(&OL.lock);
}

int open_lease_active(void)
{
	pthread_mutex_lock(&OL.lock);
	int active = OL.pid == getpid() && (OL.opens > 0 || OL.nclose > 0);
	pthread_mutex_unlock(&OL.lock);
	return active;
}

/* Keep in f only the servers whose address is among at[0..nat). */
static void only_at(struct srvlist *s, struct rpc_fanout *f, const char *const *at, unsigned nat)
{
	f->n = 0;
	for (unsigned i = 0; i < s->n; i++)
		for (unsigned k = 0; k < nat; k++)
			if (strcmp(s->addrs[i], at[k]) == 0) {
				f->idx[f->n++] = i;
				break;
			}
}

/* One LEASE_RENEW with items v[0..n) to every server (at: to those of its nat addresses only);
 * the shortest lease a server answered into *lease_ms. 0 if all answered. */
static int renew_once(struct srvlist *s, const struct close_note *v, unsigned n, int *lease_ms,
                      const char *const *at, unsigned nat)
{
	size_t len = WIRE_HDR_LEN + 4 + (size_t)n * 12;
	struct rpc_fanout f;
	uint8_t *msg = malloc(len);
	int rc = msg ? rpc_fanout_init(&f, s, WIRE_HDR_LEN + 8) : -ENOMEM;
	if (rc == 0) {
		struct wenc e;
		wenc_init(&e, msg, len);
		wenc_reserve(&e, WIRE_HDR_LEN);
		wenc_u32(&e, n);
		for (unsigned i = 0; i < n; i++) {
			wenc_u64(&e, v[i].fileid);
			wenc_u32(&e, v[i].n);
		}
		if (at)
			only_at(s, &f, at, nat);
		rc = f.n ? rpc_fanout_call(s, &f, msg, e.len, WOP_LEASE_RENEW) : 0;
		for (unsigned i = 0; i < f.n; i++) {
			struct wdec d;
			if (rpc_fanout_reply(&f, i, &d))
				continue;
			uint32_t ms = wdec_u32(&d);
			if (!d.err && ms && (*lease_ms == 0 || (int)ms < *lease_ms))
				*lease_ms = (int)ms;
		}
		rpc_fanout_free(&f);
	}
	free(msg);
	return rc;
}

/* Send the closes noted so far (all of this process's leases when end), in pieces of
 * WIRE_LEASE_MAX; a server that missed them lets them go a lease after chfs_term. */
static int send(struct srvlist *s, int end, int *lease_ms)
{
	pthread_mutex_lock(&OL.lock);
	if (OL.pid != getpid()) {
		pthread_mutex_unlock(&OL.lock);
		return 0;
	}
	struct close_note *v = OL.closes, all = {0, 0};
	unsigned n = OL.nclose;
	OL.closes = NULL;
	OL.nclose = OL.cap = 0;
	for (unsigned i = 0; i < n; i++)
		OL.opens -= v[i].n;
	char **at = OL.at; /* the end: to the servers that took a lease (every one if unknown) */
	unsigned nat = OL.nat;
	int everyone = OL.at_all;
	if (end) {
		OL.opens = 0;
		OL.at = NULL;
		OL.nat = OL.capat = 0;
		OL.at_all = 0;
	}
	pthread_mutex_unlock(&OL.lock);
	int rc = 0;
	if (end) {
		if (everyone || nat)
			rc = renew_once(s, &all, 1, lease_ms, everyone ? NULL : (const char *const *)at, nat);
		free_at(at, nat);
	} else {
		unsigned off = 0;
		do {
			unsigned k = n - off < WIRE_LEASE_MAX ? n - off : WIRE_LEASE_MAX;
			int r = renew_once(s, v + off, k, lease_ms, NULL, 0);
			if (r && !rc)
				rc = r;
			off += k;
		} while (off < n);
	}
	free(v);
	return rc;
}

int open_lease_renew(struct srvlist *s)
{
	int ms = 0;
	if (open_lease_active() && send(s, 0, &ms) != 0)
		log_warn("open files: lease renewal failed at some server; another process's unlink may "
		         "remove their data if this keeps failing for a lease");
	return ms;
}

void open_lease_end(void)
{
	struct srvlist *s;
	int ms = 0;
	if (open_lease_active() && client_begin(&s) == 0)
		send(s, 1, &ms); /* best effort: what a server missed expires */
}

int chfs_end_leases(void)
{
	open_lease_end();
	return 0;
}
