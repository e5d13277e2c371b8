/*
 * stage.c — batched stage-in: STAGE_ENTRIES and STAGE_FILES (see wire.h).
 *
 * `find . | chstagein` of a thousand small files used to cost three requests per file (the
 * entry at the path's owner, then one data request to every server); a batch carries up to
 * WIRE_STAGE_MAX files, so the same tree costs a few requests per server. The work per file is
 * what the single-file requests do — backend_stage_entry, then bcache_stage of the chunks this
 * server owns (never a chunk already held: a written chunk is not overwritten) — and each file
 * gets its own status, so one missing or unreadable file fails alone and the client names it.
 * An ENTRIES reply carries a whole md per file: when the reply buffer cannot take the next one
 * the server stops there and says how many it did, and the client sends the rest again (an
 * entry made twice is found the second time). Both run under the ring gate (handlers.c's
 * gated), so the placement a batch was sent with holds for all of it.
 */
#define _GNU_SOURCE
#include "stage.h"

#include "backend.h"
#include "chfsd.h"
#include "rebalance.h"
#include "relink.h"

#include "placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A stage-in reaches every server with the whole file: take over from their previous owners only
 * the chunks this server owns (those bcache_stage fetches). A chunk taken by a server that does
 * not own it was punched at its owner, whose held-map still said held: the owner then served
 * zeros for a staged chunk (issue 12's flaky `find | xargs chstagein` while servers joined). */
int stage_take_owned(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag, uint64_t size)
{
	/* No rebalance open (in_open is set only by a ring change, which the ring gate holds off
	 * for the whole request): nothing to take — and no ownership lookup per chunk (two mutexes
	 * and a ring search each: 3 % of a server's time staging 1,000 x 1 MiB). */
	if (!rebalance_active(d))
		return 0;
	uint64_t cs = tag->chunk_size;
	for (uint64_t i = 0; size && i <= (size - 1) / cs; i++) {
		struct wire_seg s = {.off = i * cs, .len = cs};
		int rc = backend_owns(d, placement_chunk_key(tag->pkey, i))
		                 ? rebalance_take_chunks(d, fileid, tag, &s, 1)
		                 : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Bytes wenc_md writes for m (fixed fields, two strings, nlink). */
static size_t md_len(const struct chfs_md *m)
{
	return 6 * 4 + 5 * 8 + 4 + strlen(m->link) + 4 + strlen(m->home) + 4;
}

int stage_entries(struct chfsd *d, const struct wire_req *q, struct wenc *e)
{
	char *path = malloc(CHFS_PATH_MAX);
	struct chfs_md *md = malloc(sizeof *md);
	uint8_t *count = wenc_reserve(e, 4);
	int rc = !path || !md ? -ENOMEM : !count ? -EMSGSIZE : 0;
	struct wdec dec;
	wdec_init(&dec, q->items, q->items_len);
	uint32_t done = 0;
	for (; rc == 0 && done < q->nitems; done++) {
		if ((rc = wire_stage_path_get(&dec, path)) != 0)
			break; /* (validated by wire_decode_req: cannot happen) */
		int r = rebalance_take_entry(d, path);
		if (r == 0)
			r = backend_stage_entry(d, path, q->flags, md);
		if (e->cap - e->len < 4 + (r == 0 ? md_len(md) : 0))
			break; /* the reply is full: the client sends this one and the rest again */
		wenc_u32(e, (uint32_t)r);
		if (r == 0)
			wenc_md(e, md);
	}
	if (count)
		for (int i = 0; i < 4; i++)
			count[i] = (uint8_t)(done >> (8 * i));
	free(path);
	free(md);
	return rc;
}

int stage_files(struct chfsd *d, const struct wire_req *q, struct wenc *e)
{
	struct wire_stage_file *f = malloc(sizeof *f);
	int32_t *rcs = malloc(q->nitems * sizeof *rcs);
	if (!f || !rcs) {
		free(f);
		free(rcs);
		return -ENOMEM;
	}
	uint64_t total = 0;
	struct wdec dec;
	wdec_init(&dec, q->items, q->items_len);
	int rc = 0;
	for (uint32_t i = 0; i < q->nitems; i++) {
		uint64_t fetched = 0;
		if ((rc = wire_stage_file_get(&dec, f)) != 0)
			break; /* (validated by wire_decode_req: cannot happen) */
		int r = stage_take_owned(d, f->fileid, &f->tag, f->size);
		if (r == 0) {
			brelink_map(d, f->fileid, f->path, sizeof f->path);
			r = bcache_stage(d, f->fileid, &f->tag, f->path, f->size, q->piece, &fetched);
		}
		rcs[i] = r;
		total += fetched;
	}
	if (rc == 0) {
		wenc_u64(e, total);
		wenc_u32(e, q->nitems);
		for (uint32_t i = 0; i < q->nitems; i++)
			wenc_u32(e, (uint32_t)rcs[i]);
	}
	free(f);
	free(rcs);
	return rc;
}
