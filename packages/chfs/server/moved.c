/*
 * moved.c — a bounded, in-memory record of renames by file id, so a size report that lost
 * its file can find it again.
 *
 * A writer reports its highest written offset to the owner of the name it opened (SETATTR
 * SIZE_MAX with the path and the file id). When another process renamed the file meanwhile,
 * that report finds no entry (ENOENT) or another file (ESTALE). The server that took the new
 * name notes (file id -> new name) here; the writer then asks every server (WOP_MOVED) and
 * reports to the newest name it hears of, still checked by file id — so the size follows the
 * file, and an unlinked file (no entry under any name) is never brought back.
 *
 * Directories are noted too (they have file ids from mkdir on): a hooked process whose cwd
 * or directory descriptor is inside a renamed directory finds it again (lib/follow.c).
 *
 * The table is a ring of MOVED_SLOTS entries, newest replacing oldest, under one mutex (notes
 * happen on renames only, lookups only after a lost report). It is not persistent: a report
 * that races a rename and a restart of the new owner is lost — documented in doc/design.md.
 */
#define _GNU_SOURCE
#include "moved.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MOVED_SLOTS 1024

static struct {
	uint64_t fileid;
	int64_t when;
	char *path;
} slots[MOVED_SLOTS];
static unsigned next_slot;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void moved_note(uint64_t fileid, const char *path)
{
	char *copy = strdup(path);
	if (!copy || !fileid) {
		free(copy);
		return; /* best effort: a lost note only loses a racing size report */
	}
	pthread_mutex_lock(&lock);
	unsigned i;
	for (i = 0; i < MOVED_SLOTS && slots[i].fileid != fileid; i++)
		;
	if (i == MOVED_SLOTS)
		i = next_slot++ % MOVED_SLOTS;
	free(slots[i].path);
	slots[i].fileid = fileid;
	slots[i].path = copy;
	slots[i].when = now_ns();
	pthread_mutex_unlock(&lock);
}

int moved_find(uint64_t fileid, char *path, size_t size, int64_t *when)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; fileid && i < MOVED_SLOTS; i++) {
		if (slots[i].fileid == fileid && slots[i].path) {
			snprintf(path, size, "%s", slots[i].path);
			*when = slots[i].when;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}
