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
/* WOP_RELINK: record fileid's backend name and move its dirty entry there. 0 or -errno. */
int brelink_note(struct chfsd *d, uint64_t fileid, const char *path);
/* A data request's backend path (size bytes): replaced by fileid's backend name if a rename
 * moved the file after the client looked it up. */
void brelink_map(struct chfsd *d, uint64_t fileid, char *path, size_t size);
/* fileid's backend name into path (size bytes): 0, -ENOENT (no rename of it reached the
 * backend) or -ENAMETOOLONG. */
int brelink_name(struct chfsd *d, uint64_t fileid, char *path, size_t size);
/* fileid was removed from CHFS. */
void brelink_forget(struct chfsd *d, uint64_t fileid);

/* ---- relink_owed.c ---- */
/* Load STORAGE/bdirty/relink.owed (bdirty_fd: that directory). */
int bowed_init(int bdirty_fd);
/* The member at addr was not told fileid's new backend name: owed, durably. */
void bowed_add(struct chfsd *d, const char *addr, uint64_t fileid);
/* Send what is owed to addr (NULL: to every member), now; what fails stays owed. */
void brelink_deliver(struct chfsd *d, const char *addr);
/* At start-up, before flushing: ask every other member for what it owes this server. */
void brelink_pull(struct chfsd *d);

#endif
