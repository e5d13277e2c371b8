/*
 * statefile.h — a small state file in the storage directory, replaced whole (statefile.c).
 *
 * The server keeps a few text files beside its storage (DIR/members, DIR/rebalance,
 * DIR/orphans) that must survive a restart and must never be read half written. Each is
 * written to NAME.tmp and renamed over NAME, so a reader (the next start) sees the old or the
 * new content; `durable` also fsyncs the content before the rename.
 */
#ifndef CHFSD_STATEFILE_H
#define CHFSD_STATEFILE_H

#include <stdio.h>

/* Write DIR/name (rootfd: DIR) with fill(f, arg) — which returns 0 or -errno — via name.tmp.
 * 0, or -errno (then DIR/name is unchanged and no name.tmp is left). */
int statefile_write(int rootfd, const char *name, int durable, int (*fill)(FILE *f, void *arg), void *arg);

#endif
