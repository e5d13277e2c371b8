/*
 * site_hash_test.c — unit test of the rewrite cache's content check (loader/rewrite_cache.c,
 * chfs_rcache_site_hash): the bytes around every recorded syscall site are hashed, each site
 * counting as 0f 05 whether it is rewritten (ff d0) or not, so the hash taken before a scan
 * patches a mapping equals the one a later process takes before it patches its own copy; a
 * change next to a site changes it, a change far from every site does not (the file's ctime,
 * in the entry's key, catches those).
 */
#include "check.h"
#include "rewrite_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LEN = 4096 };

int main(void)
{
	uint8_t *code = malloc(LEN);
	if (!code)
		return 2;
	for (size_t i = 0; i < LEN; i++)
		code[i] = (uint8_t)(i * 7 + 3);
	/* sites at the start, next to each other (2 bytes apart), in the middle, at the end */
	const uint32_t sites[] = {0, 2, 100, 110, LEN - 2};
	const long n = sizeof sites / sizeof *sites;
	for (long i = 0; i < n; i++)
		code[sites[i]] = 0x0f, code[sites[i] + 1] = 0x05;
	uint64_t before = chfs_rcache_site_hash(code, LEN, sites, n);

	for (long i = 0; i < n; i++) /* what the rewrite leaves: call *%rax */
		code[sites[i]] = 0xff, code[sites[i] + 1] = 0xd0;
	CHECK(chfs_rcache_site_hash(code, LEN, sites, n) == before);
	for (long i = 0; i < n; i += 2) /* half rewritten (a scan in progress) */
		code[sites[i]] = 0x0f, code[sites[i] + 1] = 0x05;
	CHECK(chfs_rcache_site_hash(code, LEN, sites, n) == before);

	code[2000] ^= 1; /* far from every site */
	CHECK(chfs_rcache_site_hash(code, LEN, sites, n) == before);
	code[2000] ^= 1;
	const size_t near[] = {84, 99, 105, 127, 5, LEN - 18, LEN - 3};
	for (size_t k = 0; k < sizeof near / sizeof *near; k++) { /* within 16 bytes of a site */
		code[near[k]] ^= 0x40;
		if (chfs_rcache_site_hash(code, LEN, sites, n) == before)
			fprintf(stderr, "a change at %zu went unseen\n", near[k]);
		CHECK(chfs_rcache_site_hash(code, LEN, sites, n) != before);
		code[near[k]] ^= 0x40;
	}
	CHECK(chfs_rcache_site_hash(code, LEN, sites, n) == before);
	/* the same bytes recorded with one site fewer, or a site moved, do not match */
	CHECK(chfs_rcache_site_hash(code, LEN, sites, n - 1) != before);
	const uint32_t moved[] = {0, 2, 100, 112, LEN - 2};
	CHECK(chfs_rcache_site_hash(code, LEN, moved, n) != before);
	CHECK(chfs_rcache_site_hash(code, LEN, NULL, 0) == chfs_rcache_site_hash(code + 1, 10, NULL, 0));
	free(code);
	if (failures)
		fprintf(stderr, "site_hash_test: %d check(s) failed\n", failures);
	return failures != 0;
}
