/*
 * fence.c — closes the window in which a create lands below a directory that another client
 * is removing or renaming away (a "ghost" entry: stored under a name no listing shows).
 *
 * A client checks that a new entry's parent exists, and trusts that check for the rest of the
 * second (lib/namespace.c check_parent), before it asks the owner of the new name to add it.
 * The owner of the new name is not the owner of the parent, so nothing on the server side ties
 * the two. A removal (rmdir, or rename of a directory away from its name) first asks every
 * server whether it holds an entry below the directory (WOP_DIR_EMPTY); with WIRE_FENCE_SET
 * that question also fences the directory here: a request that adds a name directly below it
 * (CREATE, MKDIR, INSERT, RENAME's target) is answered ENOENT until the fence expires
 * (FENCE_MS) or the removing client lifts it because its removal failed. A client that gets
 * ENOENT for a create looks its parent up again instead of trusting its cache (and fails with
 * ENOENT once the directory is gone, as a local file system would).
 *
 * The fence keys on the directory's name and its file id (kept through renames, new for every
 * mkdir): a request carries the file id of the parent the client looked up, so a directory
 * made again under the same name (`rm -rf d; mkdir d; touch d/f`) is a different id and not
 * refused, while a client's stale view of the removed one is. A request without a parent id
 * (an older client) is refused by any fence of its parent's name. Only the direct parent is
 * checked: a directory can only be removed empty, and the walk that renames a non-empty one
 * (lib/dir_rename.c) removes, and so fences, each subdirectory before its parent.
 *
 * Why the check and the insertion are one step: a create that passed the check but had not
 * yet stored its entry when the fence went up would be missed by the emptiness check that
 * follows it. So a name-adding request holds `gate` for reading from its check through its
 * insertion, and fence_set takes it for writing (writer-preferring, so a stream of creates
 * cannot starve a removal): once set, every create either stored its entry already (the
 * emptiness check, made after fence_set, sees it) or sees the fence. The common case — no
 * fence anywhere — costs a creating request one uncontended read lock and one atomic load.
 *
 * Expiry: a client that dies between fencing and removal must not leave the name unusable;
 * entries expire after FENCE_MS and are swept when their bucket is written and by the
 * heartbeat (fence_sweep). The table is a fixed
 * array of buckets, each a short list; fences live seconds, so it stays small.
 */
#define _GNU_SOURCE
#include "fence.h"

#include "path.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FENCE_BUCKETS 256

struct fence {
	struct fence *next;
	uint64_t dirid;
	int64_t until_ms; /* CLOCK_MONOTONIC */
	char dir[];
};

static struct fence *buckets[FENCE_BUCKETS];
static atomic_uint standing; /* entries in buckets: 0 lets a create skip the lookup */
static pthread_rwlock_t gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned bucket_of(const char *dir)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)dir; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h % FENCE_BUCKETS;
}

/* Drop the expired entries of bucket b, and the one of (dir, dirid) when dir is not NULL
 * (gate held for writing). */
static void sweep(unsigned b, const char *dir, uint64_t dirid, int64_t now)
{
	for (struct fence **p = &buckets[b]; *p;) {
		struct fence *f = *p;
		if (f->until_ms <= now || (dir && f->dirid == dirid && strcmp(f->dir, dir) == 0)) {
			*p = f->next;
			free(f);
			atomic_fetch_sub(&standing, 1);
		} else {
			p = &f->next;
		}
	}
}

int fence_set(const char *dir, uint64_t dirid)
{
	size_t len = strlen(dir) + 1;
	struct fence *f = malloc(sizeof *f + len);
	if (!f)
		return -ENOMEM;
	unsigned b = bucket_of(dir);
	int64_t now = now_ms();
	f->dirid = dirid;
	f->until_ms = now + FENCE_MS;
	memcpy(f->dir, dir, len);
	pthread_rwlock_wrlock(&gate);
	sweep(b, dir, dirid, now); /* (a fence of it already: replaced, so renewed) */
	f->next = buckets[b];
	buckets[b] = f;
	atomic_fetch_add(&standing, 1);
	pthread_rwlock_unlock(&gate);
	return 0;
}

void fence_lift(const char *dir, uint64_t dirid)
{
	unsigned b = bucket_of(dir);
	pthread_rwlock_wrlock(&gate);
	sweep(b, dir, dirid, now_ms());
	pthread_rwlock_unlock(&gate);
}

int fence_enter(const char *path, uint64_t parent_id)
{
	pthread_rwlock_rdlock(&gate);
	if (atomic_load(&standing) == 0)
		return 0;
	PATH_BUF(parent, 1);
	if (!parent) {
		pthread_rwlock_unlock(&gate); /* (only a 0 leaves it to fence_leave) */
		return -ENOMEM;
	}
	if (!path_split(path, parent))
		return 0; /* the root: never removed */
	int64_t now = now_ms();
	for (const struct fence *f = buckets[bucket_of(parent)]; f; f = f->next) {
		if (f->until_ms > now && (parent_id == 0 || f->dirid == parent_id) &&
		    strcmp(f->dir, parent) == 0) {
			pthread_rwlock_unlock(&gate);
			return -ENOENT;
		}
	}
	return 0;
}

void fence_leave(void) { pthread_rwlock_unlock(&gate); }

void fence_sweep(void)
{
	if (atomic_load(&standing) == 0)
		return;
	int64_t now = now_ms();
	pthread_rwlock_wrlock(&gate);
	for (unsigned b = 0; b < FENCE_BUCKETS; b++)
		sweep(b, NULL, 0, now);
	pthread_rwlock_unlock(&gate);
}

void fence_status(char *line, size_t size)
{
	size_t n = strlen(line);
	if (n < size)
		snprintf(line + n, size - n, " fences=%u", atomic_load(&standing));
}
