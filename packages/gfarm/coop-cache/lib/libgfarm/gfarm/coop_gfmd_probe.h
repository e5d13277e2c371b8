/*
 * coop_gfmd_probe.h - does this gfmd speak the cooperative-cache
 * protocol? (chfs-stack; see coop_gfmd_probe.c)
 */
/* 2: KEY (GFM_PROTO_COOP_CACHE_KEY) added to 1's ADMIT/REGISTER/...; a
 * version-1 gfmd would close the connection on KEY, so it counts as stock */
#define COOP_GFMD_PROTOCOL_VERSION	2

struct gfm_connection;

/* 1 if gfm_server's gfmd answers GFM_PROTO_COOP_CACHE_HELLO, else 0 */
int coop_gfmd_supported(struct gfm_connection *);
