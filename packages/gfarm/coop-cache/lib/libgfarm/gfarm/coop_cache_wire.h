/*
 * coop_cache_wire.h - wire format between libgfarm and the node cache
 * daemon gfccd (chfs-stack cooperative cache for Gfarm).
 *
 * Every request is one fixed header, optionally followed by `len' payload
 * bytes (PUT, AUTH, STAT_ADD); every reply is one fixed header followed by
 * `len' payload bytes.  Integers travel in network byte order.  The same
 * protocol serves two sockets: the node-local UNIX socket (the processes of
 * this node: full access) and the TCP endpoint that peers on other nodes
 * use (only AUTH, then GET).  Data are kept in pages of COOP_PAGE_SIZE bytes
 * keyed by (struct coop_key, page index); a page is full unless it is the
 * last page of the file at that generation.
 *
 * Peer (TCP) connections authenticate both ends without sending the
 * cluster secret (coop_cache_auth.h): on accept the server sends a reply
 * header with a COOP_NONCE_LEN-byte nonce; the client sends AUTH with
 * payload nonce_c + client proof; the server answers 0 + server proof (or
 * -EACCES and closes).  Every GET reply on a peer connection then carries
 * `len' = data + COOP_MAC_LEN bytes, the data followed by their MAC under
 * the connection's session key (coop_reply_mac); the client checks it
 * before using a byte.
 */
#ifndef COOP_CACHE_WIRE_H
#define COOP_CACHE_WIRE_H

#include <stdint.h>

#define COOP_WIRE_MAGIC		0x47464343u	/* "GFCC" */
#define COOP_PAGE_SIZE		4096
#define COOP_MAX_IO		(8 * 1024 * 1024)
#define COOP_SECRET_LEN		32
#define COOP_ENDPOINT_MAX	64
/* A writer stages its data under a generation of its own, this bit plus
 * a random number drawn at its first write (fs = inc = 0), until close
 * tells it the file's new generation: two writers on one node never mix. */
#define COOP_GEN_STAGING	(1ull << 63)

/* What names a file's bytes.  gfmd announces fs (its file system) and inc
 * (its incarnation, new at every start: the none backend, and a restored
 * metadata backup, reuse inode numbers and generations) with
 * GFM_PROTO_COOP_CACHE_KEY, so one gfccd can serve several file systems
 * and survive gfmd restarts without confusing two files. */
struct coop_key {
	uint64_t fs, inc, ino, gen;
};

enum coop_op {
	COOP_OP_HELLO = 1,	/* local: reply "endpoint\0secret" */
	COOP_OP_AUTH = 2,	/* peer: payload = nonce_c, client proof */
	COOP_OP_GET = 3,	/* longest cached prefix of [off, off+len) */
	COOP_OP_PUT = 4,	/* local: store payload at off; aux=COOP_PUT_EOF */
	COOP_OP_INVAL = 5,	/* local: drop every page of ino */
	COOP_OP_RETAG = 6,	/* local: staged pages (gen = staging id) ->
				 * payload = new key (4 x u64), off = size */
	COOP_OP_STAT_ADD = 7,	/* local: payload = struct coop_stat_add */
	COOP_OP_STAT = 8,	/* local: reply text "key value\n"... */
	COOP_OP_DROP = 9,	/* local: evict everything (tests) */
	COOP_OP_PUT_REF = 10,	/* local: PUT by reference, see below */
	COOP_OP_HAS = 11,	/* local: reply u64 = bytes of [0, off) cached
				 * as one prefix (a holder has the whole file) */
};

#define COOP_PUT_EOF		1	/* data end at the end of the file */

/* PUT_REF: the data are bytes [src_off, src_off + len) of a file whose
 * descriptor travels with this payload (SCM_RIGHTS); gfccd reads them
 * itself and stores them at `off' like PUT (aux = COOP_PUT_EOF), so the
 * writer copies nothing (gfreg: stage by reference, not by copy) */
struct coop_put_ref {
	uint64_t src_off, len;
};

struct coop_req {
	uint32_t magic, op;
	uint64_t ino, gen, off;
	uint32_t len, aux;
	uint64_t fs, inc;	/* with ino and gen: the struct coop_key */
};

struct coop_rep {
	int32_t status;		/* 0 or -errno */
	uint32_t len;
};

/* counters a client process adds to its node's totals, in pages of data
 * the reader actually needed (a read past EOF does not count) */
struct coop_stat_add {
	uint64_t local_requested;	/* pages looked up in this node's cache */
	uint64_t local_hit;		/* ... and found there */
	uint64_t peer_requested;	/* pages asked of peers */
	uint64_t peer_transferred;	/* pages peers delivered */
	uint64_t gfsd_pages;		/* pages read from gfsd */
};

#endif /* COOP_CACHE_WIRE_H */
