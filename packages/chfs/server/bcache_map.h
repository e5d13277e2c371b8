/*
 * bcache_map.h — the held-map of a backend file on this server (backend_cache.c): which of its
 * chunks this server holds, and its floor. Two stores read as one (bcache_map.c): the xattr
 * user.chfs.held of the backing file, and the map file STORAGE/bcache/<fileid>.
 */
#ifndef CHFSD_BCACHE_MAP_H
#define CHFSD_BCACHE_MAP_H

#include <stdint.h>

/* The map of one file, as one caller uses it: the map file once open (else -1), and the
 * backing file's fd when the caller has one (else -1: the xattr store is then not used). */
struct hmap {
	uint64_t fileid;
	int fd;
	int dfd;
};

/* Creates or opens the map directory STORAGE/bcache under rootfd. 0 or -errno. */
int hmap_dir_init(int rootfd);
void hmap_init(struct hmap *m, uint64_t fileid, int dfd);
/* Closes the map file (not dfd). */
void hmap_close(struct hmap *m);
/* 1 if chunk i is held, else 0; *floor (may be NULL): the smallest length the file was
 * truncated to (UINT64_MAX: none). */
int hmap_held(struct hmap *m, uint64_t i, uint64_t *floor);
/* Marks chunk i held. 0 or -errno. */
int hmap_mark(struct hmap *m, uint64_t i);
/* Lowers the floor to len (never raises it). 0 or -errno. */
int hmap_lower_floor(struct hmap *m, uint64_t len);
/* Forgets the whole map (the file removed from CHFS). */
void hmap_remove(struct hmap *m);

#endif
