/*
 * handlers.c — one function per wire op, called on the transport's worker threads.
 *
 * handle_admit() runs first, on the transport's progress thread: a request without the pool
 * secret (compared in constant time) is dropped before the transport keeps any state for its
 * claimed sender or replies to it. handle_request() decodes and validates the whole request
 * (wire_decode_req), checks the secret again, dispatches, and sends exactly one reply: header
 * with status 0 or -errno, then the op's reply body. Each worker thread keeps its own request
 * struct and reply buffer (and, in bulk_io.c, its piece buffers), allocated on first use, so
 * handlers never allocate per request.
 *
 * Bulk data: WRITE and READ move RMA data piece by piece between the client and the backing
 * file (bulk_io.h: pipelined with the asynchronous storage I/O engine, io_engine.h). Inline data
 * is written straight from / read straight into the message buffers, through the same engine.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "bulk_io.h"
#include "data_store.h"
#include "fence.h"
#include "flush_meta.h"
#include "chfsd.h"
#include "find.h"
#include "inode.h"
#include "io_engine.h"
#include "moved.h"
#include "open_leases.h"
#include "orphans.h"
#include "relink.h"
#include "stage.h"

#include "log.h"
#include "placement.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct worker {
	struct wire_req req;
	uint8_t *rep;
	size_t repcap;
};

static __thread struct worker *tls_worker;

static struct worker *worker_get(struct chfsd *d)
{
	if (!tls_worker) {
		struct worker *w = calloc(1, sizeof *w);
		if (!w)
			return NULL;
		w->repcap = xprt_max_msg(d->x);
		w->rep = malloc(w->repcap);
		if (!w->rep) {
			free(w);
			return NULL;
		}
		tls_worker = w;
	}
	return tls_worker;
}

/* The protocol's RMA descriptor as the transport takes it. */
static struct xprt_rma_desc rma_desc(const struct wire_req *q)
{
	return (struct xprt_rma_desc){.addr = q->rma.addr, .key = q->rma.key, .len = q->rma.len};
}

/* " ops=NAME:N,..." (the ops served, by name; status): what each access costs in requests.
 * Only whole entries: one that does not fit in the line is left out, not cut. */
static void ops_status(struct chfsd *d, char *line, size_t size)
{
	size_t n = strlen(line);
	const char *sep = " ops=";
	for (unsigned op = 1; op < WOP_MAX && n < size; op++) {
		unsigned long long k = atomic_load(&d->op_requests[op]);
		if (!k)
			continue;
		int w = snprintf(line + n, size - n, "%s%s:%llu", sep, wire_op_name(op), k);
		if (w < 0 || (size_t)w >= size - n) {
			line[n] = '\0';
			continue;
		}
		n += (size_t)w;
		sep = ",";
	}
}

static int do_write(struct chfsd *d, xprt_req_t *r, struct wire_req *q, struct worker *w, struct wenc *e)
{
	brelink_map(d, q->fileid, q->path, sizeof q->path); /* opened before a rename reached the backend */
	int rc = rebalance_take_chunks(d, q->fileid, &q->tag, q->seg, q->nseg);
	for (uint32_t i = 0; i < q->nseg && rc == 0; i++) /* a backend file: its chunks first */
		rc = bcache_ensure(d, q->fileid, &q->tag, q->path, q->seg[i].off, q->seg[i].len);
	if (rc)
		return rc;
	int fd = st_data_open_tagged(d->st, q->fileid, &q->tag);
	if (fd < 0)
		return fd;
	const uint8_t *src = q->data;
	const struct xprt_rma_desc rd = rma_desc(q);
	for (uint32_t i = 0; i < q->nseg && rc == 0; i++) {
		const struct wire_seg *s = &q->seg[i];
		if (!q->has_rma) {
			rc = ioe_pwrite(fd, src, s->len, s->off);
			src += s->len;
			continue;
		}
		rc = bulk_write_seg(r, &rd, s->bufoff, fd, s->off, s->len);
	}
	close(fd);
	if (rc == 0) /* dirty before the reply: a crash after it still flushes (flush.c) */
		rc = bflush_note_write(d, q->fileid, &q->tag, q->path, q->seg, q->nseg);
	if (rc == 0)
		wenc_u64(e, q->seg_total);
	if (rc == 0 && q->h.op == WOP_WRITE_REPORT) { /* the writer's size report, data written */
		struct wire_setattr set = {.which = WIRE_SET_SIZE_MAX, .size = q->size};
		int reported = st_setattr(d->st, q->path2, q->fileid, &set, &q->md);
		if (reported == 0 && S_ISREG(q->md.mode)) /* as the close's SETATTR: the new mtime */
			bmeta_note_written(d, q->path2);  /* reaches the backend after the data */
		wenc_u32(e, (uint32_t)reported);
	}
	return rc;
}

static int do_read(struct chfsd *d, xprt_req_t *r, struct wire_req *q, struct worker *w, struct wenc *e)
{
	brelink_map(d, q->fileid, q->path, sizeof q->path);
	int fd = rebalance_take_chunks(d, q->fileid, &q->tag, q->seg, q->nseg);
	for (uint32_t i = 0; i < q->nseg && fd == 0; i++) /* a backend file: fetch what is not here */
		fd = bcache_ensure(d, q->fileid, &q->tag, q->path, q->seg[i].off, q->seg[i].len);
	if (fd == 0)
		fd = st_data_open(d->st, q->fileid, 0);
	if (fd < 0 && fd != -ENOENT)
		return fd;
	uint8_t *gotp = wenc_reserve(e, 4 + 8 * (size_t)q->nseg);
	const struct xprt_rma_desc rd = rma_desc(q);
	/* RMA reads go out from mappings of the file (bulk_io.h): keep it from shrinking. A
	 * node-local file's users may truncate it themselves: not mapped over libfabric. */
	const int pinned = fd >= 0 && q->has_rma && !(q->tag.flags & MD_LOCAL);
	if (pinned)
		st_data_shrink_hold(d->st);
	uint8_t *data = NULL;
	int rc = 0;
	if (!gotp)
		rc = -EMSGSIZE;
	if (rc == 0 && !q->has_rma) {
		if (q->seg_total > e->cap - e->len - 4)
			rc = -EMSGSIZE;
		else {
			wenc_u32(e, (uint32_t)q->seg_total);
			data = wenc_reserve(e, q->seg_total);
		}
	}
	for (uint32_t i = 0; i < q->nseg && rc == 0; i++) {
		const struct wire_seg *s = &q->seg[i];
		uint64_t got = 0;
		if (fd >= 0 && !q->has_rma) {
			ssize_t k = ioe_pread(fd, data, s->len, s->off);
			if (k < 0)
				rc = (int)k;
			else
				got = (uint64_t)k;
			if (got < s->len)
				memset(data + got, 0, s->len - got);
			data += s->len;
		} else if (fd >= 0) {
			rc = bulk_read_seg(r, &rd, s->bufoff, fd, s->off, s->len, pinned, &got);
		} else if (!q->has_rma) {
			memset(data, 0, s->len);
			data += s->len;
		}
		for (int b = 0; b < 8; b++)
			gotp[4 + 8 * i + b] = (uint8_t)(got >> (8 * b));
	}
	if (gotp)
		for (int b = 0; b < 4; b++)
			gotp[b] = (uint8_t)(q->nseg >> (8 * b));
	if (pinned)
		st_data_shrink_release(d->st);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The local-file size rule, kept here only: a local-placement file's size and mtime come from
 * its backing file too, since direct writes through chfs_local_backing_path() bypass the
 * metadata. The owner applies it when the backing file is here (merge_local); when the home is
 * another server the client sends the metadata's values there (WOP_DATA_STAT). */
static void merge_backing(struct chfsd *d, struct chfs_md *md)
{
	uint64_t size;
	int64_t mtime;
	if (st_data_stat(d->st, md->fileid, &size, &mtime) == 0) {
		if (size > md->size)
			md->size = size;
		/* The backing file's mtime counts only if its data changed after the last
		 * metadata change: an explicit utimens (tar, cp -p) must stick. The kernel stamps
		 * the backing file from its clock tick, so a direct write within the tick of the
		 * utimens is taken as older than it (as Linux keeps one mtime within a tick). */
		if (mtime > md->mtime_ns && mtime > md->ctime_ns)
			md->mtime_ns = mtime;
	}
}

static void merge_local(struct chfsd *d, struct chfs_md *md)
{
	if ((md->flags & MD_LOCAL) && strcmp(md->home, d->self) == 0)
		merge_backing(d, md);
}

struct rd_ctx {
	struct wenc *e;
	uint32_t n;
	size_t budget;
};

static int rd_entry(void *arg, const char *name, const struct chfs_md *md)
{
	struct rd_ctx *c = arg;
	if (c->e->len + strlen(name) + 32 > c->budget)
		return 1;
	wenc_str(c->e, name);
	wenc_u32(c->e, md->mode);
	wenc_u64(c->e, md->size);
	wenc_i64(c->e, md->mtime_ns);
	c->n++;
	return 0;
}

int chfsd_data_remove(struct chfsd *d, uint64_t fileid)
{
	rebalance_data_op_begin(d, fileid, 0, 1);
	bcache_remove(d, fileid);
	bflush_forget(d, fileid); /* removed from CHFS: nothing to flush */
	brelink_forget(d, fileid);
	int rc = st_data_remove(d->st, fileid);
	rebalance_data_op_end(d, fileid);
	return rc;
}

static int dispatch(struct chfsd *d, xprt_req_t *r, struct wire_req *q, struct worker *w, struct wenc *e)
{
	struct chfs_md md, old;
	struct wire_setattr set;
	int rc = 0, flag = 0;

	switch (q->h.op) {
	case WOP_NODE_LIST:
	case WOP_JOIN: {
		if (q->h.op == WOP_JOIN) {
			int changed = members_add(d, q->id, q->addr);
			if (changed < 0)
				return changed;
			if (changed) {
				log_notice("server %s (%s) joined the pool", q->addr, q->id);
				members_changed(d);
			}
		}
		members_put_list(&d->mem, e);
		return 0;
	}
	case WOP_REJOINED: members_rejoined(&d->mem, q->id); return 0;
	case WOP_SET_LIST:
		rc = members_set(d, q->epoch, q->vnodes, q->list, q->list_len, q->ring_epoch, q->prev,
		                 q->prev_len);
		return rc < 0 ? rc : 0;
	case WOP_STATUS: {
		char line[1024];
		uint64_t files = 0, bytes = 0;
		rebalance_status(d, line, sizeof line);
		bflush_status(d, line, sizeof line);
		st_data_usage(d->st, &files, &bytes); /* (a failed walk reports what it counted) */
		size_t n = strlen(line);
		snprintf(line + n, sizeof line - n, " stored_files=%llu stored_bytes=%llu requests=%llu",
		         (unsigned long long)files, (unsigned long long)bytes,
		         (unsigned long long)atomic_load(&d->requests));
		orphans_status(line, sizeof line);
		oleases_status(line, sizeof line);
		fence_status(line, sizeof line);
		ops_status(d, line, sizeof line);
		wenc_str(e, line);
		return 0;
	}
	case WOP_FLUSH_ERRORS: return bflush_errors(d, e, WIRE_HDR_LEN + WIRE_READDIR_MAX);
	case WOP_MIG_GET_ENTRY:
	case WOP_MIG_DROP_ENTRY:
	case WOP_MIG_GET_DATA:
	case WOP_MIG_DROP_DATA:
	case WOP_MIG_HINT:
	case WOP_MIG_DONE: return rebalance_handle(d, q, e);
	case WOP_CREATE:
		md = q->md;
		md.flags &= ~(uint32_t)MD_PATHED; /* the server's to set: */
		if (d->bk && S_ISREG(md.mode)) {
			md.flags |= MD_FLUSH; /* written data go to the backend at this path */
			if (strlen(q->path) >= sizeof md.link)
				return -ENAMETOOLONG; /* (fenced() refused it already) */
			memcpy(md.link, q->path, strlen(q->path) + 1);
		}
		bmeta_settle(d, q->path);        /* a pending unlink of path reaches the backend first */
		backend_materialise(d, q->path); /* a backend file exists: EEXIST, then it is opened */
		rc = st_create(d->st, q->path, &md, q->flags & WIRE_CREATE_EXCL, &old, &flag);
		if (rc == 0 && !flag)
			bmeta_note_create(d, q->path, &md);
		if (rc == 0 && (q->flags & WIRE_CREATE_LEASE) && S_ISREG(old.mode) &&
		    !(old.flags & MD_LINKED))
			oleases_add(wire_lease_client(&q->h), old.fileid);
		if (rc == 0) {
			wenc_u32(e, (uint32_t)flag);
			wenc_md(e, &old);
		}
		return rc;
	case WOP_STAT:
	case WOP_STAT_OPEN:
		if ((rc = st_lookup(d->st, q->path, &md)) == -ENOENT)
			rc = backend_lookup(d, q->path, &md);
		if (rc == 0 && q->h.op == WOP_STAT_OPEN && S_ISREG(md.mode) && !(md.flags & MD_LINKED))
			oleases_add(wire_lease_client(&q->h), md.fileid);
		if (rc == 0) {
			merge_local(d, &md);
			wenc_md(e, &md);
		}
		return rc;
	case WOP_MKDIR:
		bmeta_settle(d, q->path);
		/* a directory's identity (st_ino) for life, kept by renames, so that a process whose
		 * working directory or descriptor is inside one can follow it (moved.c); never the
		 * client's choice */
		q->md.fileid = ds_new_fileid();
		if ((rc = st_mkdir(d->st, q->path, &q->md)) == 0)
			bmeta_note(d, BM_MKDIR, q->path, NULL);
		return rc;
	case WOP_RMDIR:
		if ((rc = st_rmdir(d->st, q->path)) == -ENOENT && backend_lookup(d, q->path, &md) == 0)
			rc = S_ISDIR(md.mode) ? 0 : -ENOTDIR; /* a directory only the backend has */
		if (rc == 0)
			bmeta_note(d, BM_RMDIR, q->path, NULL);
		return rc;
	case WOP_DIR_EMPTY:
		/* the fence first: a create it does not refuse has stored its entry (fence.c) */
		if (q->flags == WIRE_FENCE_SET && (rc = fence_set(q->path, q->dirid)) < 0)
			return rc;
		if (q->flags == WIRE_FENCE_LIFT)
			fence_lift(q->path, q->dirid);
		rc = st_dir_has_entries(d->st, q->path);
		if (rc >= 0)
			wenc_u32(e, (uint32_t)rc);
		return rc < 0 ? rc : 0;
	case WOP_READDIR: {
		uint8_t *hdr = wenc_reserve(e, 8);
		struct rd_ctx c = {.e = e, .n = 0, .budget = WIRE_HDR_LEN + WIRE_READDIR_MAX};
		int eof = 1;
		if (c.budget > e->cap)
			c.budget = e->cap;
		rc = backend_readdir(d, q->path, q->path2, rd_entry, &c, &eof); /* CHFS's + backend's */
		if (rc == 0 && hdr) {
			for (int b = 0; b < 4; b++) {
				hdr[b] = (uint8_t)(c.n >> (8 * b));
				hdr[4 + b] = (uint8_t)((uint32_t)eof >> (8 * b));
			}
		}
		return rc;
	}
	case WOP_UNLINK:
		backend_materialise(d, q->path); /* a backend file: an entry to remove */
		if ((rc = st_unlink(d->st, q->path, &md)) == -ENOENT && backend_lookup(d, q->path, &md) == 0)
			rc = S_ISDIR(md.mode) ? -EISDIR : 0; /* a symlink only the backend has */
		if (rc == 0) {
			bmeta_note(d, BM_UNLINK, q->path, NULL);
			oleases_on_remove(q, &md);
			wenc_md(e, &md);
		}
		return rc;
	case WOP_INSERT:
		bmeta_settle(d, q->path);
		rc = st_insert(d->st, q->path, &q->md, q->flags & WIRE_INSERT_NOREPLACE, &old, &flag);
		if (rc == 0 && (S_ISREG(q->md.mode) || S_ISDIR(q->md.mode)) && !(q->flags & WIRE_INSERT_LINK))
			moved_note(q->md.fileid, q->path); /* a rename's new name (see moved.c) */
		if (rc == 0 && !(q->flags & WIRE_INSERT_LINK))
			bmeta_note_rename(d, NULL, q->path, &q->md);
		if (rc == 0 && flag && old.fileid != q->md.fileid)
			oleases_on_remove(q, &old);
		if (rc == 0) {
			wenc_u32(e, (uint32_t)flag);
			wenc_md(e, &old);
		}
		return rc;
	case WOP_REMOVE_IF:
		flag = d->bk && st_lookup(d->st, q->path, &md) == 0; /* (for the backend only) */
		if ((rc = st_remove_if(d->st, q->path, q->fileid)) == 0 && flag)
			bmeta_note_rename(d, q->path, NULL, &md); /* the old name's half of a rename */
		return rc;
	case WOP_RENAME:
		bmeta_settle(d, q->path2);
		rc = st_rename(d->st, q->path, q->path2, &old, &flag);
		if (rc == 0 && st_lookup(d->st, q->path2, &md) == 0) {
			if (S_ISREG(md.mode) || S_ISDIR(md.mode))
				moved_note(md.fileid, q->path2);
			bmeta_note_rename(d, q->path, q->path2, &md);
		}
		if (rc == 0 && flag && old.fileid != md.fileid)
			oleases_on_remove(q, &old);
		if (rc == 0) {
			wenc_u32(e, (uint32_t)flag);
			wenc_md(e, &old);
		}
		return rc;
	case WOP_SETATTR:
		set = wire_req_setattr(q);
		rc = st_setattr(d->st, q->path, q->fileid, &set, &md);
		if (rc == 0 && S_ISREG(md.mode) && (q->which & WIRE_SET_SIZE))
			bmeta_note(d, BM_TRUNC, q->path, NULL);
		else if (rc == 0 && (q->which & (WIRE_SET_MODE | WIRE_SET_ATIME | WIRE_SET_MTIME |
		                                 WIRE_SET_UID | WIRE_SET_GID)))
			bmeta_note(d, S_ISREG(md.mode) ? BM_FATTR : BM_ATTR, q->path, NULL);
		else if (rc == 0 && S_ISREG(md.mode) && (q->which & WIRE_SET_SIZE_MAX))
			bmeta_note_written(d, q->path); /* its new mtime: on the backend after the data */
		if (rc == 0) {
			if (q->which & WIRE_SET_SIZE)
				st_data_truncate(d->st, md.fileid, q->size); /* local-placement home */
			merge_local(d, &md);
			wenc_md(e, &md);
		}
		return rc;
	case WOP_FIND: return find_handle(d->st, q, e);
	case WOP_INODE_GET:
	case WOP_INODE_PUT:
	case WOP_INODE_ADJUST:
	case WOP_INODE_SETATTR: return inode_handle(d, q, e);
	case WOP_STAGE_ENTRY:
		if ((rc = backend_stage_entry(d, q->path, q->flags, &md)) == 0)
			wenc_md(e, &md);
		return rc;
	case WOP_STAGE_DATA: {
		uint64_t fetched = 0;
		if ((rc = stage_take_owned(d, q->fileid, &q->tag, q->size)) < 0)
			return rc;
		brelink_map(d, q->fileid, q->path, sizeof q->path);
		if ((rc = bcache_stage(d, q->fileid, &q->tag, q->path, q->size, q->piece, &fetched)) == 0)
			wenc_u64(e, fetched);
		return rc;
	}
	case WOP_STAGE_ENTRIES: return stage_entries(d, q, e);
	case WOP_STAGE_FILES: return stage_files(d, q, e);
	case WOP_RELINK: return brelink_note(d, q->fileid, q->path);
	case WOP_META_SETTLE: bmeta_settle_here(d, q->path); return 0;
	case WOP_RELINK_OWED:
		if (q->h.epoch > members_epoch(&d->mem)) /* a member that joined: its debts first */
			members_catch_up(d, q->h.epoch); /* (relink_join.c) */
		brelink_deliver(d, *q->id ? q->id : NULL, q->addr);
		return 0;
	case WOP_FLUSH: return bflush_wait(d, e, WIRE_HDR_LEN + WIRE_READDIR_MAX, (int)q->flags);
	case WOP_WRITE:
	case WOP_WRITE_REPORT: return do_write(d, r, q, w, e);
	case WOP_READ: return do_read(d, r, q, w, e);
	case WOP_DATA_REMOVE: return chfsd_data_remove(d, q->fileid);
	case WOP_DATA_UNNAMED: bflush_unnamed(d, q->fileid, &q->tag); return 0;
	case WOP_UNNAMED_OWED: return bowed_unnamed(d, q->fileid, q->addr);
	case WOP_DATA_TRUNCATE:
		rebalance_data_op_begin(d, q->fileid, q->size, 0);
		rc = bcache_truncate(d, q->fileid, q->size);
		if (rc == 0)
			rc = st_data_truncate(d->st, q->fileid, q->size);
		rebalance_data_op_end(d, q->fileid);
		return rc;
	case WOP_ORPHAN_HOLD:
	case WOP_ORPHAN_DUE:
	case WOP_ORPHAN_DROP: return orphans_handle(d, q, e);
	case WOP_LEASE_RENEW: return oleases_renew(wire_lease_client(&q->h), q, e);
	case WOP_DATA_STAT:
		md = q->md;
		md.fileid = q->fileid;
		merge_backing(d, &md);
		wenc_u64(e, md.size);
		wenc_i64(e, md.mtime_ns);
		return 0;
	case WOP_LOCAL_PATH: {
		char p[4200];
		/* A backend file's chunks may not be fetched yet, and a striped file's direct writes
		 * would not mark its chunks dirty: both go through chfsd. A local file's changes are
		 * found by its backing file's size and mtime (flush_local.c). */
		if ((q->tag.flags & MD_BACKEND) || ((q->tag.flags & MD_FLUSH) && !(q->tag.flags & MD_LOCAL)))
			return -EOPNOTSUPP;
		brelink_map(d, q->fileid, q->path, sizeof q->path);
		if ((rc = st_data_path(d->st, q->fileid, &q->tag, p, sizeof p)) == 0)
			rc = bflush_note_local(d, q->fileid, &q->tag, q->path);
		if (rc == 0)
			wenc_str(e, p);
		return rc;
	}
	case WOP_SYNC: return syncfs(st_rootfd(d->st)) < 0 ? -errno : 0;
	case WOP_MOVED: {
		int64_t when; /* (path2: free in a MOVED request) */
		if ((rc = moved_find(q->fileid, q->path2, sizeof q->path2, &when)) == 0) {
			wenc_i64(e, when);
			wenc_str(e, q->path2);
		}
		return rc;
	}
	}
	return -ENOSYS;
}

static __thread uint64_t reply_epoch;

static void reply_status(xprt_req_t *r, uint8_t *buf, const struct wire_hdr *rq, int status, size_t len)
{
	struct wire_hdr h = {.epoch = reply_epoch,
	                     .magic = WIRE_MAGIC,
	                     .version = WIRE_VERSION,
	                     .op = (uint16_t)(rq->op | WIRE_REPLY),
	                     .reqid = rq->reqid,
	                     .body_len = (uint32_t)(len - WIRE_HDR_LEN),
	                     .status = status};
	wire_hdr_put(buf, &h);
	xprt_reply(r, buf, len);
}

/* Requests that depend on the member list: placed by the sender with its ring (refused when
 * that is not this server's: WIRE_ERETRY), and their keys taken from a previous owner first
 * while a rebalance runs. Membership, status and node-local requests do not. */
static int placed(unsigned op)
{
	switch (op) {
	case WOP_NODE_LIST:
	case WOP_JOIN:
	case WOP_SET_LIST:
	case WOP_REJOINED:
	case WOP_STATUS:
	case WOP_SYNC:
	case WOP_FLUSH:
	case WOP_RELINK:
	case WOP_ORPHAN_HOLD: /* renewed where the holder registered it, whatever the ring says */
	case WOP_ORPHAN_DROP:
	case WOP_ORPHAN_DUE:  /* a removal owed: kept wherever the client could reach */
	case WOP_LEASE_RENEW: /* every server the client holds leases at, whatever the ring says */
	case WOP_META_SETTLE:
	case WOP_RELINK_OWED:
	case WOP_UNNAMED_OWED: /* a debt: kept wherever the client could reach */
	case WOP_FLUSH_ERRORS:
	case WOP_MOVED:
	case WOP_LOCAL_PATH:
	case WOP_FIND: /* whatever this server holds; a long walk must not hold the ring gate */
	case WOP_DATA_STAT: return 0;
	default: return 1;
	}
}

static int is_mig(unsigned op) { return op >= WOP_MIG_GET_ENTRY && op <= WOP_MIG_DONE; }

static int take_keys(struct chfsd *d, const struct wire_req *q)
{
	switch (q->h.op) {
	case WOP_CREATE:
	case WOP_STAT:
	case WOP_STAT_OPEN:
	case WOP_MKDIR:
	case WOP_RMDIR:
	case WOP_UNLINK:
	case WOP_INSERT:
	case WOP_REMOVE_IF:
	case WOP_SETATTR:
	case WOP_STAGE_ENTRY: return rebalance_take_entry(d, q->path);
	case WOP_WRITE_REPORT: return rebalance_take_entry(d, q->path2); /* (chunks: do_write) */
	case WOP_RENAME: {
		int rc = rebalance_take_entry(d, q->path);
		return rc ? rc : rebalance_take_entry(d, q->path2);
	}
	}
	if (inode_op(q->h.op)) {
		char key[WIRE_INODE_KEY_LEN + 1];
		inode_req_key(q, key);
		return rebalance_take_entry(d, key);
	}
	return 0; /* READ and WRITE take their chunks in do_read/do_write */
}

/* The name a request adds below a directory (fence.h), NULL if it adds none. */
static const char *added_name(const struct wire_req *q)
{
	switch (q->h.op) {
	case WOP_CREATE:
	case WOP_MKDIR:
	case WOP_INSERT: return q->path;
	case WOP_RENAME: return q->path2;
	}
	return NULL;
}

/* dispatch, for a request that adds a name under the fence's read side (fence.c). */
static int fenced(struct chfsd *d, xprt_req_t *r, struct wire_req *q, struct worker *w, struct wenc *e)
{
	const char *name = added_name(q);
	if (!name)
		return dispatch(d, r, q, w, e);
	/* The backend reaches each name in one system call (backend.c): a name it would refuse is
	 * refused here, before CHFS holds data or a name that could never reach it. */
	if (d->bk && strlen(name) >= CHFS_LINK_MAX)
		return -ENAMETOOLONG;
	int rc = fence_enter(name, q->dirid);
	if (rc == 0) {
		rc = dispatch(d, r, q, w, e);
		fence_leave();
	}
	return rc;
}

static int gated(struct chfsd *d, xprt_req_t *r, struct wire_req *q, struct worker *w, struct wenc *e)
{
	if (!placed(q->h.op))
		return dispatch(d, r, q, w, e);
	if (q->h.epoch > members_epoch(&d->mem))
		members_catch_up(d, q->h.epoch);
	pthread_rwlock_rdlock(&d->mem.gate);
	uint64_t epoch = members_epoch(&d->mem);
	int rc;
	if (epoch == 0 || (!is_mig(q->h.op) && q->h.epoch != epoch))
		rc = WIRE_ERETRY;    /* (epoch 0: still joining, not a member yet) */
	else if (q->h.epoch > epoch) /* a MIG_* of a ring not installed here (catch-up failed): */
		rc = WIRE_ERETRY;    /* a HINT would be "taken" as nothing and dropped by its sender */
	else if ((rc = take_keys(d, q)) == 0)
		rc = fenced(d, r, q, w, e);
	pthread_rwlock_unlock(&d->mem.gate);
	return rc;
}

int handle_admit(const void *msg, size_t len, void *arg)
{
	struct chfsd *d = arg;
	struct wire_hdr h;
	if (wire_hdr_get(msg, len, &h) == 0 && secret_equal(h.secret, d->secret))
		return 1;
	/* The sender's address is only claimed: no reply, and at most one log line a second. */
	static _Atomic long last;
	long now = (long)time(NULL);
	if (atomic_exchange(&last, now) != now)
		log_warn("refused a request: wrong or missing pool secret, or malformed (no reply sent)");
	return 0;
}

void handle_request(xprt_req_t *r, void *arg)
{
	struct chfsd *d = arg;
	struct worker *w = worker_get(d);
	uint8_t small[WIRE_HDR_LEN];
	reply_epoch = members_epoch(&d->mem);
	size_t len;
	const void *msg = xprt_req_data(r, &len);
	if (!w) {
		struct wire_hdr h = {.op = WOP_NODE_LIST};
		reply_status(r, small, &h, -ENOMEM, WIRE_HDR_LEN);
		return;
	}
	struct wire_req *q = &w->req;
	int rc = wire_decode_req(msg, len, q);
	if (rc == 0 && !secret_equal(q->h.secret, d->secret)) {
		log_warn("refused %s from %s: wrong or missing pool secret", wire_op_name(q->h.op),
		         xprt_req_peer_addr(r));
		rc = -EACCES;
	}
	if (rc) {
		if (rc != -EACCES)
			log_info("malformed request from %s: %s", xprt_req_peer_addr(r), strerror(-rc));
		struct wire_hdr h;
		if (wire_hdr_get(msg, len, &h) != 0)
			h = (struct wire_hdr){.op = WOP_NODE_LIST};
		reply_status(r, small, &h, rc, WIRE_HDR_LEN);
		return;
	}
	atomic_fetch_add(&d->requests, 1);
	atomic_fetch_add_explicit(&d->op_requests[q->h.op], 1, memory_order_relaxed);
	struct wenc e;
	wenc_init(&e, w->rep, w->repcap);
	wenc_reserve(&e, WIRE_HDR_LEN);
	rc = gated(d, r, q, w, &e);
	if (rc == 0 && e.err)
		rc = e.err;
	log_debug("%s %s -> %d", wire_op_name(q->h.op), q->path, rc);
	reply_status(r, w->rep, &q->h, rc, rc ? WIRE_HDR_LEN : e.len);
}

/* ---- small requests answered on the transport's progress thread (xprt_serve_inline) ----
 * A STAT (and a linked file's INODE_GET, the same look-up by its inode key), the commonest metadata request (one hash lookup in the in-memory namespace), is
 * answered where it arrived, without the hand-off to a worker and back, when nothing in it can
 * block: no backend to read through on a miss, the sender's ring epoch current, the ring gate
 * free without waiting (a member change holds it for writing while it calls other servers), and
 * no rebalance taking keys from previous owners (both stable while we hold the gate). Anything
 * else returns 0 untouched and a worker handles it in full, as before. */
struct inline_ctx {
	struct wire_req req;
	struct chfs_md md;
	uint8_t rep[WIRE_HDR_LEN + 2 * CHFS_PATH_MAX];
};

int handle_inline(xprt_req_t *r, void *arg)
{
	static __thread struct inline_ctx *t;
	struct chfsd *d = arg;
	size_t len;
	const void *msg = xprt_req_data(r, &len);
	struct wire_hdr h;
	if (d->bk || wire_hdr_get(msg, len, &h) != 0 ||
	    (h.op != WOP_STAT && h.op != WOP_STAT_OPEN && h.op != WOP_INODE_GET))
		return 0;
	if (!t && !(t = malloc(sizeof *t)))
		return 0;
	struct wire_req *q = &t->req;
	if (wire_decode_req(msg, len, q) != 0 || !secret_equal(q->h.secret, d->secret))
		return 0; /* the worker path logs and answers it */
	if (pthread_rwlock_tryrdlock(&d->mem.gate) != 0)
		return 0;
	uint64_t epoch = members_epoch(&d->mem);
	if (epoch == 0 || q->h.epoch != epoch || rebalance_active(d)) {
		pthread_rwlock_unlock(&d->mem.gate);
		return 0;
	}
	struct wenc e;
	wenc_init(&e, t->rep, sizeof t->rep);
	wenc_reserve(&e, WIRE_HDR_LEN);
	if (q->h.op == WOP_INODE_GET) /* a linked file's stat: its second request (inode.c) */
		inode_req_key(q, q->path);
	int rc = st_lookup(d->st, q->path, &t->md);
	if (rc == 0 && q->h.op == WOP_INODE_GET && t->md.fileid != q->fileid)
		rc = -ESTALE;
	if (rc == 0 && q->h.op == WOP_STAT_OPEN && S_ISREG(t->md.mode) && !(t->md.flags & MD_LINKED))
		oleases_add(wire_lease_client(&q->h), t->md.fileid);
	if (rc == 0) {
		if (q->h.op != WOP_INODE_GET)
			merge_local(d, &t->md);
		wenc_md(&e, &t->md);
		rc = e.err;
	}
	pthread_rwlock_unlock(&d->mem.gate);
	reply_epoch = epoch;
	atomic_fetch_add(&d->requests, 1); /* served: status's requests= counts it too */
	atomic_fetch_add_explicit(&d->op_requests[q->h.op], 1, memory_order_relaxed);
	log_debug("%s %s -> %d (inline)", wire_op_name(q->h.op), q->path, rc);
	reply_status(r, t->rep, &q->h, rc, rc ? WIRE_HDR_LEN : e.len);
	return 1;
}
