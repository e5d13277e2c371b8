/*
 * path.h — CHFS path canonicalisation and validation.
 *
 * A canonical CHFS path has no leading or trailing '/', no empty, "." or ".." components, and
 * the root is the empty string. Clients canonicalise what applications pass (resolving "." and
 * ".."; climbing above the root is an error, not a clamp); servers never trust that and re-check
 * every path they receive with path_check_canonical() before it names anything in storage.
 *
 * Limits: a path is at most CHFS_PATH_MAX-1 bytes (16,383) counted from the CHFS root, a component
 * at most CHFS_NAME_MAX bytes (255, Linux's NAME_MAX: the namespace lives in memory and in a
 * journal, so no on-disk name limits it). Linux bounds each path argument (4,095 bytes), not the
 * depth of a tree: programs reach deeper entries relative to a directory (openat, chdir), so the
 * CHFS bound is four times the kernel's per-argument one. A symlink target is at most
 * CHFS_LINK_MAX-1 bytes, the kernel's bound (symlink(2) refuses longer ones).
 */
#ifndef CHFS_PATH_H
#define CHFS_PATH_H

#include <stddef.h>
#include <stdlib.h>

#define CHFS_PATH_MAX 16384
#define CHFS_LINK_MAX 4096
#define CHFS_NAME_MAX 255

/* n path buffers of CHFS_PATH_MAX bytes each, on the heap and freed at the end of the scope:
 * the bound is larger than the 16 KiB frames libchfs and chfsd keep (tests/check-stack-usage:
 * client calls run on application threads, small stacks and sigaltstacks included). NULL if
 * the allocation failed; no goto may jump over the declaration. */
static inline void path_buf_free(char **p) { free(*p); }
#define PATH_BUF(name, n) \
	char *name __attribute__((cleanup(path_buf_free))) = malloc((size_t)(n)*CHFS_PATH_MAX)

/* Canonicalise `in` into out (capacity CHFS_PATH_MAX). Returns 0, -ENOENT for "", -EINVAL for a
 * path climbing above the root or whose first name starts with byte 1 (reserved for inode
 * records), -ENAMETOOLONG for an over-long component or path. */
int path_canonical(const char *in, char *out);
/* 0 if `p` (length len, not necessarily NUL-terminated) is canonical; root ("") allowed only if
 * allow_root. -EINVAL (NUL byte, empty/./.. component, leading or trailing '/') or
 * -ENAMETOOLONG. */
int path_check_canonical(const char *p, size_t len, int allow_root);
/* Split canonical `p` into parent (written to parent, capacity CHFS_PATH_MAX) and the last
 * component (returned, a pointer into p). The root has no parent: returns NULL. */
const char *path_split(const char *p, char *parent);
/* Join canonical dir and a name; -ENAMETOOLONG if too long. */
int path_join(const char *dir, const char *name, char *out);

#endif
