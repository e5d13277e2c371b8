/*
 * coop_cache.c - gfmd's cache management table of the cooperative cache
 * (chfs-stack patch against Gfarm 2.7.20).
 *
 * Key: inode number.  Value: the generation the entry describes and the
 * clients that may cache that generation, each named by its node cache
 * endpoint ("ip:port" of gfccd) with two counters: pages other clients
 * requested from it and pages it actually transferred.  The list is kept
 * sorted by (requested - transferred), smallest first, so a lookup hands
 * out the peer that has disappointed least.
 *
 *   REGISTER(ino, gen, ep)     a client opened the file for reading, or
 *                              closed it after writing generation gen
 *   LOOKUP(ino, gen, self)     -> best peer other than self, or ""
 *   REPORT(ino, gen, ep, r, t) requester asked ep for r pages, got t
 *   DUMP                       -> the table as text (gfccd-table)
 *
 * A request naming a newer generation than the entry's resets the entry
 * (the old generation's holders have stale data); one naming an older
 * generation is ignored.  inode_remove() calls coop_cache_forget(), so an
 * unlinked file leaves the table.  The table has its own mutex and never
 * takes giant_lock, so handlers may run from any protocol thread.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gfarm/gflog.h>
#include <gfarm/error.h>
#include <gfarm/gfarm_misc.h>
#include <gfarm/gfs.h>

#include "gfp_xdr.h"
#include "rpcsubr.h"
#include "coop_cache.h"

#define CC_NBUCKETS	4096
#define CC_MAX_CLIENTS	64
#define CC_EP_MAX	64
#define CC_DUMP_MAX	(64 * 1024)

struct cc_client {
	char ep[CC_EP_MAX];
	gfarm_uint64_t requested, transferred;
};

struct cc_entry {
	gfarm_ino_t ino;
	gfarm_uint64_t gen;
	int n;
	struct cc_client client[CC_MAX_CLIENTS];
	struct cc_entry *next;
};

static pthread_mutex_t cc_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct cc_entry *cc_bucket[CC_NBUCKETS];

static struct cc_entry **
cc_slot(gfarm_ino_t ino)
{
	struct cc_entry **pp = &cc_bucket[(ino * 0x9E3779B97F4A7C15ull) >> 52];

	while (*pp != NULL && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return (pp);
}

/* the entry describing (ino, gen), created or reset as needed; NULL if the
 * caller's generation is older than the table's */
static struct cc_entry *
cc_entry_for(gfarm_ino_t ino, gfarm_uint64_t gen, int create)
{
	struct cc_entry **pp = cc_slot(ino), *e = *pp;

	if (e == NULL) {
		if (!create || (e = calloc(1, sizeof(*e))) == NULL)
			return (NULL);
		e->ino = ino;
		e->gen = gen;
		*pp = e;
	} else if (gen > e->gen) {
		e->gen = gen;	/* new generation invalidates the holders */
		e->n = 0;
	} else if (gen < e->gen)
		return (NULL);
	return (e);
}

static int
cc_client_cmp(const void *a, const void *b)
{
	const struct cc_client *x = a, *y = b;
	gfarm_int64_t dx = (gfarm_int64_t)(x->requested - x->transferred);
	gfarm_int64_t dy = (gfarm_int64_t)(y->requested - y->transferred);

	return (dx < dy ? -1 : dx > dy);
}

static struct cc_client *
cc_find(struct cc_entry *e, const char *ep)
{
	int i;

	for (i = 0; i < e->n; i++)
		if (strcmp(e->client[i].ep, ep) == 0)
			return (&e->client[i]);
	return (NULL);
}

void
coop_cache_forget(gfarm_ino_t ino)
{
	struct cc_entry **pp, *e;

	pthread_mutex_lock(&cc_mutex);
	pp = cc_slot(ino);
	if ((e = *pp) != NULL) {
		*pp = e->next;
		free(e);
	}
	pthread_mutex_unlock(&cc_mutex);
}

gfarm_error_t
gfm_server_coop_cache_register(struct peer *peer, int from_client, int skip)
{
	gfarm_error_t e;
	gfarm_uint64_t ino, gen;
	char *ep;
	struct cc_entry *ent;
	static const char diag[] = "GFM_PROTO_COOP_CACHE_REGISTER";

	e = gfm_server_get_request(peer, diag, "lls", &ino, &gen, &ep);
	if (e != GFARM_ERR_NO_ERROR)
		return (e);
	if (skip) {
		free(ep);
		return (GFARM_ERR_NO_ERROR);
	}
	if (strlen(ep) == 0 || strlen(ep) >= CC_EP_MAX)
		e = GFARM_ERR_INVALID_ARGUMENT;
	else {
		pthread_mutex_lock(&cc_mutex);
		ent = cc_entry_for(ino, gen, 1);
		if (ent != NULL && cc_find(ent, ep) == NULL &&
		    ent->n < CC_MAX_CLIENTS) {
			/* a new holder has disappointed no one: sort first */
			memmove(&ent->client[1], &ent->client[0],
			    ent->n * sizeof(ent->client[0]));
			memset(&ent->client[0], 0, sizeof(ent->client[0]));
			strcpy(ent->client[0].ep, ep);
			ent->n++;
			qsort(ent->client, ent->n, sizeof(ent->client[0]),
			    cc_client_cmp);
		}
		pthread_mutex_unlock(&cc_mutex);
	}
	free(ep);
	return (gfm_server_put_reply(peer, diag, e, ""));
}

gfarm_error_t
gfm_server_coop_cache_lookup(struct peer *peer, int from_client, int skip)
{
	gfarm_error_t e;
	gfarm_uint64_t ino, gen;
	char *self, best[CC_EP_MAX] = "";
	struct cc_entry *ent;
	int i;
	static const char diag[] = "GFM_PROTO_COOP_CACHE_LOOKUP";

	e = gfm_server_get_request(peer, diag, "lls", &ino, &gen, &self);
	if (e != GFARM_ERR_NO_ERROR)
		return (e);
	if (skip) {
		free(self);
		return (GFARM_ERR_NO_ERROR);
	}
	pthread_mutex_lock(&cc_mutex);
	if ((ent = cc_entry_for(ino, gen, 0)) != NULL) {
		for (i = 0; i < ent->n; i++) {
			if (strcmp(ent->client[i].ep, self) != 0) {
				strcpy(best, ent->client[i].ep);
				break;
			}
		}
	}
	pthread_mutex_unlock(&cc_mutex);
	free(self);
	return (gfm_server_put_reply(peer, diag, e, "s", best));
}

gfarm_error_t
gfm_server_coop_cache_report(struct peer *peer, int from_client, int skip)
{
	gfarm_error_t e;
	gfarm_uint64_t ino, gen, requested, transferred;
	char *ep;
	struct cc_entry *ent;
	struct cc_client *c;
	static const char diag[] = "GFM_PROTO_COOP_CACHE_REPORT";

	e = gfm_server_get_request(peer, diag, "llsll", &ino, &gen, &ep,
	    &requested, &transferred);
	if (e != GFARM_ERR_NO_ERROR)
		return (e);
	if (skip) {
		free(ep);
		return (GFARM_ERR_NO_ERROR);
	}
	pthread_mutex_lock(&cc_mutex);
	if ((ent = cc_entry_for(ino, gen, 0)) != NULL &&
	    (c = cc_find(ent, ep)) != NULL) {
		c->requested += requested;
		c->transferred += transferred;
		qsort(ent->client, ent->n, sizeof(ent->client[0]),
		    cc_client_cmp);
	}
	pthread_mutex_unlock(&cc_mutex);
	free(ep);
	return (gfm_server_put_reply(peer, diag, e, ""));
}

gfarm_error_t
gfm_server_coop_cache_dump(struct peer *peer, int from_client, int skip)
{
	char *text;
	size_t len = 0;
	struct cc_entry *ent;
	int b, i;
	gfarm_error_t e;
	static const char diag[] = "GFM_PROTO_COOP_CACHE_DUMP";

	if (skip)
		return (GFARM_ERR_NO_ERROR);
	if ((text = malloc(CC_DUMP_MAX)) == NULL)
		return (gfm_server_put_reply(peer, diag,
		    GFARM_ERR_NO_MEMORY, ""));
	text[0] = '\0';
	pthread_mutex_lock(&cc_mutex);
	for (b = 0; b < CC_NBUCKETS; b++) {
		for (ent = cc_bucket[b]; ent != NULL; ent = ent->next) {
			for (i = 0; i < ent->n &&
			    len + 2 * CC_EP_MAX < CC_DUMP_MAX; i++)
				len += snprintf(text + len, CC_DUMP_MAX - len,
				    "%llu %llu %s %llu %llu\n",
				    (unsigned long long)ent->ino,
				    (unsigned long long)ent->gen,
				    ent->client[i].ep,
				    (unsigned long long)
				    ent->client[i].requested,
				    (unsigned long long)
				    ent->client[i].transferred);
		}
	}
	pthread_mutex_unlock(&cc_mutex);
	e = gfm_server_put_reply(peer, diag, GFARM_ERR_NO_ERROR, "s", text);
	free(text);
	return (e);
}
