/*
 * fastpath_page.h — the page a server shares with the clients on its node that read and write
 * its backing files directly (the local fast path, lib/io.c): DIR/fastpath, 4096 bytes, mapped
 * shared by the server (chfsd, server/fastpath.c) and by each such client (lib/localguard.c).
 *
 * A direct access to a striped file's chunk is only right while the chunk's owner is what the
 * client's ring says and no rebalance is moving chunks. So a client announces itself (inflight
 * + 1), then checks that the server's ring epoch equals its own list's and that no rebalance
 * window is open, does the access, and leaves (inflight − 1); on a mismatch it sends an RPC
 * instead (which the server places correctly or refuses with WIRE_ERETRY). The server, when the
 * ring changes, publishes the new ring epoch and the open window first, then waits until
 * inflight is 0: every direct access that saw the old state has ended, and none starts after.
 * (Both sides use sequentially consistent atomics: a client that incremented before the
 * server's store is waited for; one that increments after it sees the new values.)
 */
#ifndef CHFS_FASTPATH_PAGE_H
#define CHFS_FASTPATH_PAGE_H

#include <stdatomic.h>
#include <stdint.h>

#define FASTPATH_PAGE_NAME "fastpath"
#define FASTPATH_PAGE_SIZE 4096
#define FASTPATH_MAGIC 0x50465343u /* "CSFP" */

struct fastpath_page {
	_Atomic uint32_t magic;
	_Atomic uint32_t window_open; /* 1 while this server takes or hands over keys */
	_Atomic uint64_t ring_epoch;  /* the ring this server places chunks with */
	_Atomic uint64_t inflight;    /* direct accesses running now */
};

#endif
