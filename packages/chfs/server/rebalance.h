/*
 * rebalance.h — moving keys when the member set changes (a server joins or leaves).
 *
 * The member list carries the ring history: ring_epoch (the epoch at which the member set last
 * changed) and the list before that change. From the two rings every server knows, for any
 * key, its previous owner and its new one. Keys move by the new owner TAKING them: before a
 * request touches a key (a namespace entry by path, a data chunk by file id and index), the
 * new owner asks the previous owner for it (MIG_GET_*), stores it, and tells the previous owner
 * to drop it (MIG_DROP_*), all under a per-key lock; then the request runs. A key taken, or
 * found absent, is remembered (the "done" set), so it is asked for once. The previous owner's
 * handover thread (handover.c) walks what it still holds and HINTs it to the new owners, which
 * take it the same way; when it holds nothing another server owns it says DONE to every member.
 * A new owner stops asking a previous owner once that one said DONE; the rebalance is over on a
 * server when every previous member said DONE.
 *
 * Why this order is safe: requests carry the sender's epoch and a server answers any request
 * older than its list with WIRE_ERETRY (the client refreshes and places it again), and a
 * server installs a list only when no request is running (the gate, a writer-preferring
 * rwlock held by every request for its duration). A MIG_GET carries the new owner's epoch, so
 * the previous owner has installed the new list — and finished every request placed with the
 * old one — before it answers: after a key was taken nobody writes it at the old place.
 */
#ifndef CHFSD_REBALANCE_H
#define CHFSD_REBALANCE_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct chfsd;
struct rebalance;

int rebalance_init(struct chfsd *d);
/* The member list now has a different ring (called with the gate held for writing). */
void rebalance_ring_changed(struct chfsd *d);
/* Publish the current ring and window on the fast-path page (start-up, after joining). */
void rebalance_publish(struct chfsd *d);
/* 1 while this server still takes keys from previous owners or hands keys over. */
int rebalance_active(struct chfsd *d);
/* One "key=value ..." status line (chlist -s); while a rebalance runs, waiting_for=ADDR(ID)
 * names the member it waits for. */
void rebalance_status(struct chfsd *d, char *buf, size_t size);

/* Before a request on a key (gate held for reading): take it over if it is still at its
 * previous owner. 0, or -EIO if that owner cannot be reached (the request fails: never served
 * from an incomplete copy). */
int rebalance_take_entry(struct chfsd *d, const char *path);
int rebalance_take_chunks(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag,
                          const struct wire_seg *seg, uint32_t nseg);
/* A DATA_TRUNCATE / DATA_REMOVE of fileid: a chunk taken later is cut to len / dropped. The
 * caller runs the operation between begin and end (they hold fileid's take lock). */
void rebalance_data_op_begin(struct chfsd *d, uint64_t fileid, uint64_t len, int remove);
void rebalance_data_op_end(struct chfsd *d, uint64_t fileid);

/* The MIG_* requests (gate held for reading). */
int rebalance_handle(struct chfsd *d, const struct wire_req *q, struct wenc *e);
/* A previous member said DONE for ring_epoch (-EAGAIN: a ring not installed here yet). */
int rebalance_set_done(struct chfsd *d, uint64_t ring_epoch, const char *id);
/* Write DIR/rebalance again (handover_pending changed). */
void rebalance_saved(struct chfsd *d);

/* handover.c: the thread that hands over what this server holds but no longer owns. */
int handover_start(struct chfsd *d);
void handover_kick(struct chfsd *d);
/* Graceful leave: leave the member list, hand every key over, say DONE. Blocks; 0 or -errno. */
int handover_leave(struct chfsd *d);
void handover_stop(struct chfsd *d);
/* The member the last handover pass could not finish with ("ADDR(ID)"; "" if none). */
void handover_blocked(char *buf, size_t size);
/* MIG_HINT: take every hinted key (from its previous owner). */
int handover_take_hinted(struct chfsd *d, const struct wire_req *q, struct wenc *e);

#endif
