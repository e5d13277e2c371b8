/*
 * page_cache_test.c - unit test of gfccd's page store (coop-cache/gftool/gfccd/page_cache.c),
 * built and run by test_page_cache.py: LRU bound, longest-prefix GET, partial pages only at
 * EOF, invalidation, and re-tagging of staged writes at close. Prints "ok" or the failing check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coop_cache_wire.h"
#include "page_cache.h"

#define PS COOP_PAGE_SIZE
#define CHECK(c) do { if (!(c)) { printf("FAIL line %d: %s\n", __LINE__, #c); exit(1); } } while (0)

static char data[16 * PS], out[16 * PS];

int
main(void)
{
	struct page_cache *pc = page_cache_new(4 * PS);	/* room for 4 pages */
	int i;

	for (i = 0; i < (int)sizeof(data); i++)
		data[i] = (char)(i * 7 + 3);
	CHECK(pc != NULL && page_cache_capacity_pages(pc) == 4);

	/* whole pages only; a partial tail is kept only when it is EOF */
	page_cache_put(pc, 1, 1, 0, data, 2 * PS + 100, 0);
	CHECK(page_cache_npages(pc) == 2);
	CHECK(page_cache_get(pc, 1, 1, 0, out, 3 * PS) == 2 * PS);
	CHECK(memcmp(out, data, 2 * PS) == 0);
	page_cache_put(pc, 1, 1, 0, data, 2 * PS + 100, 1);
	CHECK(page_cache_get(pc, 1, 1, 0, out, 3 * PS) == 2 * PS + 100);
	CHECK(memcmp(out, data, 2 * PS + 100) == 0);
	/* unaligned start: the partial first page is skipped */
	CHECK(page_cache_get(pc, 1, 1, 10, out, PS) == PS);
	CHECK(memcmp(out, data + 10, PS) == 0);
	/* another generation is a different file */
	CHECK(page_cache_get(pc, 1, 2, 0, out, PS) == 0);

	/* LRU: the page touched last survives; the bound is never exceeded */
	CHECK(page_cache_get(pc, 1, 1, 0, out, 10) == 10);	/* most recent */
	page_cache_put(pc, 2, 1, 0, data, 3 * PS, 0);	/* evicts 2 pages */
	CHECK(page_cache_npages(pc) == 4);
	CHECK(page_cache_get(pc, 1, 1, 0, out, 10) == 10);
	CHECK(page_cache_get(pc, 1, 1, PS, out, 10) == 0);	/* evicted */
	CHECK(page_cache_get(pc, 1, 1, 2 * PS, out, 10) == 0);	/* evicted */
	CHECK(page_cache_get(pc, 2, 1, 0, out, 3 * PS) == 3 * PS);

	/* invalidation drops every generation of an inode */
	page_cache_inval(pc, 2);
	CHECK(page_cache_get(pc, 2, 1, 0, out, PS) == 0);

	/* staged writes: kept up to the file size, partial page only if it ends the file */
	page_cache_drop_all(pc);
	CHECK(page_cache_npages(pc) == 0);
	page_cache_put(pc, 3, COOP_GEN_STAGING, 0, data, PS + 10, 1);
	page_cache_retag(pc, 3, COOP_GEN_STAGING, 5, PS + 10);
	CHECK(page_cache_get(pc, 3, 5, 0, out, 2 * PS) == PS + 10);
	CHECK(page_cache_get(pc, 3, COOP_GEN_STAGING, 0, out, PS) == 0);
	page_cache_put(pc, 4, COOP_GEN_STAGING, 0, data, PS + 10, 1);
	page_cache_retag(pc, 4, COOP_GEN_STAGING, 1, 3 * PS);	/* tail not at EOF */
	CHECK(page_cache_get(pc, 4, 1, 0, out, 3 * PS) == PS);
	page_cache_put(pc, 6, COOP_GEN_STAGING, 0, data, 2 * PS, 1);
	page_cache_retag(pc, 6, COOP_GEN_STAGING, 1, PS / 2);	/* truncated after */
	CHECK(page_cache_get(pc, 6, 1, 0, out, 2 * PS) == PS / 2);
	puts("ok");
	return (0);
}
