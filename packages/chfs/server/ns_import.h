/*
 * ns_import.h — reads the namespace layout of earlier chfsd versions, one file per entry
 * under DIR/ns/ (a CHFS name "a/b" stored as ns/_a/_b holding its record; a directory's
 * record in ns/.../_d/.meta; a directory without .meta implicit), so a storage directory
 * written by them is imported once into the snapshot/journal format (ns_store.c) and its
 * pools keep their files. After the import the old tree is renamed to DIR/ns.imported (kept
 * for the operator to delete; never read again). Returns are 0 or -errno.
 */
#ifndef CHFSD_NS_IMPORT_H
#define CHFSD_NS_IMPORT_H

#include "wire.h"

/* 1 if DIR/ns exists (an old-layout namespace to import), 0 if not. */
int nsimp_present(int rootfd);
/* Calls fn for every record of the old tree (parents before children) until fn returns
 * non-zero (returned). A record that does not decode is skipped and counted in *bad. */
typedef int (*nsimp_fn)(void *arg, const char *path, const struct chfs_md *md);
int nsimp_load(int rootfd, nsimp_fn fn, void *arg, unsigned long *bad);
/* Rename DIR/ns to DIR/ns.imported (after the imported namespace is durable). */
int nsimp_retire(int rootfd);

#endif
