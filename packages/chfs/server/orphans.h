/*
 * orphans.h — the server-side list of files that outlive their name (WOP_ORPHAN_*; see
 * orphans.c).
 */
#ifndef CHFSD_ORPHANS_H
#define CHFSD_ORPHANS_H

#include "wire.h"

#include <stddef.h>

struct chfsd;

#define ORPHAN_LEASE_DEFAULT_MS 60000
/* Parse a lease in seconds ("60", "2.5"; 0.1 .. 86400) into *ms; -EINVAL if malformed. */
int orphans_parse_lease(const char *s, int *ms);
/* Load DIR/orphans (a restarted server gives every listed holder a full lease again) and use
 * lease_ms from now on. 0 or -errno. */
int orphans_open(struct chfsd *d, int lease_ms);
/* Answer a validated WOP_ORPHAN_HOLD/DUE/DROP request q into e; 0 or -errno. */
int orphans_handle(struct chfsd *d, const struct wire_req *q, struct wenc *e);
/* An UNLINK/RENAME/INSERT removed the name of fileid while other clients hold it open
 * (open_leases.c): keep its data until no open lease holds it. 0 or -errno. */
int orphans_adopt(uint64_t fileid, uint64_t size);
/* fileid lost its last open lease: if it is an orphan, remove its data at the next round. */
void orphans_due(uint64_t fileid);
/* The failure detector saw a member come back: removals it missed are due again at once. */
void orphans_member_up(void);
/* Remove the data of every orphan whose lease ran out (DATA_REMOVE to every member) and drop
 * it from the list; called by the heartbeat thread each round. */
void orphans_collect(struct chfsd *d);
/* Append " orphans=N orphan_bytes=B" (leases held here) to line. */
void orphans_status(char *line, size_t size);

#endif
