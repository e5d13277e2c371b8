/*
 * relink_owed.c — the new backend names (WOP_RELINK, relink.c) a member did not get.
 *
 * When a rename reaches the backend while a member is down, that member still holds the file's
 * old backend name: its dirty chunks (STORAGE/bdirty maps survive a kill) and the writes it
 * serves after its restart would be flushed under the old name. So the server announcing the
 * rename keeps a debt per member it could not tell: in memory and appended to
 * STORAGE/bdirty/relink.owed (lines "fileid id address"; a line of an earlier build has no id,
 * which is found by the address), so it survives that server's restart too. A debt belongs to
 * the member's identity, not its address: a member restarted on another address is still owed.
 * A member starting again asks every other member for its debts (WOP_RELINK_OWED, brelink_pull)
 * before its flush threads begin (flush.c holds them until then); the debtor sends the
 * WOP_RELINKs, with the file's current backend name, before answering. Every chfs_sync also
 * retries what is still owed (a member that was only unreachable). A debt out for delivery
 * stays listed, and in the file, until the member has it: two deliveries at once (a sync and a
 * member's pull) each rewrite the file, and neither may drop what the other is still sending.
 *
 * A removal is owed the same way, as an empty name (the file has none any more): a client
 * whose DATA_REMOVE or DATA_UNNAMED did not reach a member tells a member it reached
 * (WOP_UNNAMED_OWED, bowed_unnamed), and the restarted or resumed member, told before it
 * flushes, never flushes the removed file's chunks under the name (a file made since under
 * it got them on the backend). Its chunks stay, unnamed, until a DATA_REMOVE reaches it.
 *
 * A member that left the pool (chfsctl remove: SIGUSR1) is owed nothing any more: it asked for
 * its debts before handing its keys over (handover.c), so the chunks it flushed on their way to
 * the new owners went to the new name, and those owners were members when the rename was
 * announced, or joined after it and were owed every name at their join (relink_join.c). A debt to an id no
 * longer in the member list is dropped, with a log line, at the next delivery (it used to stay
 * in relink.owed and be retried at every sync for ever).
 */
#define _GNU_SOURCE
#include "relink.h"

#include "chfsd.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct debt {
	uint64_t fileid;
	char id[WIRE_ID_LEN + 1]; /* the member's identity ("": a line of an earlier build) */
	char addr[WIRE_ADDR_MAX]; /* its address when last seen (changes only while not sending) */
	int sending;              /* out for delivery: stays listed (and in the file) until told */
	int again;                /* owed anew while out: a delivery that succeeds keeps it */
	struct debt *next;
};

static struct {
	pthread_mutex_t lock;
	struct debt *head;
	int fd;
} ow = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

/* Is debt x owed to the member of id (or, if x has no id, of addr)? */
static int owed_to(const struct debt *x, const char *id, const char *addr)
{
	return *x->id && id && *id ? strcmp(x->id, id) == 0 : strcmp(x->addr, addr) == 0;
}

static int add(uint64_t fileid, const char *id, const char *addr)
{
	for (struct debt *x = ow.head; x; x = x->next)
		if (x->fileid == fileid && owed_to(x, id, addr)) {
			x->again = x->sending; /* the name being sent may be older than this rename */
			return 0;
		}
	struct debt *x = calloc(1, sizeof *x);
	if (!x || strlen(addr) >= sizeof x->addr || strlen(id) >= sizeof x->id) {
		free(x);
		return -ENOMEM;
	}
	x->fileid = fileid;
	strcpy(x->id, id);
	strcpy(x->addr, addr);
	x->next = ow.head;
	ow.head = x;
	return 1;
}

/* The file: every debt, one line each (lock held). */
static void rewrite(void)
{
	int fd = ow.fd >= 0 && ftruncate(ow.fd, 0) == 0 ? dup(ow.fd) : -1;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f && fd >= 0)
		close(fd); /* (fdopen failed: the descriptor is still ours) */
	for (struct debt *x = ow.head; f && x; x = x->next)
		fprintf(f, "%016llx %s %s\n", (unsigned long long)x->fileid, *x->id ? x->id : "-", x->addr);
	if (!f || fclose(f) != 0)
		log_err("backend names owed to other servers (relink.owed): not saved; lost if this server restarts");
}

int bowed_init(int bdirty_fd)
{
	ow.fd = openat(bdirty_fd, "relink.owed", O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ow.fd < 0)
		return -errno;
	int fd = dup(ow.fd);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	unsigned long long fileid;
	char line[WIRE_ID_LEN + WIRE_ADDR_MAX + 40], a[WIRE_ADDR_MAX], b[WIRE_ADDR_MAX];
	if (f && fseek(f, 0, SEEK_SET) == 0)
		while (fgets(line, sizeof line, f)) {
			int n = sscanf(line, "%llx %255s %255s", &fileid, a, b);
			if (n == 3) /* "fileid id address" ("-": no id) */
				add(fileid, wire_id_ok(a, strlen(a)) ? a : "", b);
			else if (n == 2) /* an earlier build's "fileid address" */
				add(fileid, "", a);
		}
	if (f)
		fclose(f);
	else if (fd >= 0)
		close(fd);
	return 0;
}

void bowed_add(struct chfsd *d, const char *id, const char *addr, uint64_t fileid)
{
	(void)d;
	pthread_mutex_lock(&ow.lock);
	int rc = add(fileid, id, addr);
	if (rc > 0 && dprintf(ow.fd, "%016llx %s %s\n", (unsigned long long)fileid, *id ? id : "-", addr) < 0)
		rc = -errno;
	pthread_mutex_unlock(&ow.lock);
	if (rc < 0)
		log_err("backend name of file %016llx owed to %s: not saved (%s); it may flush the file under its old "
		        "name",
		        (unsigned long long)fileid, addr, strerror(-rc));
}

void bowed_add_all(struct chfsd *d, const char *id, const char *addr, const uint64_t *fileids, size_t n)
{
	(void)d;
	size_t lost = 0;
	pthread_mutex_lock(&ow.lock);
	int fd = dup(ow.fd); /* (O_APPEND: the new lines through one buffered stream) */
	FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (!f && fd >= 0)
		close(fd);
	int saved = f != NULL;
	for (size_t i = 0; i < n; i++) {
		int rc = add(fileids[i], id, addr);
		lost += rc < 0;
		if (rc > 0 && f &&
		    fprintf(f, "%016llx %s %s\n", (unsigned long long)fileids[i], *id ? id : "-", addr) < 0)
			saved = 0;
	}
	if (f && fclose(f) != 0)
		saved = 0;
	pthread_mutex_unlock(&ow.lock);
	if (lost || !saved)
		log_err("backend names of %zu files owed to %s: %zu not noted, %s; it may flush files under "
		        "their old names",
		        n, addr, lost, saved ? "the rest saved" : "not saved in relink.owed");
}

/* The members (id and address) as this server knows them; NULL if not known (then nothing is
 * taken for gone). */
static struct wire_member *members(struct chfsd *d, int *n)
{
	char *list = malloc(WIRE_LIST_MAX);
	unsigned vnodes;
	struct wire_member *m = NULL;
	*n = 0;
	if (list)
		members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
	int k = list ? wire_list_parse(list, strlen(list), NULL, WIRE_LIST_MAX) : -1;
	if (k > 0 && (m = calloc((size_t)k, sizeof *m)) &&
	    wire_list_parse(list, strlen(list), m, (unsigned)k) != k) {
		free(m);
		m = NULL;
	}
	free(list);
	*n = m ? k : 0;
	return m;
}

int bowed_unnamed(struct chfsd *d, uint64_t fileid, const char *addr)
{
	if (!d->bk)
		return -EOPNOTSUPP;
	int n, rc = -EINVAL;
	struct wire_member *m = members(d, &n);
	for (int i = 0; i < n && rc == -EINVAL; i++)
		if (strcmp(m[i].addr, addr) == 0 && strcmp(m[i].id, d->id) != 0) {
			if ((rc = brelink_note(d, fileid, "")) == 0) /* what the delivery sends */
				bowed_add(d, m[i].id, addr, fileid);
			else
				log_err("file %016llx lost its last name, missed by %s: not noted (%s); it may "
				        "flush the file's chunks it holds under the removed name",
				        (unsigned long long)fileid, addr, strerror(-rc));
		}
	free(m);
	if (rc == 0)
		log_notice("file %016llx lost its last name while %s could not be told: owed to it",
		           (unsigned long long)fileid, addr);
	return rc;
}

/* Debt x against the member list (lock held, x not out for delivery): its id found by its
 * address if it has none, its address brought up to date. 0 if the member left the pool. */
static int still_member(struct debt *x, const struct wire_member *m, int n)
{
	for (int i = 0; i < n; i++)
		if (*x->id ? strcmp(m[i].id, x->id) == 0 : strcmp(m[i].addr, x->addr) == 0) {
			strcpy(x->id, m[i].id);
			strcpy(x->addr, m[i].addr);
			return 1;
		}
	return !m; /* (no list: nobody is taken for gone) */
}

#define TOLD_LOGGED 8 /* names told logged one by one per delivery; then a count */

void brelink_deliver(struct chfsd *d, const char *id, const char *addr)
{
	/* Debts out for delivery stay in the list, so a rewrite of the file by a concurrent
	 * delivery keeps them (a crash then loses nothing); another delivery skips them. The
	 * flags, ids and addresses change under the lock only, and those of a debt out for
	 * delivery not at all; this delivery's outcomes are its own array. */
	size_t n = 0, i, told = 0;
	int nm, changed = 0;
	pthread_mutex_lock(&ow.lock);
	int none = ow.head == NULL;
	pthread_mutex_unlock(&ow.lock);
	if (none)
		return;
	struct wire_member *m = members(d, &nm);
	pthread_mutex_lock(&ow.lock);
	for (struct debt **pp = &ow.head, *x; (x = *pp);) {
		char was[WIRE_ADDR_MAX];
		int had_id = *x->id != '\0';
		strcpy(was, x->addr);
		if (x->sending || still_member(x, m, nm)) {
			if (!x->sending && id && *id && strcmp(x->id, id) == 0)
				strcpy(x->addr, addr); /* the asking member's own word (our list may lag) */
			changed |= strcmp(was, x->addr) != 0 || had_id != (*x->id != '\0');
			n += !x->sending && (!addr || owed_to(x, id, addr));
			pp = &x->next;
			continue;
		}
		log_notice(
		        "backend name of file %016llx owed to server %s (%s), which left the pool: dropped "
		        "(its keys are with their new owners)",
		        (unsigned long long)x->fileid, *x->id ? x->id : "id unknown", x->addr);
		*pp = x->next;
		free(x);
		changed = 1;
	}
	free(m);
	struct debt **v = n ? malloc(n * sizeof *v) : NULL;
	int *rcs = n ? malloc(n * sizeof *rcs) : NULL;
	n = v && rcs ? n : 0;
	i = 0;
	for (struct debt *x = ow.head; x && i < n; x = x->next)
		if (!x->sending && (!addr || owed_to(x, id, addr))) {
			x->sending = 1;
			v[i++] = x;
		}
	if (changed && !n)
		rewrite();
	pthread_mutex_unlock(&ow.lock);
	char *path = n ? malloc(CHFS_PATH_MAX) : NULL;
	uint8_t *msg = n ? malloc(WIRE_HDR_LEN + 16 + CHFS_PATH_MAX) : NULL, rep[WIRE_HDR_LEN + 16];
	for (i = 0; i < n; i++) { /* (a debt out for delivery does not change: read unlocked) */
		int rc = path && msg ? brelink_name(d, v[i]->fileid, path, CHFS_PATH_MAX) : -ENOMEM;
		for (size_t j = 0; j < i && rc == 0; j++)
			if (rcs[j] && rcs[j] != -ENOENT && strcmp(v[j]->addr, v[i]->addr) == 0)
				rc = -EHOSTDOWN; /* not reached in this pass: one timeout per member */
		if (rc == 0) {
			struct wenc e;
			wenc_init(&e, msg, WIRE_HDR_LEN + 16 + CHFS_PATH_MAX);
			chfsd_req_hdr(d, &e, WOP_RELINK);
			wenc_u64(&e, v[i]->fileid);
			wenc_str(&e, path);
			rc = chfsd_call(d, v[i]->addr, &e, rep, sizeof rep, NULL, d->timeout_ms);
			if (rc == 0 && ++told <= TOLD_LOGGED) /* (a joiner is owed the whole table) */
				log_notice("backend name %s%s of file %016llx: told %s, which missed it",
				           path, *path ? "" : "(none: the file lost its last name)",
				           (unsigned long long)v[i]->fileid, v[i]->addr);
		}
		rcs[i] = rc; /* 0 told, -ENOENT the file is gone (nothing to tell): settled */
	}
	if (told > TOLD_LOGGED)
		log_notice("backend names: %zu more told to servers that missed them", told - TOLD_LOGGED);
	free(path);
	free(msg);
	pthread_mutex_lock(&ow.lock);
	for (i = 0; i < n; i++) {
		struct debt *x = v[i];
		int keep = (rcs[i] && rcs[i] != -ENOENT) || x->again; /* failed, or owed anew */
		x->sending = x->again = 0;
		for (struct debt **pp = &ow.head; !keep && *pp; pp = &(*pp)->next)
			if (*pp == x) {
				*pp = x->next;
				free(x);
				break;
			}
	}
	if (n || changed)
		rewrite();
	pthread_mutex_unlock(&ow.lock);
	free(v);
	free(rcs);
}

#define PULL_TRIES 3
#define PULL_RETRY_MS 200

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void brelink_pull(struct chfsd *d)
{
	if (!d->bk)
		return;
	uint8_t msg[WIRE_HDR_LEN + WIRE_ADDR_MAX + WIRE_ID_LEN + 16], rep[WIRE_HDR_LEN + 16];
	struct wenc e;
	int n;
	struct wire_member *m = members(d, &n);
	wenc_init(&e, msg, sizeof msg);
	chfsd_req_hdr(d, &e, WOP_RELINK_OWED);
	wenc_str(&e, d->self);
	wenc_str(&e, d->id); /* (what is owed is owed to the id: this address may be new) */
	if (!m)
		log_err("backend names: no member list; the other servers are not asked");
	for (int i = 0; i < n; i++) {
		if (strcmp(m[i].id, d->id) == 0 || members_is_down(&d->mem, m[i].id))
			continue; /* (one found down asks us when it starts again) */
		/* A call failing at once may have gone over a connection made before this server was
		 * stopped, to a member that restarted meanwhile (the debtor, typically): asked again,
		 * on a new one. One that times out is not (it holds the flushes back). */
		int rc = -EAGAIN;
		for (int t = 0; t < PULL_TRIES && rc; t++) {
			double t0 = mono_s();
			rc = chfsd_call(d, m[i].addr, &e, rep, sizeof rep, NULL, d->timeout_ms);
			if (rc == 0 || mono_s() - t0 > 1.0)
				break;
			struct timespec ts = {0, PULL_RETRY_MS * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (rc)
			log_warn("backend names: %s not asked for renames this server missed (%s)", m[i].addr,
			         strerror(-rc));
	}
	free(m);
}
