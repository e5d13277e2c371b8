/*
 * shm_doorbell.h — a cross-process wake-up word for the shm provider.
 *
 * libfabric 1.17's shm provider has no CQ wait object (fi_cq_sread spins), so an idle progress
 * thread sleeps on a futex in a small shared-memory file named after its endpoint
 * (/dev/shm/chfs-xprt-db.<name>). A peer that posts work for it (a message, an RMA it must
 * progress) rings the bell — one atomic load when the sleeper is awake, one futex wake when it
 * sleeps. The sleeper announces itself before a final CQ check, so no wake-up is lost.
 *
 * The file is also how peers find the current incarnation of an endpoint: libfabric 1.17's shm
 * cannot cope with a peer that comes back under the same endpoint name (its name-keyed peer map
 * keeps the old mapping and peer ids; fi_av_remove + fi_av_insert of the name leaves a half-mapped
 * entry, and the connection request of the new incarnation then crashes the old peers inside
 * fi_cq_read). So every incarnation gets a fresh libfabric name "<name>~<tag>", published here
 * as `epname`; the stable <name> is what addresses and member lists carry. `closed` is set by the
 * owner at close and by a successor before it replaces the file, so peers notice a restart with a
 * single load before each send.
 */
#ifndef CHFS_SHM_DOORBELL_H
#define CHFS_SHM_DOORBELL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct shm_doorbell {
	_Atomic uint32_t seq;      /* futex word: bumped by every ring */
	_Atomic uint32_t sleeping; /* nonzero while the owner sleeps or is about to */
	int32_t owner_pid;         /* for the sweep of files left by killed processes */
	_Atomic uint32_t closed;   /* nonzero: this incarnation is gone (closed or replaced) */
	char epname[128];          /* libfabric endpoint name of this incarnation */
};

/* Create (owner) or open (peer) the doorbell of endpoint `name`; NULL on failure. The owner
 * publishes its libfabric endpoint name `epname`; a predecessor's file is marked closed first. */
struct shm_doorbell *shm_doorbell_create(const char *name, const char *epname);
struct shm_doorbell *shm_doorbell_open(const char *name);
/* Identity of the doorbell file now at `name` (its inode; 0 if absent): a restarted peer
 * recreates the file, so a changed identity means the old mapping is stale. */
unsigned long shm_doorbell_ident(const char *name);
/* Who serves `name` on this node: 0 (this user), -EACCES (another user: *uid says who; shm
 * connects processes of one user only), -ENOENT (nobody), -EINVAL (not a name we use). */
int shm_doorbell_owner(const char *name, uid_t *uid);
/* Remove what processes that died without closing (SIGKILL, crash) left in /dev/shm: their
 * doorbell files and, when it is older than the doorbell, libfabric's shm region of the same
 * name (16 MiB of tmpfs memory each). A file counts as dead only if its owner pid no longer
 * exists. Called once per process, at the first shm xprt_open. */
void shm_doorbell_sweep(void);
/* Copy the published endpoint name; -1 if the file is not (yet) complete or is closed. */
int shm_doorbell_epname(const struct shm_doorbell *db, char *buf, size_t size);
/* Owner at close: mark closed, unmap and remove the file. */
void shm_doorbell_destroy(struct shm_doorbell *db, const char *name);
void shm_doorbell_unmap(struct shm_doorbell *db);

/* Wake the owner if it sleeps. Cheap when it is awake. */
void shm_doorbell_ring(struct shm_doorbell *db);
/* Owner: sleep until rung or timeout_us passed; `seq` is the value read before the last check. */
void shm_doorbell_wait(struct shm_doorbell *db, uint32_t seq, long timeout_us);

#endif /* CHFS_SHM_DOORBELL_H */
