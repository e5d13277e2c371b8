/*
 * listcache.h — the pool's member list kept node-locally between processes (listcache.c).
 *
 * A fresh client reads the list (with its epoch) from this cache instead of asking a server,
 * and writes it after every list it fetched. Only a directory and files owned by the user and
 * closed to everyone else are trusted; the entry is keyed by the pool secret and the bootstrap
 * address list and carries a checksum, so another pool's, a damaged or a foreign list is never
 * used. A list that is merely old is corrected by the servers (they refuse requests placed
 * with another epoch: WIRE_ERETRY, the client then fetches the newer list).
 */
#ifndef CHFS_LISTCACHE_H
#define CHFS_LISTCACHE_H

#include <stdint.h>
#include <time.h>

#include "config.h"
#include "nodelist.h"
#include "secret.h"

struct listcache {
	int enabled;
	char dir[4096];
	char name[40]; /* "list-<16 hex>" */
	uint8_t secret[CHFS_SECRET_LEN];
	char server[4096]; /* the bootstrap list the entry belongs to (set even when disabled) */
};

/* Where the entry for pool (secret, server list) lives: CHFS_LIST_CACHE ("0" = no cache; a
 * directory; unset: $XDG_RUNTIME_DIR/chfs, else /tmp/chfs-<uid>). Computes names only. */
void listcache_init(struct listcache *c, const struct chfs_config *cfg, const char *server,
                    const uint8_t secret[CHFS_SECRET_LEN]);
/* The cached list and when it was fetched (ms since the epoch, CLOCK_REALTIME); -ENOENT if
 * there is none that can be trusted. */
int listcache_load(const struct listcache *c, struct nodelist *out, int64_t *fetched_ms);
/* Replace the entry (atomically: a reader sees the old or the new one), fetched now. Failures
 * are ignored: the cache only saves time. */
void listcache_store(const struct listcache *c, const struct nodelist *l);
/* Now, in ms since the epoch (the clock of fetched_ms). */
int64_t listcache_now_ms(void);
/* Remove the entry (its list named a server that does not answer). */
void listcache_drop(const struct listcache *c);

#endif
