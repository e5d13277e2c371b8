/*
 * stage.h — the server side of stage-in (chfs_stagein, chfs_stagein_many): the requests that
 * make backend files CHFS entries and fetch their chunks, one file (STAGE_ENTRY/STAGE_DATA, in
 * handlers.c) or a batch of files (STAGE_ENTRIES/STAGE_FILES, stage.c). The fetching itself is
 * backend_cache.c's.
 */
#ifndef CHFSD_STAGE_H
#define CHFSD_STAGE_H

#include <stdint.h>

#include "wire.h"

struct chfsd;

/* Take over from their previous owners (a rebalance in progress) the chunks of [0, size) of
 * fileid this server owns — the ones a stage-in fetches here. 0 or -errno. */
int stage_take_owned(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, uint64_t size);
/* STAGE_ENTRIES: q->nitems paths; encodes u32 done, done x (i32 rc, md if 0). */
int stage_entries(struct chfsd *d, const struct wire_req *q, struct wenc *e);
/* STAGE_FILES: q->nitems files; encodes u64 fetched, u32 n, n x i32 rc. */
int stage_files(struct chfsd *d, const struct wire_req *q, struct wenc *e);

#endif
