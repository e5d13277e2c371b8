/*
 * placement.h — which server holds what.
 *
 * Hash: 64-bit FNV-1a over the bytes, finished with the splitmix64 mixer (FNV alone has weak
 * low bits, and we take the value modulo the server count). Unlike upstream's koyama_hash it does
 * not collide on permuted names ("a12" vs "a21").
 *
 * Server order: the pool's server list is sorted by the hash of each address string (with the
 * port, so several servers on one host get distinct positions), ties broken by the string.
 *
 * Files: the namespace entry (metadata) of canonical path P lives on server hash(P) mod n. A
 * striped file remembers `first` = hash(P) mod n at create time, and chunk i lives on server
 * (first + i) mod n — so rename, which moves only the namespace entry, never moves data. A file
 * created with local placement keeps all chunks on one "home" server named in its metadata.
 */
#ifndef CHFS_PLACEMENT_H
#define CHFS_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

uint64_t chfs_hash(const void *data, size_t len);
uint64_t chfs_hash_str(const char *s);
/* Server index holding the namespace entry of canonical path `p` among n servers. */
unsigned placement_owner(const char *p, unsigned n);
/* Server index holding chunk `index` of a striped file. */
static inline unsigned placement_chunk_server(unsigned first, uint64_t index, unsigned n)
{
	return (unsigned)((first + index) % n);
}
/* Sort n address strings into pool order (in place). */
void placement_sort_servers(char **addrs, unsigned n);

#endif
