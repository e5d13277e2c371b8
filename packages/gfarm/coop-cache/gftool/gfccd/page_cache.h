/*
 * page_cache.h - the bounded in-memory page store of one node (gfccd).
 *
 * Pages of COOP_PAGE_SIZE bytes keyed by (inode, generation, page index),
 * evicted least-recently-used first once the configured byte budget is
 * reached.  All functions are thread-safe (one mutex; the daemon serves
 * each connection from its own thread).
 */
#ifndef PAGE_CACHE_H
#define PAGE_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct page_cache;

struct page_cache *page_cache_new(size_t max_bytes);
/* copy the longest cached prefix of [off, off+len) into buf; returns bytes */
size_t page_cache_get(struct page_cache *, uint64_t ino, uint64_t gen,
	uint64_t off, char *buf, size_t len);
/* store the whole pages of [off, off+len), and the trailing partial page
 * too if `eof' says the data end at the end of the file */
void page_cache_put(struct page_cache *, uint64_t ino, uint64_t gen,
	uint64_t off, const char *data, size_t len, int eof);
void page_cache_inval(struct page_cache *, uint64_t ino);
/* give the staged pages of ino generation `gen', dropping what lies past
 * `size' and a partial page that does not end exactly at `size' */
void page_cache_retag(struct page_cache *, uint64_t ino, uint64_t staging,
	uint64_t gen, uint64_t size);
void page_cache_drop_all(struct page_cache *);
size_t page_cache_npages(struct page_cache *);
size_t page_cache_capacity_pages(struct page_cache *);

#endif /* PAGE_CACHE_H */
