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

/* The ordered server list, persisted in DIR/members so a restarted server (the bootstrap one
 * included) comes back knowing the whole pool. Newer epochs win. */
struct members {
	pthread_mutex_t lock;
	uint64_t epoch;
	unsigned n;
	char **addrs; /* sorted with placement_sort_servers */
	int rootfd;   /* storage dir, for the state file */
};

struct chfsd {
	xprt_t *x;
	struct storage *st;
	struct members mem;
	uint8_t secret[CHFS_SECRET_LEN];
	char self[WIRE_ADDR_MAX];
	int timeout_ms;
};

int members_init(struct members *m, int rootfd, const char *self);
/* Add addr; 1 if the list changed (epoch bumped and saved), 0 if already present. */
int members_add(struct members *m, const char *addr);
/* Replace the list if epoch is newer; 1 if replaced. list is comma-joined (len bytes). */
int members_set(struct members *m, uint64_t epoch, const char *list, size_t len);
/* Comma-joined list into buf; returns the epoch. */
uint64_t members_get(struct members *m, char *buf, size_t size);
/* Tell every other server about the current list (best effort, bounded by timeout). */
void members_broadcast(struct chfsd *d, const char *except);
/* Join the pool through a bootstrap server. */
int members_join(struct chfsd *d, const char *bootstrap);

void handle_request(xprt_req_t *r, void *arg);
/* Admission (progress thread): only requests carrying the pool secret reach a worker. */
int handle_admit(const void *msg, size_t len, void *arg);
/* Build a request header+body for server-to-server calls. */
void chfsd_req_hdr(struct chfsd *d, struct wenc *e, unsigned op);

#endif
