/*
 * page_cache.h - the bounded in-memory page store of one node (gfccd).
 *
 * Pages of COOP_PAGE_SIZE bytes keyed by (struct coop_key, page index),
 * evicted least-recently-used first once the configured byte budget is
 * reached.  A page holds bytes [0, valid) of its page of the file; a page
 * shorter than COOP_PAGE_SIZE is the file's last page (staged pages: see
 * page_cache_retag).  All functions are thread-safe (one mutex; the daemon
 * serves each connection from its own thread).
 */
#ifndef PAGE_CACHE_H
#define PAGE_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct page_cache;
struct coop_key;

struct page_cache *page_cache_new(size_t max_bytes);
/* copy the longest cached prefix of [off, off+len) into buf (NULL: only
 * measure it); returns bytes */
size_t page_cache_get(struct page_cache *, const struct coop_key *,
	uint64_t off, char *buf, size_t len);
/* store [off, off+len): a page the data cover whole is stored; a page they
 * cover in part is merged into the cached page when that page already
 * holds every byte before them, else left alone (a cached page never
 * keeps bytes the data replace); a first partial page is stored only when
 * `eof' says the data end the file */
void page_cache_put(struct page_cache *, const struct coop_key *,
	uint64_t off, const char *data, size_t len, int eof);
/* drop every page of ino, whatever its file system and generation */
void page_cache_inval(struct page_cache *, uint64_t ino);
/* give the pages staged under `staging' the key `to', dropping what lies
 * past `size' and a partial page that does not end exactly at `size' */
void page_cache_retag(struct page_cache *, const struct coop_key *staging,
	const struct coop_key *to, uint64_t size);
void page_cache_drop_all(struct page_cache *);
size_t page_cache_npages(struct page_cache *);
size_t page_cache_capacity_pages(struct page_cache *);

#endif /* PAGE_CACHE_H */
