/*
 * orphans.c — the server-side list of files that outlive their name, so that a client killed
 * while it holds one does not leak the file's data.
 *
 * A client that keeps the data of an unlinked file for its open descriptors (lib/orphan.c)
 * registers the file id at one server (WOP_ORPHAN_HOLD, the holder's choice: the server of
 * the file's chunk 0) and renews that lease in the background (lib/orphan_lease.c) until it
 * removes the data itself at the last close or chfs_term and says so (WOP_ORPHAN_DROP). The
 * heartbeat thread calls orphans_collect every round: an entry not renewed for a lease
 * (chfsd --orphan-lease, $CHFS_ORPHAN_LEASE, default 60 s) belongs to a dead client, so this
 * server sends DATA_REMOVE for its file id to every member (itself directly) and forgets the
 * entry once all answered; a member that did not answer is asked again next round.
 *
 * The list is small (a few entries per client that unlinked open files) and changes only when
 * a file is orphaned or released, so it is persisted whole: DIR/orphans is rewritten (temporary
 * file, fsync, rename) on every registration and removal, never on a renewal. A restarted
 * server reads it back and gives each entry a full lease from its start, so a holder that is
 * alive renews in time and the data of a holder that died while the server was down still go.
 *
 * An orphan can also be held by the open leases of other clients (open_leases.c): the owner of
 * the removed name adopts it (orphans_adopt) and removes its data once no live open lease
 * holds the file — a round after the last holder's close reached it (orphans_due), or a lease
 * after the last holder died.
 *
 * The same list finishes removals that missed a member. A client whose DATA_REMOVE did not
 * reach every server that may hold chunks of the file (one killed, stopped, unreachable) tells
 * a server it reached (WOP_ORPHAN_DUE): that one lists the file as an orphan due at once, so
 * the next round sends DATA_REMOVE to every member. A member that does not answer keeps the
 * entry; it is asked again after 1 s, 2 s, 4 s ... (at most a lease: retry_ms), and at once
 * when the failure detector sees a member come back (orphans_member_up), so a restarted
 * server's copy of the chunks goes within seconds of its return — also after a restart too
 * quick for the detector to see — instead of staying until the pool's storage is removed.
 */
#define _GNU_SOURCE
#include "orphans.h"

#include "chfsd.h"
#include "log.h"
#include "open_leases.h"
#include "statefile.h"
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ORPHANS_FILE "orphans"
#define COLLECT_TIMEOUT_MS 2000 /* per member: the heartbeat thread must not stall */
#define ORPHANS_MAX 65536       /* entries: a bound on what one misbehaving client can make us keep */

struct orphan {
	uint64_t fileid, size;
	int64_t expires_ms; /* CLOCK_MONOTONIC */
	int leased;         /* held by open leases (open_leases.c), not only by ORPHAN_HOLD */
	int owed;           /* a removal some member missed: asked again when a member is back */
	unsigned tries;     /* collections that did not reach every member */
};

static struct {
	pthread_mutex_t lock;
	struct orphan *v;
	unsigned n, cap;
	int lease_ms;
	int rootfd;
} O = {.lock = PTHREAD_MUTEX_INITIALIZER, .lease_ms = ORPHAN_LEASE_DEFAULT_MS, .rootfd = -1};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int orphans_parse_lease(const char *s, int *ms)
{
	char *end;
	double sec = s ? strtod(s, &end) : 0;
	if (!s || end == s || *end || !(sec >= 0.1 && sec <= 86400))
		return -EINVAL;
	*ms = (int)(sec * 1000 + 0.5);
	return 0;
}

static int find(uint64_t fileid)
{
	for (unsigned i = 0; i < O.n; i++)
		if (O.v[i].fileid == fileid)
			return (int)i;
	return -1;
}

static int put_orphans(FILE *f, void *arg)
{
	(void)arg;
	fprintf(f, "chfs-orphans 1\n");
	for (unsigned i = 0; i < O.n; i++)
		fprintf(f, "%016" PRIx64 " %" PRIu64 "\n", O.v[i].fileid, O.v[i].size);
	return 0;
}

/* Rewrite DIR/orphans from the list (O.lock held). */
static int save(void) { return statefile_write(O.rootfd, ORPHANS_FILE, 1, put_orphans, NULL); }

static int add(uint64_t fileid, uint64_t size, int64_t expires)
{
	if (O.n == O.cap) {
		unsigned cap = O.cap ? 2 * O.cap : 16;
		if (cap > ORPHANS_MAX)
			return -ENOSPC;
		struct orphan *v = realloc(O.v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		O.v = v;
		O.cap = cap;
	}
	O.v[O.n++] = (struct orphan){fileid, size, expires, 0, 0, 0};
	return 0;
}

int orphans_adopt(uint64_t fileid, uint64_t size)
{
	pthread_mutex_lock(&O.lock);
	int i = find(fileid), rc = 0;
	if (i < 0 && (rc = add(fileid, size, now_ms() + O.lease_ms)) == 0 && (rc = save()) != 0)
		O.n--;
	if (rc == 0)
		O.v[i < 0 ? O.n - 1 : (unsigned)i].leased = 1;
	pthread_mutex_unlock(&O.lock);
	if (rc)
		log_err("orphan list (file " ORPHANS_FILE " of the storage directory): %s", strerror(-rc));
	return rc;
}

void orphans_member_up(void)
{
	pthread_mutex_lock(&O.lock);
	int64_t now = now_ms();
	for (unsigned i = 0; i < O.n; i++)
		if (O.v[i].owed)
			O.v[i].expires_ms = now;
	pthread_mutex_unlock(&O.lock);
}

void orphans_due(uint64_t fileid)
{
	pthread_mutex_lock(&O.lock);
	int i = find(fileid);
	if (i >= 0 && O.v[i].leased)
		O.v[i].expires_ms = now_ms();
	pthread_mutex_unlock(&O.lock);
}

int orphans_open(struct chfsd *d, int lease_ms)
{
	O.lease_ms = lease_ms;
	oleases_init(lease_ms);
	O.rootfd = st_rootfd(d->st);
	int fd = openat(O.rootfd, ORPHANS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	char line[128];
	int rc = 0;
	if (!fgets(line, sizeof line, f) || strcmp(line, "chfs-orphans 1\n") != 0)
		rc = -EBADMSG;
	int64_t expires = now_ms() + lease_ms;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		uint64_t id, size;
		if (sscanf(line, "%" SCNx64 " %" SCNu64, &id, &size) != 2)
			rc = -EBADMSG;
		else if (find(id) < 0)
			rc = add(id, size, expires);
	}
	fclose(f);
	if (rc == 0 && O.n)
		log_notice("orphan list: %u file(s) held by clients; removed unless renewed within %d ms",
		           O.n, lease_ms);
	return rc;
}

int orphans_handle(struct chfsd *d, const struct wire_req *q, struct wenc *e)
{
	(void)d; /* q was validated: a file id, a size within WIRE_MAX_OFFSET */
	pthread_mutex_lock(&O.lock);
	int i = find(q->fileid), rc = 0;
	if (q->h.op == WOP_ORPHAN_DUE) { /* (no lease in the answer: nobody renews it) */
		int64_t now = now_ms();
		if (i < 0 && (rc = add(q->fileid, q->size, now)) == 0 && (rc = save()) != 0)
			O.n--;
		if (rc == 0) {
			i = i < 0 ? (int)O.n - 1 : i;
			O.v[i].expires_ms = now;
			O.v[i].owed = 1;
		}
	} else if (q->h.op == WOP_ORPHAN_HOLD) {
		int64_t expires = now_ms() + O.lease_ms;
		if (i >= 0) { /* a renewal: memory only */
			O.v[i].expires_ms = expires;
			O.v[i].owed = 0; /* its holder lives: a member's return does not make it due */
			O.v[i].tries = 0;
			O.v[i].size = q->size;
		} else if ((rc = add(q->fileid, q->size, expires)) == 0 && (rc = save()) != 0) {
			O.n--;
		}
		if (rc == 0)
			wenc_u32(e, (uint32_t)O.lease_ms);
	} else if (i >= 0) {
		struct orphan gone = O.v[i];
		O.v[i] = O.v[--O.n];
		if ((rc = save()) != 0) { /* keep it: the data are gone, a later DATA_REMOVE is harmless */
			O.v[O.n++] = gone;
		}
	}
	pthread_mutex_unlock(&O.lock);
	if (rc && rc != -ENOSPC)
		log_err("orphan list (file " ORPHANS_FILE " of the storage directory): %s", strerror(-rc));
	return rc;
}

/* DATA_REMOVE of fileid at every member; 0 once all removed it. */
static int remove_everywhere(struct chfsd *d, uint64_t fileid)
{
	char *list = malloc(WIRE_LIST_MAX);
	if (!list)
		return -ENOMEM;
	unsigned vnodes;
	members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
	uint8_t msg[WIRE_HDR_LEN + 16], rep[WIRE_HDR_LEN + 16];
	struct wenc e;
	wenc_init(&e, msg, sizeof msg);
	chfsd_req_hdr(d, &e, WOP_DATA_REMOVE);
	wenc_u64(&e, fileid);
	int rc = 0;
	for (char *sv = NULL, *ent = strtok_r(list, ",", &sv); ent; ent = strtok_r(NULL, ",", &sv)) {
		const char *a = ent + WIRE_ID_LEN + 1;
		ent[WIRE_ID_LEN] = '\0';
		/* This runs on the heartbeat thread: a member found down is not waited for (its
		 * timeout would stall the failure detector); it is asked again next time. */
		int r = members_is_down(&d->mem, ent) ? -EHOSTDOWN
		        : strcmp(a, d->self) == 0
		                ? chfsd_data_remove(d, fileid)
		                : chfsd_call(d, a, &e, rep, sizeof rep, NULL, COLLECT_TIMEOUT_MS);
		if (r && r != -ENOENT) {
			log_warn("orphaned file %016" PRIx64
			         ": server %s did not remove its data (%s); asked again later",
			         fileid, a,
			         r == WIRE_ERETRY ? "its member list is not ours yet: joining or changed"
			                          : strerror(-r));
			rc = r;
		}
	}
	free(list);
	return rc;
}

/* When a collection that has failed `tries` times is tried again: 1 s, 2 s, 4 s ..., at most a
 * lease (a member down for long costs every other member one DATA_REMOVE a lease). */
static int64_t retry_ms(unsigned tries)
{
	int64_t ms = (int64_t)1000 << (tries < 20 ? tries : 20);
	return ms < O.lease_ms ? ms : O.lease_ms;
}

void orphans_collect(struct chfsd *d)
{
	for (;;) {
		pthread_mutex_lock(&O.lock);
		int64_t now = now_ms();
		int i = -1;
		for (unsigned k = 0; k < O.n && i < 0; k++)
			if (O.v[k].expires_ms <= now)
				i = (int)k;
		if (i >= 0 && O.v[i].leased) { /* (open_leases' lock nests inside ours) */
			if (oleases_held(O.v[i].fileid)) {
				O.v[i].expires_ms = now + O.lease_ms; /* asked again when its holders go */
				pthread_mutex_unlock(&O.lock);
				continue;
			}
		}
		struct orphan o = i >= 0 ? O.v[i] : (struct orphan){0};
		if (i >= 0) { /* once collected, whoever held it: finished as soon as a member is back */
			O.v[i].owed = 1;
			/* no second collection while this one runs (a late renewal re-adds it); if
			 * this one misses a member, the next comes then */
			O.v[i].expires_ms = now + retry_ms(O.v[i].tries++);
		}
		pthread_mutex_unlock(&O.lock);
		if (i < 0 || atomic_load(&d->stopping))
			return;
		if (remove_everywhere(d, o.fileid) != 0)
			return; /* asked again at the expiry set above, or when a member is back */
		log_notice("orphaned file %016" PRIx64 " (%" PRIu64 " bytes): %s, data removed", o.fileid,
		           o.size,
		           o.owed     ? "a removal that had missed a member finished"
		           : o.leased ? "no open lease holds it any more"
		                      : "holder's lease expired");
		pthread_mutex_lock(&O.lock);
		if ((i = find(o.fileid)) >= 0) {
			O.v[i] = O.v[--O.n];
			int rc = save();
			if (rc)
				log_err("orphan list (file " ORPHANS_FILE " of the storage directory): %s",
				        strerror(-rc));
		}
		pthread_mutex_unlock(&O.lock);
	}
}

void orphans_status(char *line, size_t size)
{
	uint64_t bytes = 0;
	pthread_mutex_lock(&O.lock);
	unsigned n = O.n;
	for (unsigned i = 0; i < n; i++)
		bytes += O.v[i].size;
	pthread_mutex_unlock(&O.lock);
	size_t len = strlen(line);
	if (len < size)
		snprintf(line + len, size - len, " orphans=%u orphan_bytes=%" PRIu64, n, bytes);
}
