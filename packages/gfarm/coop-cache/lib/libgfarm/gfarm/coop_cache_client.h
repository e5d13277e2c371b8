/*
 * coop_cache_client.h - libgfarm's side of the gfccd wire protocol
 * (chfs-stack cooperative cache): talk to this node's cache daemon over
 * its UNIX socket and to a peer's daemon over TCP, every call bounded by
 * the configured timeout.  Functions return 0 or -errno.
 */
#include <stddef.h>
#include <stdint.h>

struct coop_cache_config {
	const char *socket_path;	/* GFARM_COOP_CACHE_SOCKET */
	int timeout_ms;			/* GFARM_COOP_CACHE_TIMEOUT_MS */
	int stage_by_reference;	/* GFARM_COOP_CACHE_STAGE_BY_REFERENCE */
	int peers;		/* GFARM_COOP_CACHE_PEERS: 0 = node-local */
};

/* NULL when the cooperative cache is off or misconfigured */
const struct coop_cache_config *coop_cache_config(void);

/* 0 while a local daemon that failed to answer is being bypassed */
int coop_cache_local_up(void);

/* this node's cache endpoint and the cluster's cache secret */
int coop_cache_hello(char *endpoint, size_t size, unsigned char *secret);

struct coop_key;

/* longest cached prefix of [off, off+len) from the local daemon */
int coop_cache_local_get(const struct coop_key *, uint64_t off,
	char *buf, size_t len, size_t *gotp);
int coop_cache_local_put(const struct coop_key *, uint64_t off,
	const char *buf, size_t len, int eof);
/* how many bytes of [0, size) the local daemon holds as one prefix */
int coop_cache_local_has(const struct coop_key *, uint64_t size,
	uint64_t *havep);
/* staging by reference, in two steps so that gfccd reads while the caller
 * sends: start asks gfccd to store bytes [src_off, src_off+len) of the file
 * open as fd at off and returns a connection (or -errno) with *nreq
 * requests in flight; finish waits for their replies and closes it */
int coop_cache_local_put_ref_start(const struct coop_key *, uint64_t off,
	int fd, uint64_t src_off, uint64_t len, int *nreq);
int coop_cache_local_put_ref_finish(int conn, int nreq);
int coop_cache_local_inval(uint64_t ino);
/* the pages staged under `staging' become `to''s (see page_cache_retag) */
int coop_cache_local_retag(const struct coop_key *staging,
	const struct coop_key *to, uint64_t size);
int coop_cache_local_stat_add(uint64_t local_requested, uint64_t local_hit,
	uint64_t peer_requested, uint64_t peer_transferred, uint64_t gfsd_pages);

/* longest prefix a peer's daemon has cached */
int coop_cache_peer_get(const char *endpoint, const unsigned char *secret,
	const struct coop_key *, uint64_t off, char *buf, size_t len,
	size_t *gotp);

/* pages of COOP_PAGE_SIZE touched by [off, off+len) */
uint64_t coop_cache_pages(uint64_t off, uint64_t len);
