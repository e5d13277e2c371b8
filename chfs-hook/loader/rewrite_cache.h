/* rewrite_cache.h — the node's record of syscall sites per mapped file (rewrite_cache.c). */
#ifndef CHFS_HOOK_REWRITE_CACHE_H
#define CHFS_HOOK_REWRITE_CACHE_H
#include <stddef.h>
#include <stdint.h>

/* Which bytes a mapping holds: the file as stat() sees it, and the part mapped. */
struct chfs_rcache_key {
	uint64_t dev, ino, size, mtime_ns, ctime_ns, offset, len;
};

/* Fill k for a mapping of path (device and inode as /proc/self/maps lists them); -1 if the
 * path no longer names that file (or is not a regular file): no caching then. */
int chfs_rcache_key(const char *path, unsigned dev_major, unsigned dev_minor, unsigned long ino,
                    uint64_t offset, uint64_t len, struct chfs_rcache_key *k);
/* 64-bit hash of len bytes (entry names and checksums). */
uint64_t chfs_rcache_hash(const void *p, size_t len);
/* The content check of an entry: a hash of the bytes around each of the n sites (ascending
 * offsets into the mapping at base, len bytes), each site's own two bytes counted as 0f 05
 * whether or not they are rewritten yet. */
uint64_t chfs_rcache_site_hash(const uint8_t *base, size_t len, const uint32_t *sites, long n);
/* The recorded site offsets (ascending, relative to the mapping's start; malloc'ed) of an
 * entry for k, their count, and the site hash recorded with them; -1 if there is none that
 * can be trusted. The caller checks the site hash and that each site holds 0f 05. */
long chfs_rcache_lookup(const struct chfs_rcache_key *k, uint32_t **sites, uint64_t *site_hash);
/* Record the sites found by a scan and their site hash (failures ignored). */
void chfs_rcache_store(const struct chfs_rcache_key *k, uint64_t site_hash, const uint32_t *sites, long n);
#endif
