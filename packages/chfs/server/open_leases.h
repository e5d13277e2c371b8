/*
 * open_leases.h — which clients have which files open, so that a file unlinked or renamed over
 * by one client outlives its name for the others (see open_leases.c).
 */
#ifndef CHFSD_OPEN_LEASES_H
#define CHFSD_OPEN_LEASES_H

#include "wire.h"

#include <stddef.h>
#include <stdint.h>

/* The lease in ms (chfsd --orphan-lease): a client that did not renew for it holds nothing. */
void oleases_init(int lease_ms);
/* Client `client` (wire_lease_client of its request) opened file fileid (WOP_STAT_OPEN, or
 * WOP_CREATE with WIRE_CREATE_LEASE); client 0 (an old client) records nothing. */
void oleases_add(uint32_t client, uint64_t fileid);
/* WOP_LEASE_RENEW of client q: renew all its leases, drop the closes it lists; answers the
 * lease in ms. Calls orphans_due() for a leased orphan whose last lease went. */
int oleases_renew(uint32_t client, const struct wire_req *q, struct wenc *e);
/* 1 if a client other than `client` holds a live lease on fileid. */
int oleases_others(uint64_t fileid, uint32_t client);
/* 1 if any client holds a live lease on fileid. */
int oleases_held(uint64_t fileid);
/* The record `removed` lost its name by q (UNLINK, or RENAME/INSERT replacing it): if another
 * client holds the file open, make it an orphan held by the open leases and set MD_HELD in
 * removed (the reply's copy). */
void oleases_on_remove(const struct wire_req *q, struct chfs_md *removed);
/* Forget the leases of clients that stopped renewing for a lease (heartbeat); calls
 * orphans_due() for each file that lost its last lease. */
void oleases_collect(void);
/* Append " open_leases=N" to line. */
void oleases_status(char *line, size_t size);

#endif
