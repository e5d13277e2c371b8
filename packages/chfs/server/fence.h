/*
 * fence.h — names below a directory being removed or renamed away are refused for a while
 * (see fence.c): the emptiness check a removal makes (WOP_DIR_EMPTY with WIRE_FENCE_SET) sets
 * the fence on every server, a failed removal lifts it (WIRE_FENCE_LIFT), and it expires by
 * itself after FENCE_MS.
 */
#ifndef CHFSD_FENCE_H
#define CHFSD_FENCE_H

#include <stddef.h>
#include <stdint.h>

/* Longer than a client trusts its last parent lookup (lib/namespace.c check_parent: the rest
 * of the second), so a create made on that trust arrives while the fence still stands. */
#define FENCE_MS 2000

/* Fence directory `dir` (canonical path) of file id dirid; an existing fence of it is renewed. */
int fence_set(const char *dir, uint64_t dirid);
/* Lift the fence of `dir` set for dirid (a removal that failed). */
void fence_lift(const char *dir, uint64_t dirid);
/* Before a request adds the name `path` whose parent the client saw with file id parent_id
 * (0: unknown): -ENOENT if that parent is fenced, else 0 and the request runs until
 * fence_leave() with no fence set meanwhile (a fence set after it finds its entry). */
int fence_enter(const char *path, uint64_t parent_id);
void fence_leave(void);
/* Drop every expired fence (the heartbeat, so that a burst of removals does not leave long
 * bucket lists for creates to walk once it is over). */
void fence_sweep(void);
/* Append " fences=N" (fences standing, expired ones not yet swept included) to line. */
void fence_status(char *line, size_t size);

#endif
