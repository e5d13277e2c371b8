/*
 * heartbeat.c — the failure detector: every HB_INTERVAL_MS this server asks each other member
 * for its list (NODE_LIST, bounded by HB_TIMEOUT_MS); a member that missed HB_MISSES rounds in a
 * row is down, the first answer makes it up again. The ids of down members go out with every
 * member list this server hands out (wire_list_put), so clients fail requests for those servers
 * at once with EIO instead of waiting for their RPC timeout, listings skip them and say so, and
 * `chlist`/`chfsctl status` show them. Being down is not a membership change: the ring, and so
 * the placement of every key, stays as it is (no epoch bump), and a server that comes back
 * serves its data again.
 *
 * Detection takes at most HB_MISSES × (HB_INTERVAL_MS + HB_TIMEOUT_MS) ≈ 2.4 s for a hung
 * member, less for a killed one (connections are refused at once). Each server judges on its
 * own; members' views may differ for a round. A member that joins again through this server (a
 * restart) is up here at once: members_add takes it out of the down set, and the verdict of the
 * round in progress, which may have asked it before it was back, leaves it out; this server's
 * broadcaster tells every other member (WOP_REJOINED), which do the same. A member found up
 * again is sent the backend names this server owes it (relink_owed.c: it was stopped or cut
 * off when a rename reached the backend). Each round also collects the orphans whose
 * holder stopped renewing (orphans.c).
 */
#define _GNU_SOURCE
#include "chfsd.h"
#include "fence.h"
#include "open_leases.h"
#include "orphans.h"
#include "relink.h"

#include "log.h"
#include "nodelist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HB_INTERVAL_MS 500
#define HB_TIMEOUT_MS 700
#define HB_MISSES 2

struct hb_entry {
	char id[WIRE_ID_LEN + 1];
	unsigned misses;
};

/* Misses recorded for id in the previous round's table (0 if it was not there). */
static unsigned prev_misses(const struct hb_entry *t, unsigned n, const char *id)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(t[i].id, id) == 0)
			return t[i].misses;
	return 0;
}

static void *heartbeat(void *arg)
{
	struct chfsd *d = arg;
	char *list = malloc(WIRE_LIST_MAX), *down = malloc(WIRE_LIST_MAX), *rejoined = malloc(WIRE_LIST_MAX);
	struct hb_entry *tab = NULL;
	unsigned ntab = 0;
	if (!list || !down || !rejoined) {
		free(list);
		free(down);
		free(rejoined);
		return NULL;
	}
	while (!atomic_load(&d->stopping)) {
		struct timespec ts = {0, HB_INTERVAL_MS * 1000000L};
		nanosleep(&ts, NULL);
		if (atomic_load(&d->stopping))
			break;
		oleases_collect(); /* (a dead client's files become due orphans first) */
		orphans_collect(d);
		fence_sweep();
		unsigned vnodes;
		members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
		int n = wire_list_parse(list, strlen(list), NULL, WIRE_LIST_MAX);
		struct wire_member *m = n > 0 ? calloc((size_t)n, sizeof *m) : NULL;
		struct hb_entry *nt = n > 0 ? calloc((size_t)n, sizeof *nt) : NULL;
		if (!m || !nt || wire_list_parse(list, strlen(list), m, (unsigned)n) != n) {
			free(m);
			free(nt);
			continue;
		}
		size_t o = 0;
		down[0] = '\0';
		for (int i = 0; i < n; i++) {
			snprintf(nt[i].id, sizeof nt[i].id, "%s", m[i].id);
			if (strcmp(m[i].id, d->id) == 0)
				continue;
			struct nodelist l;
			int rc = nodelist_fetch(d->x, m[i].addr, d->secret, HB_TIMEOUT_MS, NULL, NULL, &l);
			if (rc == 0)
				nodelist_free(&l);
			unsigned before = prev_misses(tab, ntab, m[i].id);
			/* Any answer, even a refusal, means the process is alive. */
			nt[i].misses = nodelist_no_answer(rc) ? before + 1 : 0;
			if (nt[i].misses == HB_MISSES)
				log_warn("server %s (%s) is down: no answer to %d heartbeats", m[i].addr,
				         m[i].id, HB_MISSES);
			else if (nt[i].misses == 0 && before >= HB_MISSES) {
				log_notice("server %s (%s) is up again", m[i].addr, m[i].id);
				orphans_member_up(); /* the removals it missed */
				if (d->bk)           /* the backend names it missed (relink_owed.c) */
					brelink_deliver(d, m[i].id, m[i].addr);
			}
			if (nt[i].misses >= HB_MISSES)
				o += (size_t)snprintf(down + o, WIRE_LIST_MAX - o, "%s%s", o ? "," : "",
				                      m[i].id);
		}
		members_set_down(&d->mem, down, rejoined);
		for (int i = 0; i < n; i++) /* back: its misses count from 0 again */
			if (wire_id_in(nt[i].id, rejoined, strlen(rejoined)))
				nt[i].misses = 0;
		free(tab);
		free(m);
		tab = nt;
		ntab = (unsigned)n;
	}
	free(tab);
	free(list);
	free(down);
	free(rejoined);
	return NULL;
}

static pthread_t hb_thread;
static int hb_running;

int heartbeat_start(struct chfsd *d)
{
	int rc = pthread_create(&hb_thread, NULL, heartbeat, d);
	if (rc)
		return -rc;
	hb_running = 1;
	return 0;
}

/* d->stopping is set: the thread ends within one round (its calls are bounded). */
void heartbeat_stop(struct chfsd *d)
{
	(void)d;
	if (hb_running)
		pthread_join(hb_thread, NULL);
	hb_running = 0;
}
