/*
 * shm_doorbell.h — a cross-process wake-up word for the shm provider.
 *
 * libfabric 1.17's shm provider has no CQ wait object (fi_cq_sread spins), so an idle progress
 * thread sleeps on a futex in a small shared-memory file named after its endpoint
 * (/dev/shm/chfs-xprt-db.<name>). A peer that posts work for it (a message, an RMA it must
 * progress) rings the bell — one atomic load when the sleeper is awake, one futex wake when it
 * sleeps. The sleeper announces itself before a final CQ check, so no wake-up is lost.
 */
#ifndef CHFS_SHM_DOORBELL_H
#define CHFS_SHM_DOORBELL_H

#include <stdatomic.h>
#include <stdint.h>

struct shm_doorbell {
	_Atomic uint32_t seq;      /* futex word: bumped by every ring */
	_Atomic uint32_t sleeping; /* nonzero while the owner sleeps or is about to */
	int32_t owner_pid;         /* for the sweep of files left by killed processes */
};

/* Create (owner) or open (peer) the doorbell of endpoint `name`; NULL on failure. */
struct shm_doorbell *shm_doorbell_create(const char *name);
struct shm_doorbell *shm_doorbell_open(const char *name);
/* Identity of the doorbell file now at `name` (its inode; 0 if absent): a restarted peer
 * recreates the file, so a changed identity means the old mapping is stale. */
unsigned long shm_doorbell_ident(const char *name);
/* Remove what processes that died without closing (SIGKILL, crash) left in /dev/shm: their
 * doorbell files and, when it is older than the doorbell, libfabric's shm region of the same
 * name (16 MiB of tmpfs memory each). A file counts as dead only if its owner pid no longer
 * exists. Called once per process, at the first shm xprt_open. */
void shm_doorbell_sweep(void);
/* Owner at close: unmap and remove the file. */
void shm_doorbell_destroy(struct shm_doorbell *db, const char *name);
void shm_doorbell_unmap(struct shm_doorbell *db);

/* Wake the owner if it sleeps. Cheap when it is awake. */
void shm_doorbell_ring(struct shm_doorbell *db);
/* Owner: sleep until rung or timeout_us passed; `seq` is the value read before the last check. */
void shm_doorbell_wait(struct shm_doorbell *db, uint32_t seq, long timeout_us);

#endif /* CHFS_SHM_DOORBELL_H */
