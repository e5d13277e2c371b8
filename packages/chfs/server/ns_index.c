/*
 * ns_index.c — hash table of namespace nodes plus one treap of children per directory (see
 * ns_index.h).
 *
 * The hash table chains nodes by the hash of their canonical path and doubles its bucket
 * array when it holds more nodes than buckets, so a lookup costs one hash and a short chain.
 * A directory's children form a treap ordered by name whose priorities are the nodes' path
 * hashes: an expected O(log n) search, insertion and deletion without rebalancing state, and
 * "the first name after the cursor" is one descent, which is what a readdir page needs. Each
 * node is allocated once with its path (the name points into it) and its record bytes are a
 * separate allocation replaced on every change.
 */
#define _GNU_SOURCE
#include "ns_index.h"

#include "placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ns_ent {
	struct ns_ent *hnext;                 /* hash chain */
	struct ns_ent *parent, *left, *right; /* left/right: the parent directory's treap */
	struct ns_ent *kids;                  /* treap root of the children */
	uint64_t hash;
	size_t nkids;
	uint8_t *rec; /* NULL: implicit directory */
	size_t rlen;
	uint32_t mode;
	const char *name;
	char path[]; /* NUL-terminated */
};

struct ns_index {
	struct ns_ent **buckets;
	size_t nbuckets, nnodes, nrec;
	struct ns_ent *root;
};

static struct ns_ent *ent_new(const char *path, size_t plen)
{
	struct ns_ent *e = calloc(1, sizeof *e + plen + 1);
	if (!e)
		return NULL;
	memcpy(e->path, path, plen);
	e->path[plen] = '\0';
	const char *slash = strrchr(e->path, '/');
	e->name = slash ? slash + 1 : e->path;
	e->hash = chfs_hash_str(e->path);
	e->mode = S_IFDIR;
	return e;
}

struct ns_index *nsi_new(void)
{
	struct ns_index *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->nbuckets = 1024;
	x->buckets = calloc(x->nbuckets, sizeof *x->buckets);
	x->root = ent_new("", 0);
	if (!x->buckets || !x->root) {
		free(x->buckets);
		free(x->root);
		free(x);
		return NULL;
	}
	return x;
}

void nsi_free(struct ns_index *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->nbuckets; i++)
		for (struct ns_ent *e = x->buckets[i], *n; e; e = n) {
			n = e->hnext;
			free(e->rec);
			free(e);
		}
	free(x->buckets);
	free(x->root);
	free(x);
}

size_t nsi_count(const struct ns_index *x) { return x->nrec; }
const char *nsi_path(const struct ns_ent *e) { return e->path; }
const char *nsi_name(const struct ns_ent *e) { return e->name; }
uint32_t nsi_mode(const struct ns_ent *e) { return e->mode; }
size_t nsi_nkids(const struct ns_ent *e) { return e->nkids; }

const uint8_t *nsi_rec(const struct ns_ent *e, size_t *len)
{
	*len = e->rlen;
	return e->rec;
}

/* ---- hash table ---- */

static struct ns_ent *find_n(const struct ns_index *x, const char *path, size_t plen, uint64_t h)
{
	if (plen == 0)
		return x->root;
	for (struct ns_ent *e = x->buckets[h & (x->nbuckets - 1)]; e; e = e->hnext)
		if (e->hash == h && strncmp(e->path, path, plen) == 0 && e->path[plen] == '\0')
			return e;
	return NULL;
}

struct ns_ent *nsi_find(const struct ns_index *x, const char *path)
{
	return find_n(x, path, strlen(path), chfs_hash_str(path));
}

static void grow(struct ns_index *x)
{
	size_t nb = x->nbuckets * 2;
	struct ns_ent **b = calloc(nb, sizeof *b);
	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < x->nbuckets; i++)
		for (struct ns_ent *e = x->buckets[i], *n; e; e = n) {
			n = e->hnext;
			e->hnext = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	free(x->buckets);
	x->buckets = b;
	x->nbuckets = nb;
}

static void hash_del(struct ns_index *x, struct ns_ent *e)
{
	struct ns_ent **pp = &x->buckets[e->hash & (x->nbuckets - 1)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	x->nnodes--;
}

/* ---- treap of a directory's children ---- */

static struct ns_ent *treap_insert(struct ns_ent *t, struct ns_ent *n)
{
	if (!t)
		return n;
	if (strcmp(n->name, t->name) < 0) {
		t->left = treap_insert(t->left, n);
		if (t->left->hash > t->hash) { /* rotate right */
			struct ns_ent *l = t->left;
			t->left = l->right;
			l->right = t;
			return l;
		}
	} else {
		t->right = treap_insert(t->right, n);
		if (t->right->hash > t->hash) { /* rotate left */
			struct ns_ent *r = t->right;
			t->right = r->left;
			r->left = t;
			return r;
		}
	}
	return t;
}

static struct ns_ent *treap_merge(struct ns_ent *a, struct ns_ent *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->hash > b->hash) {
		a->right = treap_merge(a->right, b);
		return a;
	}
	b->left = treap_merge(a, b->left);
	return b;
}

static struct ns_ent *treap_remove(struct ns_ent *t, struct ns_ent *n)
{
	if (t == n)
		return treap_merge(n->left, n->right);
	if (strcmp(n->name, t->name) < 0)
		t->left = treap_remove(t->left, n);
	else
		t->right = treap_remove(t->right, n);
	return t;
}

struct ns_ent *nsi_next_child(const struct ns_ent *dir, const char *after)
{
	struct ns_ent *best = NULL;
	for (struct ns_ent *t = dir->kids; t;) {
		if (strcmp(t->name, after) > 0) {
			best = t;
			t = t->left;
		} else {
			t = t->right;
		}
	}
	return best;
}

/* ---- changes ---- */

int nsi_check_parents(const struct ns_index *x, const char *path)
{
	for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		size_t n = (size_t)(s - path);
		struct ns_ent *p = find_n(x, path, n, chfs_hash(path, n));
		if (!p)
			return 0;
		if (!S_ISDIR(p->mode))
			return -ENOTDIR;
	}
	return 0;
}

/* The node at path[0..plen), made (with its parents) as an implicit directory if absent. */
static struct ns_ent *node_get(struct ns_index *x, const char *path, size_t plen)
{
	uint64_t h = plen ? chfs_hash(path, plen) : 0;
	struct ns_ent *e = find_n(x, path, plen, h);
	if (e)
		return e;
	const char *slash = memrchr(path, '/', plen);
	struct ns_ent *parent = node_get(x, path, slash ? (size_t)(slash - path) : 0);
	if (!parent || !(e = ent_new(path, plen)))
		return NULL;
	e->parent = parent;
	parent->kids = treap_insert(parent->kids, e);
	parent->nkids++;
	e->hnext = x->buckets[h & (x->nbuckets - 1)];
	x->buckets[h & (x->nbuckets - 1)] = e;
	if (++x->nnodes > x->nbuckets)
		grow(x);
	return e;
}

int nsi_set(struct ns_index *x, const char *path, const uint8_t *rec, size_t len, uint32_t mode)
{
	if (!*path)
		return -EINVAL;
	uint8_t *copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	struct ns_ent *e = node_get(x, path, strlen(path));
	if (!e) {
		free(copy);
		return -ENOMEM;
	}
	memcpy(copy, rec, len);
	if (!e->rec)
		x->nrec++;
	free(e->rec);
	e->rec = copy;
	e->rlen = len;
	e->mode = mode;
	return 0;
}

void nsi_clear(struct ns_index *x, const char *path)
{
	struct ns_ent *e = nsi_find(x, path);
	if (!e || !e->rec)
		return;
	free(e->rec);
	e->rec = NULL;
	e->rlen = 0;
	e->mode = S_IFDIR;
	x->nrec--;
	/* Drop the node and every implicit parent nothing is below any more. */
	while (e != x->root && !e->rec && e->nkids == 0) {
		struct ns_ent *p = e->parent;
		p->kids = treap_remove(p->kids, e);
		p->nkids--;
		hash_del(x, e);
		free(e);
		e = p;
	}
}

/* ---- walk ---- */

static int walk_node(const struct ns_ent *e, nsi_visit_fn fn, void *arg);

static int walk_kids(const struct ns_ent *t, nsi_visit_fn fn, void *arg)
{
	int rc = 0;
	while (t && rc == 0) {
		if ((rc = walk_kids(t->left, fn, arg)) == 0)
			rc = walk_node(t, fn, arg);
		t = t->right; /* the right subtree iteratively: recursion only as deep as left turns */
	}
	return rc;
}

static int walk_node(const struct ns_ent *e, nsi_visit_fn fn, void *arg)
{
	int rc = fn(arg, e);
	return rc ? rc : walk_kids(e->kids, fn, arg);
}

int nsi_walk(const struct ns_index *x, nsi_visit_fn fn, void *arg)
{
	return walk_kids(x->root->kids, fn, arg);
}
