/* rewrite_cache.h — the node's record of syscall sites per mapped file (rewrite_cache.c). */
#ifndef CHFS_HOOK_REWRITE_CACHE_H
#define CHFS_HOOK_REWRITE_CACHE_H
#include <stddef.h>
#include <stdint.h>

/* Which bytes a mapping holds: the file as stat() sees it, and the part mapped. */
struct chfs_rcache_key {
	uint64_t dev, ino, size, mtime_ns, offset, len;
};

/* Fill k for a mapping of path (device and inode as /proc/self/maps lists them); -1 if the
 * path no longer names that file (or is not a regular file): no caching then. */
int chfs_rcache_key(const char *path, unsigned dev_major, unsigned dev_minor, unsigned long ino,
                    uint64_t offset, uint64_t len, struct chfs_rcache_key *k);
/* 64-bit hash of the mapped bytes (the content check of an entry). */
uint64_t chfs_rcache_hash(const void *p, size_t len);
/* The recorded site offsets (relative to the mapping's start; malloc'ed) of a matching entry,
 * and their count; -1 if there is none that can be trusted. The caller still checks each site
 * holds 0f 05. */
long chfs_rcache_lookup(const struct chfs_rcache_key *k, uint64_t content_hash, uint32_t **sites);
/* Record the sites found by a scan (failures ignored). */
void chfs_rcache_store(const struct chfs_rcache_key *k, uint64_t content_hash, const uint32_t *sites, long n);
#endif
