/*
 * coop_cache_key.h - gfmd's GFM_PROTO_COOP_CACHE_KEY handler (chfs-stack
 * cooperative cache; see coop_cache_key.c).
 */
struct peer;

gfarm_error_t gfm_server_coop_cache_key(struct peer *, int, int);
