/*
 * placement.c — see placement.h.
 */
#include "placement.h"

#include <stdlib.h>
#include <string.h>

uint64_t chfs_hash(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h;
}

uint64_t chfs_hash_str(const char *s) { return chfs_hash(s, strlen(s)); }

unsigned placement_owner(const char *p, unsigned n) { return n ? (unsigned)(chfs_hash_str(p) % n) : 0; }

static int server_cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	uint64_t hx = chfs_hash_str(x), hy = chfs_hash_str(y);
	if (hx != hy)
		return hx < hy ? -1 : 1;
	return strcmp(x, y);
}

void placement_sort_servers(char **addrs, unsigned n) { qsort(addrs, n, sizeof *addrs, server_cmp); }
