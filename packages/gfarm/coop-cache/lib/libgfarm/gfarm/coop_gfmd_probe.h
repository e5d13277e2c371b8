/*
 * coop_gfmd_probe.h - does this gfmd speak the cooperative-cache
 * protocol? (chfs-stack; see coop_gfmd_probe.c)
 */
#define COOP_GFMD_PROTOCOL_VERSION	1

struct gfm_connection;

/* 1 if gfm_server's gfmd answers GFM_PROTO_COOP_CACHE_HELLO, else 0 */
int coop_gfmd_supported(struct gfm_connection *);
