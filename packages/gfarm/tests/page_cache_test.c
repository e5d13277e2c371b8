/*
 * page_cache_test.c - unit test of gfccd's page store (coop-cache/gftool/gfccd/page_cache.c),
 * built and run by test_page_cache.py: LRU bound, longest-prefix GET, partial pages only at
 * EOF, invalidation, re-tagging of staged writes at close, overwrites that do not start on a
 * page boundary, and keys that differ only in staging id, file system or gfmd incarnation. Prints "ok" or the failing check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coop_cache_wire.h"
#include "page_cache.h"

#define PS COOP_PAGE_SIZE
#define CHECK(c) do { if (!(c)) { printf("FAIL line %d: %s\n", __LINE__, #c); exit(1); } } while (0)

static char data[16 * PS], out[16 * PS];
static struct page_cache *volatile cache;	/* reachable until exit */

static struct coop_key
K(uint64_t ino, uint64_t gen)
{
	struct coop_key k = { 7, 9, ino, gen };

	return (k);
}

/* an in-place overwrite that does not start on a page boundary */
static void
check_partial_overwrites(struct page_cache *pc)
{
	struct coop_key st = K(10, COOP_GEN_STAGING | 1), g1 = K(10, 1);
	char want[3 * PS];

	memset(want, 'A', sizeof(want));
	page_cache_put(pc, &st, 0, want, 2 * PS, 1);
	memcpy(want + 4, "BBBB", 4);
	page_cache_put(pc, &st, 4, "BBBB", 4, 1);	/* inside page 0 */
	memcpy(want + PS - 2, "CCCC", 4);
	page_cache_put(pc, &st, PS - 2, "CCCC", 4, 1);	/* across 0 and 1 */
	page_cache_retag(pc, &st, &g1, 2 * PS);
	CHECK(page_cache_get(pc, &g1, 0, out, 3 * PS) == 2 * PS);
	CHECK(memcmp(out, want, 2 * PS) == 0);

	/* a partial page with a gap before it is not stored as a prefix */
	page_cache_drop_all(pc);
	page_cache_put(pc, &st, 100, "DDDD", 4, 1);
	CHECK(page_cache_npages(pc) == 0);
	/* growing a staged tail page, and a short write at its start */
	page_cache_put(pc, &st, 0, want, 100, 1);
	page_cache_put(pc, &st, 100, "EEEE", 4, 1);
	page_cache_put(pc, &st, 0, "FF", 2, 1);
	page_cache_retag(pc, &st, &g1, 104);
	CHECK(page_cache_get(pc, &g1, 0, out, PS) == 104);
	CHECK(memcmp(out, "FF", 2) == 0 && memcmp(out + 2, want + 2, 98) == 0);
	CHECK(memcmp(out + 100, "EEEE", 4) == 0);

	/* one staging generation is not another's, nor a file system's */
	page_cache_drop_all(pc);
	{
		struct coop_key st2 = K(10, COOP_GEN_STAGING | 2);
		struct coop_key other_fs = { 8, 9, 10, 1 }, other_inc = { 7, 5, 10, 1 };

		page_cache_put(pc, &st, 0, want, PS, 1);
		page_cache_put(pc, &st2, 0, data, PS, 1);
		page_cache_retag(pc, &st, &g1, PS);
		CHECK(page_cache_get(pc, &g1, 0, out, PS) == PS);
		CHECK(memcmp(out, want, PS) == 0);
		CHECK(page_cache_get(pc, &other_fs, 0, out, PS) == 0);
		CHECK(page_cache_get(pc, &other_inc, 0, out, PS) == 0);
	}
	page_cache_drop_all(pc);
}

int
main(void)
{
	struct page_cache *pc = cache = page_cache_new(4 * PS); /* 4 pages */
	struct coop_key k11 = K(1, 1), k12 = K(1, 2), k21 = K(2, 1);
	struct coop_key s3 = K(3, COOP_GEN_STAGING), g35 = K(3, 5);
	struct coop_key s4 = K(4, COOP_GEN_STAGING), g41 = K(4, 1);
	struct coop_key s6 = K(6, COOP_GEN_STAGING), g61 = K(6, 1);
	int i;

	for (i = 0; i < (int)sizeof(data); i++)
		data[i] = (char)(i * 7 + 3);
	CHECK(pc != NULL && page_cache_capacity_pages(pc) == 4);

	/* whole pages only; a partial tail is kept only when it is EOF */
	page_cache_put(pc, &k11, 0, data, 2 * PS + 100, 0);
	CHECK(page_cache_npages(pc) == 2);
	CHECK(page_cache_get(pc, &k11, 0, out, 3 * PS) == 2 * PS);
	CHECK(memcmp(out, data, 2 * PS) == 0);
	page_cache_put(pc, &k11, 0, data, 2 * PS + 100, 1);
	CHECK(page_cache_get(pc, &k11, 0, out, 3 * PS) == 2 * PS + 100);
	CHECK(memcmp(out, data, 2 * PS + 100) == 0);
	/* unaligned start: the partial first page is skipped */
	CHECK(page_cache_get(pc, &k11, 10, out, PS) == PS);
	CHECK(memcmp(out, data + 10, PS) == 0);
	/* another generation is a different file */
	CHECK(page_cache_get(pc, &k12, 0, out, PS) == 0);

	/* LRU: the page touched last survives; the bound is never exceeded */
	CHECK(page_cache_get(pc, &k11, 0, out, 10) == 10);	/* most recent */
	page_cache_put(pc, &k21, 0, data, 3 * PS, 0);	/* evicts 2 pages */
	CHECK(page_cache_npages(pc) == 4);
	CHECK(page_cache_get(pc, &k11, 0, out, 10) == 10);
	CHECK(page_cache_get(pc, &k11, PS, out, 10) == 0);	/* evicted */
	CHECK(page_cache_get(pc, &k11, 2 * PS, out, 10) == 0);	/* evicted */
	CHECK(page_cache_get(pc, &k21, 0, out, 3 * PS) == 3 * PS);

	/* invalidation drops every generation of an inode */
	page_cache_inval(pc, 2);
	CHECK(page_cache_get(pc, &k21, 0, out, PS) == 0);

	/* staged writes: kept up to the file size, partial page only if it ends the file */
	page_cache_drop_all(pc);
	CHECK(page_cache_npages(pc) == 0);
	page_cache_put(pc, &s3, 0, data, PS + 10, 1);
	page_cache_retag(pc, &s3, &g35, PS + 10);
	CHECK(page_cache_get(pc, &g35, 0, out, 2 * PS) == PS + 10);
	CHECK(page_cache_get(pc, &s3, 0, out, PS) == 0);
	page_cache_put(pc, &s4, 0, data, PS + 10, 1);
	page_cache_retag(pc, &s4, &g41, 3 * PS);	/* tail not at EOF */
	CHECK(page_cache_get(pc, &g41, 0, out, 3 * PS) == PS);
	page_cache_put(pc, &s6, 0, data, 2 * PS, 1);
	page_cache_retag(pc, &s6, &g61, PS / 2);	/* truncated after */
	CHECK(page_cache_get(pc, &g61, 0, out, 2 * PS) == PS / 2);
	page_cache_drop_all(pc);
	check_partial_overwrites(pc);
	puts("ok");
	return (0);
}
