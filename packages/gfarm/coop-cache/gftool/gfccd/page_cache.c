/*
 * page_cache.c - bounded LRU page store of one node (see page_cache.h).
 *
 * A chained hash table finds a page by (key, index); a circular
 * doubly-linked list orders pages by last use.  Invalidation and re-tagging
 * walk the LRU list: they happen once per written file, not per read, and
 * the list is at most a few hundred thousand pages long.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "coop_cache_wire.h"
#include "page_cache.h"

struct page {
	struct coop_key key;
	uint64_t idx;
	uint32_t valid;			/* bytes of data; < PAGE_SIZE: EOF */
	struct page *hnext;		/* hash chain */
	struct page *prev, *next;	/* LRU, head->next = most recent */
	char data[COOP_PAGE_SIZE];
};

struct page_cache {
	pthread_mutex_t mu;
	struct page **bucket;
	size_t nbuckets, npages, max_pages;
	struct page lru;		/* list head only */
};

static size_t
hash_key(const struct page_cache *pc, const struct coop_key *k, uint64_t idx)
{
	uint64_t h = k->ino * 0x9E3779B97F4A7C15ull ^
	    k->gen * 0xC2B2AE3D27D4EB4Full ^ idx * 0x165667B19E3779F9ull ^
	    (k->fs ^ k->inc) * 0x27D4EB2F165667C5ull;

	return ((size_t)(h ^ (h >> 29)) & (pc->nbuckets - 1));
}

struct page_cache *
page_cache_new(size_t max_bytes)
{
	struct page_cache *pc = calloc(1, sizeof(*pc));

	if (pc == NULL)
		return (NULL);
	pc->max_pages = max_bytes / COOP_PAGE_SIZE;
	if (pc->max_pages < 1)
		pc->max_pages = 1;
	for (pc->nbuckets = 1024; pc->nbuckets < pc->max_pages;)
		pc->nbuckets <<= 1;
	pc->bucket = calloc(pc->nbuckets, sizeof(*pc->bucket));
	if (pc->bucket == NULL) {
		free(pc);
		return (NULL);
	}
	pthread_mutex_init(&pc->mu, NULL);
	pc->lru.prev = pc->lru.next = &pc->lru;
	return (pc);
}

static void
lru_unlink(struct page *p)
{
	p->prev->next = p->next;
	p->next->prev = p->prev;
}

static void
lru_push_front(struct page_cache *pc, struct page *p)
{
	p->next = pc->lru.next;
	p->prev = &pc->lru;
	pc->lru.next->prev = p;
	pc->lru.next = p;
}

static int
key_eq(const struct coop_key *a, const struct coop_key *b)
{
	return (a->ino == b->ino && a->gen == b->gen && a->fs == b->fs &&
	    a->inc == b->inc);
}

static struct page **
find_slot(struct page_cache *pc, const struct coop_key *k, uint64_t idx)
{
	struct page **pp = &pc->bucket[hash_key(pc, k, idx)];

	for (; *pp != NULL; pp = &(*pp)->hnext)
		if ((*pp)->idx == idx && key_eq(&(*pp)->key, k))
			break;
	return (pp);
}

static void
remove_page(struct page_cache *pc, struct page *p)
{
	struct page **pp = find_slot(pc, &p->key, p->idx);

	*pp = p->hnext;
	lru_unlink(p);
	pc->npages--;
	free(p);
}

size_t
page_cache_get(struct page_cache *pc, const struct coop_key *k,
	uint64_t off, char *buf, size_t len)
{
	uint64_t pos = off, end = off + len;

	pthread_mutex_lock(&pc->mu);
	while (pos < end) {
		struct page *p = *find_slot(pc, k, pos / COOP_PAGE_SIZE);
		uint32_t in = pos % COOP_PAGE_SIZE;
		size_t n;

		if (p == NULL || in >= p->valid)
			break;
		n = p->valid - in;
		if (n > end - pos)
			n = end - pos;
		if (buf != NULL)
			memcpy(buf + (pos - off), p->data + in, n);
		pos += n;
		lru_unlink(p);
		lru_push_front(pc, p);
		if (p->valid < COOP_PAGE_SIZE)
			break;		/* the last page of the file */
	}
	pthread_mutex_unlock(&pc->mu);
	return (pos - off);
}

static void
store_page(struct page_cache *pc, const struct coop_key *k, uint64_t idx,
	const char *data, uint32_t valid)
{
	struct page **pp = find_slot(pc, k, idx), *p = *pp;

	if (p == NULL) {
		if (pc->npages >= pc->max_pages) {
			/* reuse the least recently used page's memory: a full
			 * cache then writes at memcpy speed, no free/malloc */
			p = pc->lru.prev;
			*find_slot(pc, &p->key, p->idx) = p->hnext;
			lru_unlink(p);
			pc->npages--;
		} else if ((p = malloc(sizeof(*p))) == NULL)
			return;		/* a cache may forget */
		pp = find_slot(pc, k, idx); /* chain may have changed */
		p->key = *k;
		p->idx = idx;
		p->hnext = NULL;
		*pp = p;
		pc->npages++;
	} else
		lru_unlink(p);
	memcpy(p->data, data, valid);
	p->valid = valid;
	lru_push_front(pc, p);
}

/* bytes [in, in+n) of page idx: replace, merge or leave the cached page */
static void
put_page(struct page_cache *pc, const struct coop_key *k, uint64_t idx,
	uint32_t in, const char *data, uint32_t n, int eof)
{
	struct page *p = *find_slot(pc, k, idx);

	if (in == 0 && (n == COOP_PAGE_SIZE || (eof && p == NULL)))
		store_page(pc, k, idx, data, n);
	else if (p != NULL && in <= p->valid) {
		/* the cached page holds every byte before the new ones (an
		 * overwrite inside a staged page, or the same bytes again) */
		memcpy(p->data + in, data, n);
		if (p->valid < in + n)
			p->valid = in + n;
		lru_unlink(p);
		lru_push_front(pc, p);
	}
	/* else: a gap before the new bytes; the cached prefix stays right */
}

void
page_cache_put(struct page_cache *pc, const struct coop_key *k,
	uint64_t off, const char *data, size_t len, int eof)
{
	uint64_t pos = off, end = off + len;

	pthread_mutex_lock(&pc->mu);
	while (pos < end) {
		uint64_t idx = pos / COOP_PAGE_SIZE;
		uint32_t in = (uint32_t)(pos % COOP_PAGE_SIZE);
		uint64_t n = COOP_PAGE_SIZE - in;

		if (n > end - pos)
			n = end - pos;
		put_page(pc, k, idx, in, data + (pos - off), (uint32_t)n,
		    eof && pos + n == end);
		pos += n;
	}
	pthread_mutex_unlock(&pc->mu);
}

void
page_cache_inval(struct page_cache *pc, uint64_t ino)
{
	struct page *p, *next;

	pthread_mutex_lock(&pc->mu);
	for (p = pc->lru.next; p != &pc->lru; p = next) {
		next = p->next;
		if (p->key.ino == ino)
			remove_page(pc, p);
	}
	pthread_mutex_unlock(&pc->mu);
}

void
page_cache_retag(struct page_cache *pc, const struct coop_key *staging,
	const struct coop_key *to, uint64_t size)
{
	struct page *p, *next, *moved = NULL;

	pthread_mutex_lock(&pc->mu);
	for (p = pc->lru.next; p != &pc->lru; p = next) {
		uint64_t start;

		next = p->next;
		if (!key_eq(&p->key, staging))
			continue;
		start = p->idx * COOP_PAGE_SIZE;
		*find_slot(pc, &p->key, p->idx) = p->hnext;
		lru_unlink(p);
		if (start >= size || (start + p->valid != size &&
		    p->valid < COOP_PAGE_SIZE)) {
			pc->npages--;
			free(p);
			continue;
		}
		if (start + p->valid > size)	/* file was truncated */
			p->valid = size - start;
		p->hnext = moved;	/* re-insert after the walk */
		moved = p;
	}
	for (p = moved; p != NULL; p = next) {
		struct page **pp;

		next = p->hnext;
		p->key = *to;
		pp = find_slot(pc, &p->key, p->idx);
		if (*pp != NULL) {	/* a page of that generation exists */
			pc->npages--;
			free(p);
			continue;
		}
		p->hnext = NULL;
		*pp = p;
		lru_push_front(pc, p);
	}
	pthread_mutex_unlock(&pc->mu);
}

void
page_cache_drop_all(struct page_cache *pc)
{
	pthread_mutex_lock(&pc->mu);
	while (pc->lru.next != &pc->lru)
		remove_page(pc, pc->lru.next);
	pthread_mutex_unlock(&pc->mu);
}

size_t
page_cache_npages(struct page_cache *pc)
{
	size_t n;

	pthread_mutex_lock(&pc->mu);
	n = pc->npages;
	pthread_mutex_unlock(&pc->mu);
	return (n);
}

size_t
page_cache_capacity_pages(struct page_cache *pc)
{
	return (pc->max_pages);
}
