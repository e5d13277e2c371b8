/*
 * moved.h — where renamed files went, by file id (see moved.c).
 */
#ifndef CHFSD_MOVED_H
#define CHFSD_MOVED_H

#include <stddef.h>
#include <stdint.h>

/* Remember that file `fileid` now has the name `path` (this server took the new name). */
void moved_note(uint64_t fileid, const char *path);
/* The last name noted for fileid, and when (ns since the epoch): 0, or -ENOENT if none. */
int moved_find(uint64_t fileid, char *path, size_t size, int64_t *when);

#endif
