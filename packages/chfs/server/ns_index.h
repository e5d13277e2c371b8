/*
 * ns_index.h — the in-memory namespace of one server: every entry by canonical path in a hash
 * table, and the children of every directory in name order (a treap per directory), so a
 * lookup is O(1) and a readdir page after a cursor is O(log n + page).
 *
 * A node is an entry with a record (file, symlink or owned directory: the encoded record
 * bytes of record_codec.h) or an implicit directory (no record: it exists only because entries
 * below it are held here). Implicit directories are made on the way by nsi_set and removed as
 * soon as nothing is below them, so an implicit node always has a recorded descendant. The
 * root ("") always exists and never has a record.
 *
 * The index does no locking and no I/O (ns_store.c serialises writers and journals every
 * change before applying it here). Returns are 0 or -errno.
 */
#ifndef CHFSD_NS_INDEX_H
#define CHFSD_NS_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct ns_index;
struct ns_ent;

struct ns_index *nsi_new(void);
void nsi_free(struct ns_index *x);
size_t nsi_count(const struct ns_index *x); /* recorded entries */

/* The node at path (recorded or implicit), or NULL. */
struct ns_ent *nsi_find(const struct ns_index *x, const char *path);
const char *nsi_path(const struct ns_ent *e);
const char *nsi_name(const struct ns_ent *e); /* last component ("" for the root) */
/* The record bytes, or NULL (*len 0) for an implicit directory. */
const uint8_t *nsi_rec(const struct ns_ent *e, size_t *len);
/* S_IFDIR for an implicit directory, else the recorded mode. */
uint32_t nsi_mode(const struct ns_ent *e);
size_t nsi_nkids(const struct ns_ent *e);
/* The child of dir with the smallest name > after ("" gives the first), or NULL. */
struct ns_ent *nsi_next_child(const struct ns_ent *dir, const char *after);

/* -ENOTDIR if a proper ancestor of path holds a record that is not a directory. */
int nsi_check_parents(const struct ns_index *x, const char *path);
/* Give path the record (copied; mode is its S_IFMT|perm field), creating implicit parents. */
int nsi_set(struct ns_index *x, const char *path, const uint8_t *rec, size_t len, uint32_t mode);
/* Drop path's record: the node stays as an implicit directory if something is below it, else it
 * goes, and so do implicit parents left empty. No-op if path has no record. */
void nsi_clear(struct ns_index *x, const char *path);

/* Depth first from the root, a directory before its children, children in name order: calls
 * fn for every node (implicit ones too) until fn returns non-zero (returned). fn must not
 * change the index. */
typedef int (*nsi_visit_fn)(void *arg, const struct ns_ent *e);
int nsi_walk(const struct ns_index *x, nsi_visit_fn fn, void *arg);

#endif
