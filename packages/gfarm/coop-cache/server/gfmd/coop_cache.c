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
 *   ADMIT(ino, gen)            -> holder token, only if gen is the file's
 *                              current generation and the caller's user
 *                              may read it
 *   REGISTER(ino, gen, ep, tk) a client opened the file for reading, or
 *                              closed it after writing generation gen;
 *                              refused unless tk is ADMIT's token
 *   LOOKUP(ino, gen, self)     -> best peer other than self, or ""
 *   REPORT(ino, gen, ep, r, t) requester asked ep for r pages, got t
 *   FAILED(ino, gen, ep, tk)   ep failed a requester (refused, timed out,
 *                              bad proof or MAC): drop it from the list
 *   DUMP                       -> the table as text (gfcctable): first one
 *                              "# holder EP REQUESTED TRANSFERRED" line per
 *                              endpoint ever reported on (totals since
 *                              this gfmd started, kept when files go: the
 *                              per-holder hit rate of an evaluation), then
 *                              one "INO GEN EP R T" line per (file, holder)
 *   HELLO                      -> protocol version (clients probe a gfmd
 *                              with it on a throw-away connection first)
 *
 * A holder token is HMAC-SHA256(key, ino, gen) under a random key drawn
 * when this gfmd starts, so gfmd keeps no per-client state for it, a token
 * is useless for any other file or generation, and a restarted gfmd
 * accepts no old token.  ADMIT takes giant_lock to look at the inode.
 *
 * A request naming a newer generation than the entry's resets the entry
 * (the old generation's holders have stale data); one naming an older
 * generation is ignored.  inode_remove() calls coop_cache_forget(), so an
 * unlinked file leaves the table.  The table has its own mutex, and only
 * ADMIT takes giant_lock, so handlers may run from any protocol thread.
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
#include "auth.h"
#include "rpcsubr.h"
#include "subr.h"
#include "peer.h"
#include "inode.h"
#include "coop_cache_auth.h"
#include "coop_gfmd_probe.h"
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

#define CC_MAX_HOLDERS	256	/* endpoints with running totals */
static struct cc_client cc_holder_total[CC_MAX_HOLDERS];
static int cc_nholders;

#define CC_TOKEN_LEN	(2 * COOP_MAC_LEN)	/* hex */
static unsigned char cc_key[COOP_MAC_LEN];
static int cc_key_ok;
static pthread_once_t cc_key_once = PTHREAD_ONCE_INIT;

static void
cc_key_init(void)
{
	cc_key_ok = coop_random(cc_key, sizeof(cc_key)) == 0;
}

/* the holder token of (ino, gen) as hex, into tk[CC_TOKEN_LEN + 1] */
static gfarm_error_t
cc_token(gfarm_uint64_t ino, gfarm_uint64_t gen, char *tk)
{
	unsigned char mac[COOP_MAC_LEN], be[16];
	const void *part[2] = { "GFCC-holder", be };
	size_t len[2] = { 11, sizeof(be) };
	int i;

	pthread_once(&cc_key_once, cc_key_init);
	for (i = 0; i < 8; i++) {
		be[i] = (unsigned char)(ino >> (56 - 8 * i));
		be[8 + i] = (unsigned char)(gen >> (56 - 8 * i));
	}
	if (!cc_key_ok || coop_mac(cc_key, sizeof(cc_key), 2, part, len,
	    mac) < 0)
		return (GFARM_ERR_INTERNAL_ERROR);
	for (i = 0; i < COOP_MAC_LEN; i++)
		sprintf(tk + 2 * i, "%02x", mac[i]);
	return (GFARM_ERR_NO_ERROR);
}

/* is tk the token gfmd issued for (ino, gen)? */
static int
cc_token_valid(gfarm_uint64_t ino, gfarm_uint64_t gen, const char *tk)
{
	char want[CC_TOKEN_LEN + 1];
	unsigned char diff = 0;
	int i;

	if (strlen(tk) != CC_TOKEN_LEN ||
	    cc_token(ino, gen, want) != GFARM_ERR_NO_ERROR)
		return (0);
	for (i = 0; i < CC_TOKEN_LEN; i++)
		diff |= want[i] ^ tk[i];
	return (diff == 0);
}

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
	char *ep, *tk;
	struct cc_entry *ent;
	static const char diag[] = "GFM_PROTO_COOP_CACHE_REGISTER";

	e = gfm_server_get_request(peer, diag, "llss", &ino, &gen, &ep, &tk);
	if (e != GFARM_ERR_NO_ERROR)
		return (e);
	if (skip) {
		free(ep);
		free(tk);
		return (GFARM_ERR_NO_ERROR);
	}
	if (strlen(ep) == 0 || strlen(ep) >= CC_EP_MAX)
		e = GFARM_ERR_INVALID_ARGUMENT;
	else if (!cc_token_valid(ino, gen, tk)) {
		gflog_notice(GFARM_MSG_UNFIXED, "%s: %s: no valid holder "
		    "token for inode %llu gen %llu: refused", diag, ep,
		    (unsigned long long)ino, (unsigned long long)gen);
		e = GFARM_ERR_PERMISSION_DENIED;
	} else {
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
	free(tk);
	return (gfm_server_put_reply(peer, diag, e, ""));
}

gfarm_error_t
gfm_server_coop_cache_hello(struct peer *peer, int from_client, int skip)
{
	static const char diag[] = "GFM_PROTO_COOP_CACHE_HELLO";

	if (skip)
		return (GFARM_ERR_NO_ERROR);
	return (gfm_server_put_reply(peer, diag, GFARM_ERR_NO_ERROR, "i",
	    (gfarm_int32_t)COOP_GFMD_PROTOCOL_VERSION));
}

gfarm_error_t
gfm_server_coop_cache_admit(struct peer *peer, int from_client, int skip)
{
	gfarm_error_t e;
	gfarm_uint64_t ino, gen;
	struct inode *inode;
	struct user *user;
	char tk[CC_TOKEN_LEN + 1] = "";
	static const char diag[] = "GFM_PROTO_COOP_CACHE_ADMIT";

	e = gfm_server_get_request(peer, diag, "ll", &ino, &gen);
	if (e != GFARM_ERR_NO_ERROR || skip)
		return (e);
	giant_lock();
	inode = inode_lookup(ino);
	user = peer_get_user(peer);
	if (!from_client || user == NULL)
		e = GFARM_ERR_OPERATION_NOT_PERMITTED;
	else if (inode == NULL || !inode_is_file(inode))
		e = GFARM_ERR_NO_SUCH_OBJECT;
	else if (inode_get_gen(inode) != gen)
		e = GFARM_ERR_STALE_FILE_HANDLE;
	else
		e = inode_access(inode, user, GFS_R_OK);
	giant_unlock();
	if (e == GFARM_ERR_NO_ERROR)
		e = cc_token(ino, gen, tk);
	return (gfm_server_put_reply(peer, diag, e, "s", tk));
}

gfarm_error_t
gfm_server_coop_cache_failed(struct peer *peer, int from_client, int skip)
{
	gfarm_error_t e;
	gfarm_uint64_t ino, gen;
	char *ep, *tk;
	struct cc_entry *ent;
	int i;
	static const char diag[] = "GFM_PROTO_COOP_CACHE_FAILED";

	e = gfm_server_get_request(peer, diag, "llss", &ino, &gen, &ep, &tk);
	if (e != GFARM_ERR_NO_ERROR)
		return (e);
	if (skip) {
		free(ep);
		free(tk);
		return (GFARM_ERR_NO_ERROR);
	}
	if (!cc_token_valid(ino, gen, tk))
		e = GFARM_ERR_PERMISSION_DENIED;
	else {
		pthread_mutex_lock(&cc_mutex);
		if ((ent = cc_entry_for(ino, gen, 0)) != NULL) {
			for (i = 0; i < ent->n; i++) {
				if (strcmp(ent->client[i].ep, ep) != 0)
					continue;
				memmove(&ent->client[i], &ent->client[i + 1],
				    (ent->n - i - 1) * sizeof(ent->client[0]));
				ent->n--;
				gflog_info(GFARM_MSG_UNFIXED, "%s: inode %llu "
				    "gen %llu: holder %s failed a reader, "
				    "dropped", diag, (unsigned long long)ino,
				    (unsigned long long)gen, ep);
				break;
			}
		}
		pthread_mutex_unlock(&cc_mutex);
	}
	free(ep);
	free(tk);
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

/* the running totals of ep; called with cc_mutex held */
static void
cc_holder_add(const char *ep, gfarm_uint64_t requested,
	gfarm_uint64_t transferred)
{
	struct cc_client *h = NULL;
	int i;

	for (i = 0; i < cc_nholders && h == NULL; i++)
		if (strcmp(cc_holder_total[i].ep, ep) == 0)
			h = &cc_holder_total[i];
	if (h == NULL) {
		if (cc_nholders == CC_MAX_HOLDERS)
			return;	/* the per-file counters still count */
		h = &cc_holder_total[cc_nholders++];
		snprintf(h->ep, sizeof(h->ep), "%s", ep);
	}
	h->requested += requested;
	h->transferred += transferred;
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
		cc_holder_add(c->ep, requested, transferred);
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
	for (i = 0; i < cc_nholders; i++)
		len += snprintf(text + len, CC_DUMP_MAX - len,
		    "# holder %s %llu %llu\n", cc_holder_total[i].ep,
		    (unsigned long long)cc_holder_total[i].requested,
		    (unsigned long long)cc_holder_total[i].transferred);
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
