/*
 * relink.h — where a file's data go on the backend once its rename reached it (relink.c).
 */
#ifndef CHFSD_RELINK_H
#define CHFSD_RELINK_H

#include <stddef.h>
#include <stdint.h>

struct chfsd;

/* Open STORAGE/bdirty/relink.log (bdirty_fd: that directory) and load the names it holds. */
int brelink_init(struct chfsd *d, int bdirty_fd);
/* A rename of fileid reached the backend: its backend name is path now. Tells every member
 * (this server directly); a member that cannot be reached is owed it (relink_owed.c). */
void brelink_announce(struct chfsd *d, uint64_t fileid, const char *path);
/* WOP_RELINK: record fileid's backend name and move its dirty entry there. 0 or -errno. An
 * empty name: the file lost its last name while descriptors keep its data (WOP_DATA_UNNAMED,
 * flush.c): nothing of it is flushed any more, here or, through the table, on a server that
 * joins later (relink_join.c owes it the whole table). */
int brelink_note(struct chfsd *d, uint64_t fileid, const char *path);
/* A data request's backend path (size bytes): replaced by fileid's backend name if a rename
 * moved the file after the client looked it up (not by an empty name: reads through it still
 * fetch from the old one until the removal reaches the backend). */
void brelink_map(struct chfsd *d, uint64_t fileid, char *path, size_t size);
/* Has fileid lost its last name (an empty name in the table)? */
int brelink_unnamed(uint64_t fileid);
/* fileid's backend name into path (size bytes): 0, -ENOENT (no rename of it reached the
 * backend) or -ENAMETOOLONG. */
int brelink_name(struct chfsd *d, uint64_t fileid, char *path, size_t size);
/* fileid was removed from CHFS. */
void brelink_forget(struct chfsd *d, uint64_t fileid);
/* The file ids the table holds (*n of them; NULL if out of memory), to free. */
uint64_t *brelink_ids(size_t *n);

/* ---- relink_owed.c ---- */
/* Load STORAGE/bdirty/relink.owed (bdirty_fd: that directory). */
int bowed_init(int bdirty_fd);
/* The member id (at addr) was not told fileid's new backend name: owed, durably. */
void bowed_add(struct chfsd *d, const char *id, const char *addr, uint64_t fileid);
/* The same for n files at once (one write of relink.owed). */
void bowed_add_all(struct chfsd *d, const char *id, const char *addr, const uint64_t *fileids, size_t n);
/* WOP_UNNAMED_OWED: the member at addr missed that fileid lost its last name (a client's
 * DATA_REMOVE or DATA_UNNAMED did not reach it). fileid's name here becomes empty and the
 * member is owed it. 0, -EINVAL (addr is no other member), -EOPNOTSUPP (no backend) or the
 * relink log's error. */
int bowed_unnamed(struct chfsd *d, uint64_t fileid, const char *addr);
/* Send what is owed to the member id, now at addr (id NULL: to the member at addr, an earlier
 * build's request; both NULL: to every member); what fails stays owed. Debts to members that
 * left the pool are dropped (logged). */
void brelink_deliver(struct chfsd *d, const char *id, const char *addr);
/* Before flushing (at start-up) and before handing keys over (a leave): ask every other member
 * for what it owes this server. */
void brelink_pull(struct chfsd *d);

/* ---- relink_gap.c ---- */
/* Start noting the time (after the start-up pull): a server resumed after a stop longer than a
 * second asks every member for its debts before it flushes again. */
int brelink_watch_start(struct chfsd *d);
/* End that thread (d->stopping set; it pulls once more if a stop just ended): nothing held. */
void brelink_watch_stop(void);
/* 1 if this server may flush now: it was not stopped since its last pull. */
int brelink_fresh(void);
/* Wait until it may (the thread is asking for the names it missed). Not with fl.lock held. */
void brelink_await(void);

/* ---- relink_join.c ---- */
/* The member set changed and the new list is installed; before: the list this server had
 * until then ("id=addr,...", NULL if it was only joining itself: then nothing). Every member
 * not in before is owed every backend name the table holds. Called before a JOIN is answered
 * and before WOP_RELINK_OWED is served after catching up with a newer list. */
void brelink_joined(struct chfsd *d, const char *before);

#endif
