/*
 * placement.h — which server holds what: a consistent-hash ring with virtual nodes.
 *
 * Hash: 64-bit FNV-1a over the bytes, finished with the splitmix64 mixer (FNV alone has weak
 * low bits). Unlike upstream's koyama_hash it does not collide on permuted names ("a12" vs
 * "a21").
 *
 * Ring: every member (a server, named by its stable identity string — never its address, so a
 * server restarted on another port keeps its place) puts `vnodes` points on a 64-bit ring, point
 * j at mix(hash(id) + (j+1)·K). A key is looked up with RING_PROBES probes (multi-probe
 * consistent hashing, Appleton & O'Reilly 2015): probe p = mix(key + p·K'), each probe's ring
 * successor is a candidate, and the candidate at the smallest clockwise distance wins. Plain
 * vnodes leave a member's share with a spread of ~1/sqrt(vnodes) (64 vnodes: max/mean ≈ 1.5 over
 * 36 servers); 8 probes bring it under 1.10 for 1..64 servers. The properties of consistent
 * hashing stay: a key's owner depends only on the points, a new member only takes keys (no key
 * moves between two old members), a leaving member only gives its keys away.
 *
 * Files: a striped file gets a 32-bit placement key at create, pkey = hash(P) folded to 32 bits
 * (stored in its metadata, md.pkey), and chunk i lives on owner(chunk_key(pkey, i)) — so
 * rename, which moves only the namespace entry, never moves data. The namespace entry of
 * canonical path P lives on owner(chunk_key(fold(hash(P)), 0)): with chunk 0 of a file created
 * there, so a one-chunk file depends on one server, as upstream keeps the inode with chunk 0. Local placement (all chunks on md.home) does not use the ring.
 *
 * The module knows nothing of clients, servers or addresses: members are indices into the id
 * array the caller built the ring from.
 */
#ifndef CHFS_PLACEMENT_H
#define CHFS_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#define RING_VNODES_DEFAULT 64
#define RING_VNODES_MAX 1024
#define RING_PROBES 8

uint64_t chfs_hash(const void *data, size_t len);
uint64_t chfs_hash_str(const char *s);

struct ring;
/* Build a ring over n members named ids[0..n-1] (distinct strings), vnodes points each
 * (1..RING_VNODES_MAX). 0, -EINVAL or -ENOMEM. */
int ring_build(const char *const *ids, unsigned n, unsigned vnodes, struct ring **out);
void ring_free(struct ring *r);
unsigned ring_size(const struct ring *r);
/* Member index owning a 64-bit key. */
unsigned ring_owner(const struct ring *r, uint64_t key);

/* Ring key of chunk `index` of a file with placement key pkey. */
uint64_t placement_chunk_key(uint32_t pkey, uint64_t index);
/* The placement key a new striped file at canonical path p gets. */
static inline uint32_t placement_new_key(const char *p) { return (uint32_t)chfs_hash_str(p); }
/* Member holding the namespace entry of canonical path p: the key of chunk 0 of a file created
 * at p, so a small file lives on one server (until renamed). */
static inline unsigned placement_owner(const struct ring *r, const char *p)
{
	return ring_owner(r, placement_chunk_key(placement_new_key(p), 0));
}
/* Member holding chunk `index` of a striped file. */
static inline unsigned placement_chunk_server(const struct ring *r, uint32_t pkey, uint64_t index)
{
	return ring_owner(r, placement_chunk_key(pkey, index));
}

#endif
