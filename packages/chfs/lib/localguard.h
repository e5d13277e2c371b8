/*
 * localguard.h — the client's side of the fast-path page (common/fastpath_page.h): a direct
 * access to a local server's backing file of a striped file runs between lguard_enter and
 * lguard_leave, and only if lguard_enter says the server's ring is the client's and no
 * rebalance runs there. Pages are mapped once per process and server directory.
 */
#ifndef CHFS_LOCALGUARD_H
#define CHFS_LOCALGUARD_H

#include <stdint.h>

struct fastpath_page;

/* The page of the server whose backing file is at `backing` (DIR/data/<id>): NULL if it cannot
 * be mapped (then no direct access to striped files of that server). */
struct fastpath_page *lguard_get(const char *backing);
/* 0: go ahead (call lguard_leave after); -1: use an RPC instead. */
int lguard_enter(struct fastpath_page *g, uint64_t ring_epoch);
void lguard_leave(struct fastpath_page *g);

#endif
