/*
 * placement.c — see placement.h for the scheme. The ring is one sorted array of points; a
 * lookup is RING_PROBES binary searches.
 */
#include "placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define VNODE_STEP 0xd6e8feb86659fd93ull /* odd constants: successive points/probes decorrelate */
#define PROBE_STEP 0x9e3779b97f4a7c15ull
#define CHUNK_STEP 0xc2b2ae3d27d4eb4full

struct ring_point {
	uint64_t h;
	unsigned member;
};

struct ring {
	unsigned n, npoints;
	struct ring_point pts[];
};

static uint64_t mix64(uint64_t h)
{
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h;
}

uint64_t chfs_hash(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return mix64(h);
}

uint64_t chfs_hash_str(const char *s) { return chfs_hash(s, strlen(s)); }

uint64_t placement_chunk_key(uint32_t pkey, uint64_t index)
{
	return mix64(((uint64_t)pkey << 32 ^ pkey) + (index + 1) * CHUNK_STEP);
}

static int point_cmp(const void *a, const void *b)
{
	const struct ring_point *x = a, *y = b;
	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->member < y->member ? -1 : x->member > y->member;
}

int ring_build(const char *const *ids, unsigned n, unsigned vnodes, struct ring **out)
{
	if (n == 0 || vnodes == 0 || vnodes > RING_VNODES_MAX || n > (1u << 20))
		return -EINVAL;
	struct ring *r = malloc(sizeof *r + (size_t)n * vnodes * sizeof r->pts[0]);
	if (!r)
		return -ENOMEM;
	r->n = n;
	r->npoints = n * vnodes;
	for (unsigned m = 0; m < n; m++) {
		uint64_t base = chfs_hash_str(ids[m]);
		for (unsigned j = 0; j < vnodes; j++)
			r->pts[m * vnodes + j] = (struct ring_point){mix64(base + (j + 1) * VNODE_STEP), m};
	}
	/* Ties (vanishingly rare) are broken by member index, which follows the caller's order:
	 * callers sort members by id so every party builds the same ring. */
	qsort(r->pts, r->npoints, sizeof r->pts[0], point_cmp);
	*out = r;
	return 0;
}

void ring_free(struct ring *r) { free(r); }

unsigned ring_size(const struct ring *r) { return r->n; }

unsigned ring_owner(const struct ring *r, uint64_t key)
{
	unsigned best = 0;
	uint64_t best_d = UINT64_MAX;
	for (unsigned p = 0; p < RING_PROBES; p++) {
		uint64_t q = mix64(key + p * PROBE_STEP);
		unsigned lo = 0, hi = r->npoints;
		while (lo < hi) {
			unsigned mid = lo + (hi - lo) / 2;
			if (r->pts[mid].h < q)
				lo = mid + 1;
			else
				hi = mid;
		}
		const struct ring_point *s = &r->pts[lo == r->npoints ? 0 : lo];
		uint64_t d = s->h - q; /* clockwise distance, wrapping */
		if (d < best_d) {
			best_d = d;
			best = s->member;
		}
	}
	return best;
}
