/*
 * stagein_batch.c — chfs_stagein_many: chfs_stagein for many files in a few requests.
 *
 * chfs_stagein costs three requests per file (STAGE_ENTRY at the path's owner, then one
 * STAGE_DATA at every server); for a tree of small files those round trips, not the copying,
 * were most of the time. Here the files go in groups of WIRE_STAGE_MAX: one STAGE_ENTRIES to
 * each server with the paths it owns (all servers at once; a server whose reply filled up
 * answers part of them and gets the rest again), then STAGE_FILES with every backend file of
 * the group to every server at once, each fetching the chunks it owns. Requests are cut to
 * BUDGET bytes, under the transport's inline message limit. A file's own failure (ENOENT,
 * EACCES on the backend, ...) is reported for it alone; a failure of a whole request (a server
 * unreachable) for every file it carried. When a server's member list is newer, the group is
 * placed again with it (entries made and chunks fetched by the first try are found held).
 */
#define _GNU_SOURCE
#include "client.h"

#include "placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BUDGET 60000 /* request body bytes, and ENTRIES reply bytes a server fills */

struct item {
	char cp[CHFS_PATH_MAX];
	struct chfs_md md;
	int rc;       /* 0 or -errno */
	int pending;  /* its entry is not made yet */
	unsigned own; /* the server owning its path */
};

struct group {
	struct srvlist *s;
	struct item *it;
	unsigned n;
	unsigned refused; /* a server that answered -ERESTART */
	uint8_t *msg, *rep;
	size_t cap, repcap;
	unsigned *sent; /* per server: the items of its request (n each) */
	unsigned *nsent;
};

/* The ENTRIES request of server k: its pending items, as many as fit. */
static size_t entries_msg(struct group *g, unsigned k, uint8_t *msg)
{
	struct wenc e;
	wenc_init(&e, msg, g->cap);
	wenc_reserve(&e, WIRE_HDR_LEN);
	wenc_u32(&e, chfs_client.cfg.chunk_size);
	uint8_t *count = wenc_reserve(&e, 4);
	unsigned m = 0, *sent = g->sent + (size_t)k * g->n;
	for (unsigned i = 0; i < g->n && m < WIRE_STAGE_MAX; i++) {
		struct item *it = &g->it[i];
		if (!it->pending || it->own != k)
			continue;
		if (e.len + 4 + strlen(it->cp) > WIRE_HDR_LEN + BUDGET)
			break;
		wenc_str(&e, it->cp);
		sent[m++] = i;
	}
	g->nsent[k] = m;
	if (!count || e.err || !m)
		return 0;
	for (int b = 0; b < 4; b++)
		count[b] = (uint8_t)(m >> (8 * b));
	return e.len;
}

/* Every item of server k's request failed with rc. */
static void fail_sent(struct group *g, unsigned k, int rc)
{
	for (unsigned j = 0; j < g->nsent[k]; j++) {
		struct item *it = &g->it[g->sent[(size_t)k * g->n + j]];
		it->rc = rc;
		it->pending = 0;
	}
}

static int entries_reply(struct group *g, unsigned k, struct wdec *d)
{
	uint32_t done = wdec_u32(d);
	if (d->err || done > g->nsent[k] || (done == 0 && g->nsent[k]))
		return -EIO; /* (no progress would loop for ever) */
	for (uint32_t j = 0; j < done; j++) {
		struct item *it = &g->it[g->sent[(size_t)k * g->n + j]];
		int32_t r = (int32_t)wdec_u32(d);
		if (r == 0)
			wdec_md(d, &it->md);
		it->rc = r > 0 || r < -4095 ? -EIO : r;
		it->pending = 0;
	}
	return d->err ? -EIO : 0;
}

/* One round: an ENTRIES request to every server with pending items, all at once. */
static int entries_round(struct group *g, int *more)
{
	unsigned ns = g->s->n;
	xprt_call_t **calls = calloc(ns, sizeof *calls);
	int *rcs = calloc(ns, sizeof *rcs), restart = 0;
	size_t *rl = calloc(ns, sizeof *rl);
	if (!calls || !rcs || !rl) {
		free(calls), free(rcs), free(rl);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < ns; k++) {
		uint8_t *msg = g->msg + (size_t)k * g->cap;
		size_t len = entries_msg(g, k, msg);
		if (!len)
			continue;
		rpc_fill_hdr(msg, len, WOP_STAGE_ENTRIES, g->s->epoch);
		rcs[k] = client_server_down(g->s, k) ? -EHOSTDOWN
		                                     : xprt_call_start(chfs_client.x, g->s->peers[k], msg,
		                                                       len, g->rep + (size_t)k * g->repcap,
		                                                       g->repcap, rpc_timeout(), &calls[k]);
		if (rcs[k])
			calls[k] = NULL;
	}
	for (unsigned k = 0; k < ns; k++) {
		if (!g->nsent[k])
			continue;
		if (calls[k])
			rcs[k] = xprt_call_wait(calls[k], &rl[k]);
		struct wdec d;
		int rc =
		        rpc_status(g->s, k, rcs[k], g->rep + (size_t)k * g->repcap, calls[k] ? rl[k] : 0, &d);
		if (rc == 0)
			rc = entries_reply(g, k, &d);
		if (rc == -ERESTART) {
			restart = 1;
			g->refused = k;
		} else if (rc) {
			fail_sent(g, k, rc);
		}
	}
	*more = 0;
	for (unsigned i = 0; i < g->n; i++)
		*more |= g->it[i].pending;
	free(calls), free(rcs), free(rl);
	return restart ? -ERESTART : 0;
}

static int stage_entries(struct group *g)
{
	for (unsigned i = 0; i < g->n; i++) {
		struct item *it = &g->it[i];
		it->pending = it->rc == 0 && it->cp[0];
		it->own = it->pending ? placement_owner(g->s->ring, it->cp) : 0;
	}
	int more = 1, rc = 0;
	while (rc == 0 && more)
		rc = entries_round(g, &more);
	return rc;
}

static int is_staged(const struct item *it)
{
	return it->rc == 0 && it->cp[0] && S_ISREG(it->md.mode) && (it->md.flags & MD_BACKEND);
}

/* One STAGE_FILES to every server with the files from *next on that fit. */
static int files_once(struct group *g, unsigned *next)
{
	unsigned ns = g->s->n, m = 0, *items = g->sent;
	struct wenc e;
	wenc_init(&e, g->msg, g->cap);
	wenc_reserve(&e, WIRE_HDR_LEN);
	wenc_u32(&e, stagein_piece());
	uint8_t *count = wenc_reserve(&e, 4);
	for (; *next < g->n && m < WIRE_STAGE_MAX; (*next)++) {
		if (!is_staged(&g->it[*next]))
			continue;
		size_t before = e.len;
		wire_stage_file_put(&e, &g->it[*next].md);
		if (e.err || e.len > WIRE_HDR_LEN + BUDGET) {
			e.len = before; /* the next request takes it */
			e.err = 0;
			break;
		}
		items[m++] = *next;
	}
	if (!count)
		return -ENOMEM;
	if (!m)
		return 0;
	for (int b = 0; b < 4; b++)
		count[b] = (uint8_t)(m >> (8 * b));
	size_t cap = WIRE_HDR_LEN + 16 + 4 * WIRE_STAGE_MAX;
	size_t *rl = malloc(ns * sizeof *rl);
	int *rcs = malloc(ns * sizeof *rcs), rc = rl && rcs ? 0 : -ENOMEM;
	unsigned *idx = malloc(ns * sizeof *idx);
	if (rc == 0 && idx) {
		for (unsigned k = 0; k < ns; k++)
			idx[k] = k;
		rpc_multi(g->s, idx, ns, g->msg, e.len, WOP_STAGE_FILES, g->rep, cap, rl, rcs);
		for (unsigned k = 0; k < ns && rc == 0; k++)
			if (rcs[k] == -ERESTART) {
				g->refused = k;
				rc = -ERESTART;
			}
	} else {
		rc = -ENOMEM;
	}
	for (unsigned k = 0; k < ns && rc == 0; k++) {
		struct wdec d;
		int krc = rcs[k];
		if (krc == 0) {
			wdec_init(&d, g->rep + k * cap + WIRE_HDR_LEN, rl[k] - WIRE_HDR_LEN);
			wdec_u64(&d); /* bytes fetched */
			if (wdec_u32(&d) != m || d.err)
				krc = -EIO;
		}
		for (unsigned j = 0; j < m; j++) {
			struct item *it = &g->it[items[j]];
			int32_t r = krc ? krc : (int32_t)wdec_u32(&d);
			if (r > 0 || r < -4095 || (krc == 0 && d.err))
				r = -EIO;
			if (r && !it->rc)
				it->rc = r;
		}
	}
	free(rl);
	free(rcs);
	free(idx);
	return rc;
}

static int group_buffers(struct group *g)
{
	free(g->msg), free(g->rep), free(g->sent), free(g->nsent);
	unsigned ns = g->s->n;
	g->cap = WIRE_HDR_LEN + BUDGET;
	g->repcap = xprt_max_msg(chfs_client.x);
	g->msg = malloc(ns * g->cap);
	g->rep = malloc(ns * (g->repcap > g->cap ? g->repcap : g->cap));
	g->sent = malloc((size_t)ns * g->n * sizeof *g->sent);
	g->nsent = malloc(ns * sizeof *g->nsent);
	return g->msg && g->rep && g->sent && g->nsent ? 0 : -ENOMEM;
}

static int stage_group(struct group *g)
{
	int rc = client_begin(&g->s);
	for (int attempt = 0; rc == 0 && attempt < CLIENT_RETRIES; attempt++) {
		for (unsigned i = 0; i < g->n; i++)
			if (g->it[i].rc != -ENAMETOOLONG && g->it[i].rc != -EINVAL && g->it[i].rc != -EFAULT)
				g->it[i].rc = 0; /* (placed again: only a path's own syntax stays wrong) */
		if ((rc = group_buffers(g)) != 0)
			break;
		rc = stage_entries(g);
		for (unsigned next = 0; rc == 0 && next < g->n;)
			rc = files_once(g, &next);
		if (rc != -ERESTART)
			break;
		g->s = client_list_retry(g->s, g->refused, attempt); /* the ring changed: place again */
		rc = attempt == CLIENT_RETRIES - 1 ? -ERESTART : 0;
	}
	free(g->msg), free(g->rep), free(g->sent), free(g->nsent);
	return rpc_restart_failed(rc);
}

int chfs_stagein_many(const char *const *paths, int n, int *errors)
{
	if (n < 0 || (n && !paths))
		return set_err(-EINVAL);
	int first = 0;
	struct group g = {0};
	g.it = malloc(WIRE_STAGE_MAX * sizeof *g.it);
	if (!g.it)
		return set_err(-ENOMEM);
	for (int base = 0; base < n; base += WIRE_STAGE_MAX) {
		g.n = (unsigned)(n - base < WIRE_STAGE_MAX ? n - base : WIRE_STAGE_MAX);
		for (unsigned i = 0; i < g.n; i++) {
			const char *p = paths[base + (int)i];
			g.it[i].rc = !p ? -EFAULT : path_canonical(p, g.it[i].cp);
		}
		int rc = stage_group(&g);
		for (unsigned i = 0; i < g.n; i++) {
			int r = g.it[i].rc ? g.it[i].rc : rc;
			if (errors)
				errors[base + (int)i] = -r;
			if (r && !first)
				first = r;
		}
	}
	free(g.it);
	return first ? set_err(first) : 0;
}
