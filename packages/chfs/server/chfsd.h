/*
 * chfsd.h — the server's shared state: one struct chfsd per process, built by chfsd.c, read by
 * the request handlers (handlers.c) and the membership module (membership.c).
 */
#ifndef CHFSD_H
#define CHFSD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rebalance.h"
#include "storage.h"
#include "wire.h"
#include "xprt.h"

/* The member list (see membership.c), persisted in DIR/members. Newer epochs win. */
struct members {
	/* Every request that depends on placement holds the gate for reading while it runs; a new
	 * list is installed with it held for writing (writer-preferring), so no request placed
	 * with the old list is still running once the new one is in. */
	pthread_rwlock_t gate;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* wakes the broadcaster */
	uint64_t epoch;
	unsigned vnodes; /* the pool's ring parameter */
	unsigned n;
	struct wire_member *m; /* sorted by id */
	int rootfd;            /* storage dir, for the state file */
	int pending;           /* a SET_LIST push is due */
	char *down;            /* ids the failure detector considers down, "id,id" (heartbeat.c) */
	char *rejoined;        /* ids that joined again through this server since the failure
	                        * detector's last verdict (members_set_down) */
	char *tell_up;         /* ids that joined again through this server, not yet told to the
	                        * other members (WOP_REJOINED, the broadcaster thread) */
	uint64_t ring_epoch;   /* epoch of the last change of the member set (rebalance.h) */
	char *prev;            /* the list before that change, "" if none */
};

struct chfsd {
	xprt_t *x;
	struct storage *st;
	struct members mem;
	uint8_t secret[CHFS_SECRET_LEN];
	char self[WIRE_ADDR_MAX];
	char id[WIRE_ID_LEN + 1]; /* stable identity (DIR/server.id) */
	unsigned vnodes_opt;      /* -V, 0 if not given */
	int timeout_ms;
	struct rebalance *rb;               /* rebalance.c */
	struct backend *bk;                 /* -b DIR (backend.h), NULL if none */
	uint32_t bk_chunk_size;             /* chunk size of files read through from the backend */
	atomic_int handover_pending;        /* this server holds keys others own (handover.c) */
	atomic_int stopping;                /* shutting down: background threads end */
	atomic_ullong requests;             /* requests served (admitted and decoded), for status */
	atomic_ullong op_requests[WOP_MAX]; /* the same per op, and the STATs answered inline */
};

/* This server's identity from DIR/server.id, created on first use. */
int members_self_id(int rootfd, char id[WIRE_ID_LEN + 1]);
/* A new pool of one: this server; with joining, no pool yet (epoch 0) until members_join. */
int members_init(struct members *m, int rootfd, const char *id, const char *addr, unsigned vnodes,
                 int joining);
/* Add (id, addr) or give id its new address; 1 if the list changed (epoch bumped, saved).
 * -EAGAIN for a new member while a rebalance runs here. */
int members_add(struct chfsd *d, const char *id, const char *addr);
/* Replace the list if epoch is newer; 1 if replaced. list/prev as in wire_list_parse. */
int members_set(struct chfsd *d, uint64_t epoch, unsigned vnodes, const char *list, size_t len,
                uint64_t ring_epoch, const char *prev, size_t plen);
/* Graceful leave: this server out of the list (epoch + 1, a ring change). */
int members_leave(struct chfsd *d);
/* The list as a string into buf (size >= WIRE_LIST_MAX); returns the epoch. */
uint64_t members_get(struct members *m, char *buf, size_t size, unsigned *vnodes);
/* The list body of NODE_LIST/JOIN replies and SET_LIST (list, down, ring history). */
void members_put_list(struct members *m, struct wenc *e);
uint64_t members_epoch(struct members *m);
uint64_t members_ring_epoch(struct members *m);
/* Ring epoch, the list before the last ring change (buf >= WIRE_LIST_MAX) and vnodes. */
void members_get_ring(struct members *m, uint64_t *ring_epoch, char *buf, size_t size, unsigned *vnodes);
/* A request came with a newer epoch than ours: fetch the list from the members (bounded). */
void members_catch_up(struct chfsd *d, uint64_t epoch);
/* Push the current list to every other member now (a leaving server, before it exits). */
void members_flush_broadcast(struct chfsd *d);
void members_stop_broadcaster(struct chfsd *d);
/* Start the thread that pushes the list to the other members after a change. */
int members_start_broadcaster(struct chfsd *d);
/* The list changed: have the broadcaster tell every other server (returns at once). */
void members_changed(struct chfsd *d);
/* Join the pool through a bootstrap server. */
int members_join(struct chfsd *d, const char *bootstrap);
/* Ids considered down (comma-joined) into buf; set by the failure detector. A member that
 * joins again through this server (a restart) is up at once; the detector's next verdict
 * leaves it out, since that round may have asked it before it was back, and gets its id in
 * rejoined (size WIRE_LIST_MAX) to start counting its misses afresh. */
void members_get_down(struct members *m, char *buf, size_t size);
void members_set_down(struct members *m, const char *ids, char *rejoined);
/* 1 if the failure detector finds member id down. */
int members_is_down(struct members *m, const char *id);
/* WOP_REJOINED: member id joined again through another member; it is up here too. */
void members_rejoined(struct members *m, const char *id);

/* ---- fastpath.c: the page shared with direct-access clients (common/fastpath_page.h) ---- */
int fastpath_open(struct chfsd *d);
/* Publish the ring and window; returns once no direct access of the old state runs. */
void fastpath_publish(uint64_t ring_epoch, int window_open);

/* ---- heartbeat.c: the failure detector ---- */
int heartbeat_start(struct chfsd *d);
void heartbeat_stop(struct chfsd *d);

void handle_request(xprt_req_t *r, void *arg);
/* Remove this server's data of fileid (WOP_DATA_REMOVE; also an expired orphan's). */
int chfsd_data_remove(struct chfsd *d, uint64_t fileid);
/* Admission (progress thread): only requests carrying the pool secret reach a worker. */
int handle_admit(const void *msg, size_t len, void *arg);
/* On the progress thread (xprt_serve_inline): answers a STAT that cannot block, else returns 0
 * and the request goes to a worker. CHFSD_INLINE=0 turns it off (for A/B measurements). */
int handle_inline(xprt_req_t *r, void *arg);
/* peer.c: server-to-server calls. chfsd_req_hdr reserves the header in e; chfsd_call fills
 * it (body length, this server's epoch), sends to addr and waits: 0 with *body over the reply
 * body (if body), the server's status, -ENOTCONN (no answer) or -EIO (malformed reply). */
void chfsd_req_hdr(struct chfsd *d, struct wenc *e, unsigned op);
int chfsd_call(struct chfsd *d, const char *addr, struct wenc *e, uint8_t *rep, size_t cap, struct wdec *body,
               int timeout_ms);
/* The request in e (from chfsd_req_hdr; its reply carries no body) to every member but this
 * server, one after the other, d->timeout_ms each; a member the failure detector finds down is
 * not called. failed(d, id, addr, rc, arg), if not NULL, for each member not reached: rc is
 * -EHOSTDOWN for a member found down, else chfsd_call's error. 0, or -ENOMEM (no one called). */
typedef void (*chfsd_peer_failed_fn)(struct chfsd *d, const char *id, const char *addr, int rc, void *arg);
int chfsd_call_peers(struct chfsd *d, struct wenc *e, chfsd_peer_failed_fn failed, void *arg);

#endif
