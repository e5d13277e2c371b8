/*
 * find.c — chfind evaluated on the server (WOP_FIND).
 *
 * Every server answers for the entries it owns: a directory's record lives on the server its
 * path hashes to while the entries below it hash anywhere, so a server holds scattered pieces
 * of the tree (with implicit directories, which have no record, to hold them). Rather than
 * descending directory by directory — one readdir RPC per directory per server, as a client
 * walk does — a find walks this server's whole namespace store once (st_ns_walk), keeps the
 * entries below the start path that match the predicate (findpred.h), and sends them back in
 * path order, so one RPC per server answers a query whose result fits in a reply, and a few
 * more per server page through a larger one. The start path itself is the client's business
 * (it is owned by one server and was already stat'ed).
 *
 * Pages: the walk's order is the store's, not sorted, so the matches are collected, sorted by
 * relative path and kept in a session (find_session.h) that later pages read from. Memory is
 * bounded: at most FIND_KEEP matches are kept — when the collection reaches twice that, it is
 * sorted and the larger half dropped, and later candidates above the largest kept path are
 * skipped — and a set that was cut short is walked again after its last path once it is used
 * up. So a page costs either one walk or nothing, and the cursor (the last relative path the
 * client got) is always enough to go on correctly.
 */
#define _GNU_SOURCE
#include "find.h"
#include "find_session.h"

#include "findpred.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef FIND_KEEP /* (the unit test makes it small) */
#define FIND_KEEP \
	(64u      \
	 << 10) /* matches kept per walk (x2 while collecting): with 32 sessions, a few hundred MB at most */
#endif

struct collect {
	const char *start, *cursor;
	size_t startlen;
	const struct findpred *pred;
	struct find_session *s;
	const char *above; /* skip candidates > above (set once the collection was cut) */
	uint64_t visited;
	int err;
};

static int match_cmp(const void *a, const void *b)
{
	return strcmp(((const struct find_match *)a)->rel, ((const struct find_match *)b)->rel);
}

/* Keep the FIND_KEEP smallest matches. */
static void cut(struct collect *c)
{
	struct find_session *s = c->s;
	qsort(s->m, s->n, sizeof *s->m, match_cmp);
	for (size_t i = FIND_KEEP; i < s->n; i++)
		free(s->m[i].rel);
	s->n = FIND_KEEP;
	c->above = s->m[FIND_KEEP - 1].rel;
	s->complete = 0;
}

static int visit(void *arg, const char *path, const struct chfs_md *md)
{
	struct collect *c = arg;
	const char *rel = path;
	if (path[0] == '\x01')
		return 0; /* an inode record (wire_inode_key): no name of the namespace */
	if (c->startlen) {
		if (strncmp(path, c->start, c->startlen) != 0 || path[c->startlen] != '/')
			return 0;
		rel = path + c->startlen + 1;
	}
	c->visited++;
	if (strcmp(rel, c->cursor) <= 0 || (c->above && strcmp(rel, c->above) > 0))
		return 0;
	const char *slash = strrchr(rel, '/');
	if (!findpred_match(c->pred, slash ? slash + 1 : rel, md->mode, md->size, md->mtime_ns))
		return 0;
	struct find_session *s = c->s;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct find_match *m = realloc(s->m, cap * sizeof *m);
		if (!m)
			return c->err = -ENOMEM;
		s->m = m;
		s->cap = cap;
	}
	struct find_match *m = &s->m[s->n];
	if (!(m->rel = strdup(rel)))
		return c->err = -ENOMEM;
	m->mode = md->mode;
	m->size = md->size;
	m->mtime_ns = md->mtime_ns;
	if (++s->n == 2 * FIND_KEEP)
		cut(c);
	return 0;
}

/* Fill s with the matches after cursor (sorted); *visited = entries below the start. */
static int walk(struct storage *st, struct find_session *s, const struct findpred *pred, const char *cursor,
                uint64_t *visited)
{
	struct collect c = {
	        .start = s->start, .startlen = strlen(s->start), .cursor = cursor, .pred = pred, .s = s};
	for (size_t i = 0; i < s->n; i++)
		free(s->m[i].rel);
	s->n = 0;
	s->complete = 1;
	int rc = st_ns_walk(st, visit, &c);
	if (rc == 0)
		rc = c.err;
	if (rc == 0 && s->n) /* (s->m is NULL when nothing matched: qsort(NULL, 0) is undefined) */
		qsort(s->m, s->n, sizeof *s->m, match_cmp);
	*visited = c.visited;
	return rc;
}

/* Index of the first match after cursor. */
static size_t after(const struct find_session *s, const char *cursor)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(s->m[mid].rel, cursor) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int find_handle(struct storage *st, const struct wire_req *q, struct wenc *e)
{
	struct findpred *pred = malloc(sizeof *pred);
	if (!pred)
		return -ENOMEM;
	int rc = findpred_decode(q->data, q->data_len, pred);
	struct find_session *s = NULL;
	uint64_t visited = 0;
	if (rc == 0) {
		s = find_session_take(q->fileid, q->path, q->data, q->data_len);
		int fresh = !s;
		if (fresh && !(s = find_session_new(q->path, q->data, q->data_len)))
			rc = -ENOMEM;
		else if (fresh || (after(s, q->path2) == s->n && !s->complete))
			rc = walk(st, s, pred, q->path2, &visited); /* new, or cut short and used up */
	}
	free(pred);
	if (rc) {
		find_session_free(s);
		return rc;
	}
	size_t budget = WIRE_HDR_LEN + WIRE_FIND_MAX < e->cap ? WIRE_HDR_LEN + WIRE_FIND_MAX : e->cap;
	wenc_u64(e, s->id);
	uint8_t *hdr = wenc_reserve(e, 8);
	/* The walk's count only on the first page: the client adds one figure per server. */
	wenc_u64(e, q->path2[0] ? 0 : visited);
	uint32_t n = 0;
	size_t i = after(s, q->path2);
	for (; i < s->n && e->len + strlen(s->m[i].rel) + 32 <= budget; i++, n++) {
		wenc_str(e, s->m[i].rel);
		wenc_u32(e, s->m[i].mode);
		wenc_u64(e, s->m[i].size);
		wenc_i64(e, s->m[i].mtime_ns);
	}
	uint32_t eof = i == s->n && s->complete;
	if (hdr)
		for (int b = 0; b < 4; b++) {
			hdr[b] = (uint8_t)(n >> (8 * b));
			hdr[4 + b] = (uint8_t)(eof >> (8 * b));
		}
	if (eof)
		find_session_free(s);
	else
		find_session_put(s);
	return 0;
}
