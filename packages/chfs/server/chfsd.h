/*
 * chfsd.h — the server's shared state: one struct chfsd per process, built by chfsd.c, read by
 * the request handlers (handlers.c) and the membership module (membership.c).
 */
#ifndef CHFSD_H
#define CHFSD_H

#include <pthread.h>
#include <stdint.h>

#include "storage.h"
#include "wire.h"
#include "xprt.h"

/* The member list (see membership.c), persisted in DIR/members. Newer epochs win. */
struct members {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* wakes the broadcaster */
	uint64_t epoch;
	unsigned vnodes; /* the pool's ring parameter */
	unsigned n;
	struct wire_member *m; /* sorted by id */
	int rootfd;            /* storage dir, for the state file */
	int pending;           /* a SET_LIST push is due */
	char *down;            /* ids the failure detector considers down, "id,id" (heartbeat.c) */
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
};

/* This server's identity from DIR/server.id, created on first use. */
int members_self_id(int rootfd, char id[WIRE_ID_LEN + 1]);
/* A new pool of one: this server. */
int members_init(struct members *m, int rootfd, const char *id, const char *addr, unsigned vnodes);
/* Add (id, addr) or give id its new address; 1 if the list changed (epoch bumped, saved). */
int members_add(struct members *m, const char *id, const char *addr);
/* Replace the list if epoch is newer; 1 if replaced. list as in wire_list_parse. */
int members_set(struct members *m, uint64_t epoch, unsigned vnodes, const char *list, size_t len);
/* The list as a string into buf (size >= WIRE_LIST_MAX); returns the epoch. */
uint64_t members_get(struct members *m, char *buf, size_t size, unsigned *vnodes);
/* Start the thread that pushes the list to the other members after a change. */
int members_start_broadcaster(struct chfsd *d);
/* The list changed: have the broadcaster tell every other server (returns at once). */
void members_changed(struct chfsd *d);
/* Join the pool through a bootstrap server. */
int members_join(struct chfsd *d, const char *bootstrap);
/* Ids considered down (comma-joined) into buf; set by the failure detector. */
void members_get_down(struct members *m, char *buf, size_t size);
void members_set_down(struct members *m, const char *ids);

/* ---- heartbeat.c: the failure detector ---- */
int heartbeat_start(struct chfsd *d);

void handle_request(xprt_req_t *r, void *arg);
/* Admission (progress thread): only requests carrying the pool secret reach a worker. */
int handle_admit(const void *msg, size_t len, void *arg);
/* Build a request header+body for server-to-server calls. */
void chfsd_req_hdr(struct chfsd *d, struct wenc *e, unsigned op);

#endif
