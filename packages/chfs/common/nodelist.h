/*
 * nodelist.h — the one NODE_LIST/JOIN exchange, shared by libchfs (fetching the pool's member
 * list), chlist (printing it) and chfsd (joining a pool): connect, send, check the reply header
 * and status, decode epoch + virtual nodes + member list with wire_list_get.
 */
#ifndef CHFS_NODELIST_H
#define CHFS_NODELIST_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "secret.h"
#include "xprt.h"

struct nodelist {
	uint64_t epoch;
	uint32_t vnodes;
	char *list; /* "id=addr,..." (malloc'ed, NUL-terminated) */
	size_t len;
	char *down; /* ids the answering server considers down: "id,id" (malloc'ed, may be "") */
	size_t ndown;
	uint64_t ring_epoch; /* epoch of the last change of the member set */
	char *prev;          /* the member list before it (malloc'ed, may be "") */
	size_t nprev;
};

/* Ask server addr for the list; with join_id/join_addr (both or neither) send JOIN(id, addr)
 * instead. 0, -ENOTCONN (no answer within timeout_ms), -ECONNREFUSED / -EHOSTUNREACH /
 * -ENETUNREACH (nobody listens at addr: known at once), -EIO (malformed reply), -ENOMEM, or the
 * server's status (-EACCES: wrong pool secret). nodelist_no_answer() tells the first group. */
int nodelist_fetch(xprt_t *x, const char *addr, const uint8_t secret[CHFS_SECRET_LEN], int timeout_ms,
                   const char *join_id, const char *join_addr, struct nodelist *out);
void nodelist_free(struct nodelist *l);
/* True for the results of nodelist_fetch that mean the server did not answer at all. */
static inline int nodelist_no_answer(int rc)
{
	return rc == -ENOTCONN || rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ENETUNREACH;
}

#endif
