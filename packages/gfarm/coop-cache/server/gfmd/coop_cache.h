/*
 * coop_cache.h - gfmd's cache management table of the cooperative cache
 * (chfs-stack patch; see coop_cache.c for the design).
 */
struct peer;

gfarm_error_t gfm_server_coop_cache_register(struct peer *, int, int);
gfarm_error_t gfm_server_coop_cache_lookup(struct peer *, int, int);
gfarm_error_t gfm_server_coop_cache_report(struct peer *, int, int);
gfarm_error_t gfm_server_coop_cache_dump(struct peer *, int, int);
gfarm_error_t gfm_server_coop_cache_admit(struct peer *, int, int);
gfarm_error_t gfm_server_coop_cache_failed(struct peer *, int, int);
gfarm_error_t gfm_server_coop_cache_hello(struct peer *, int, int);
/* the inode is gone: forget who caches it (called under giant_lock) */
void coop_cache_forget(gfarm_ino_t);
