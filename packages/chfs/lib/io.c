/*
 * io.c — the data path.
 *
 * A transfer [off, off+size) is cut at chunk boundaries; chunk i of a striped file lives on
 * the ring owner of (the file's placement key, i) (placement.h), every chunk of a local-placement
 * file on its home server. The pieces are grouped per server into one request each (a list of segments: logical offset, length,
 * offset in the caller's buffer; split only beyond WIRE_MAX_SEGS), so a 1 MiB call on 4 servers
 * costs 4 RPCs, and on one server (or a local file) a single RPC with one merged segment.
 *
 * A per-server request whose data is at most CHFS_RDMA_THRESH bytes (and fits a message) carries
 * the data inline; otherwise the caller's buffer is registered once for the call and the server
 * pulls (write) or pushes (read) it by RMA — no copy on the client. Requests to several servers
 * run concurrently when CHFS_ASYNC_ACCESS=1 or the call is larger than CHFS_RDMA_THRESH.
 *
 * Size reports: a write whose pieces include one for the owner of the file's name sends that
 * piece as WOP_WRITE_REPORT, which also records the write's end (and mtime) in the file's record
 * once the data are written. A descriptor whose every write so far ends at or below such a
 * report's end is not dirty: its close, fsync and stat send no SETATTR. Anything else (the
 * owner holds none of the pieces, the local fast path wrote them, a linked, renamed or orphan
 * file: the owner answers the report with an error) leaves the descriptor dirty as before, and
 * ns_report_size reports at close. Each report costs the owner a record update: a descriptor
 * reports on its first REPORT_EVERY writes, then on every REPORT_EVERY-th (a long stream of
 * small writes pays 1/REPORT_EVERY of them; its close reports unless its last write did).
 *
 * Reads: each segment reports how many bytes the server's backing file had ("got"); missing
 * bytes read as zeros (holes). Only if some segment came back short does the client ask the
 * owner for the file size, to return a short count at end of file.
 */
#define _GNU_SOURCE
#include "client.h"
#include "localguard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INLINE_MAX (64u * 1024)
#define REPORT_EVERY 16

struct piece {
	unsigned server;
	struct wire_seg seg;
};

struct ioreq {
	unsigned server;
	struct wire_seg *segs;
	uint32_t nseg;
	uint64_t total;
	int rma;
	uint8_t *msg, *rep;
	size_t msglen, repcap, replen;
	xprt_call_t *call;
	int rc;
	char *report; /* WOP_WRITE_REPORT: the file's name (this request goes to its owner), or NULL */
	uint64_t report_end;
};

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	if (x->server != y->server)
		return x->server < y->server ? -1 : 1;
	return x->seg.off < y->seg.off ? -1 : x->seg.off > y->seg.off;
}

/* Cut the transfer into per-server pieces (merged when contiguous on the same server). */
static int make_pieces(struct srvlist *s, const struct chfs_md *md, size_t size, uint64_t off,
                       struct piece **out, size_t *np)
{
	uint64_t cs = md->chunk_size ? md->chunk_size : 65536, end = off + size;
	int home = -1;
	if (md->flags & MD_LOCAL) {
		home = client_server_index(s, md->home);
		if (home < 0) {
			log_err("file's home server %s is not in the pool", md->home);
			return -EIO;
		}
	}
	size_t max = home >= 0 ? 1 : (size_t)((end - 1) / cs - off / cs + 1);
	struct piece *p = malloc(max * sizeof *p);
	if (!p)
		return -ENOMEM;
	size_t n = 0;
	if (home >= 0) {
		p[n++] = (struct piece){(unsigned)home, {off, size, 0}};
	} else {
		for (uint64_t pos = off; pos < end;) {
			uint64_t idx = pos / cs, cend = (idx + 1) * cs;
			uint64_t len = (cend < end ? cend : end) - pos;
			unsigned sv = placement_chunk_server(s->ring, md->pkey, idx);
			p[n++] = (struct piece){sv, {pos, len, pos - off}};
			pos += len;
		}
		if (s->n > 1)
			qsort(p, n, sizeof *p, cmp_piece);
		/* With one server all chunks are contiguous in one backing file: merge. */
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			if (m && p[m - 1].server == p[i].server &&
			    p[m - 1].seg.off + p[m - 1].seg.len == p[i].seg.off &&
			    p[m - 1].seg.bufoff + p[m - 1].seg.len == p[i].seg.bufoff)
				p[m - 1].seg.len += p[i].seg.len;
			else
				p[m++] = p[i];
		}
		n = m;
	}
	*out = p;
	*np = n;
	return 0;
}

static int build_msg(struct ioreq *q, const struct chfs_md *md, int is_write, const uint8_t *buf,
                     const struct xprt_rma_desc *desc, uint64_t epoch)
{
	size_t len = WIRE_HDR_LEN + 8 + 12 + (md->flags & MD_PATHED ? 4 + strlen(md->link) : 0) + 4 +
	             24 * (size_t)q->nseg + 4 + 24 + 4 + (is_write && !q->rma ? q->total : 0) +
	             (q->report ? 4 + strlen(q->report) + 8 : 0);
	q->repcap = WIRE_HDR_LEN + 16 + 8 * (size_t)q->nseg + (!is_write && !q->rma ? q->total : 0) + 4;
	q->msg = malloc(len);
	q->rep = malloc(q->repcap);
	if (!q->msg || !q->rep)
		return -ENOMEM;
	struct wenc e;
	wenc_init(&e, q->msg, len);
	wenc_reserve(&e, WIRE_HDR_LEN);
	if (q->report) {
		wenc_str(&e, q->report);
		wenc_u64(&e, q->report_end);
	}
	wire_tag_put(&e, md); /* file id + placement tag: lets the servers move chunks on a rebalance */
	wenc_u32(&e, q->nseg);
	for (uint32_t i = 0; i < q->nseg; i++) {
		wenc_u64(&e, q->segs[i].off);
		wenc_u64(&e, q->segs[i].len);
		wenc_u64(&e, q->segs[i].bufoff);
	}
	wenc_u32(&e, (uint32_t)q->rma);
	if (q->rma) {
		wenc_u64(&e, desc->addr);
		wenc_u64(&e, desc->key);
		wenc_u64(&e, desc->len);
	}
	if (is_write) {
		if (q->rma) {
			wenc_u32(&e, 0);
		} else {
			wenc_u32(&e, (uint32_t)q->total);
			for (uint32_t i = 0; i < q->nseg; i++)
				wenc_raw(&e, buf + q->segs[i].bufoff, q->segs[i].len);
		}
	}
	if (e.err)
		return -EIO;
	q->msglen = e.len;
	rpc_fill_hdr(q->msg, q->msglen,
	             q->report  ? WOP_WRITE_REPORT
	             : is_write ? WOP_WRITE
	                        : WOP_READ,
	             epoch);
	return 0;
}

/* Let the request to the owner of f's name carry the size report of a write ending at end
 * (see the top). Linked and orphan files have their attributes elsewhere: no report. */
static int plan_report(struct srvlist *s, struct chfs_file *f, struct ioreq *rq, size_t nrq, uint64_t end)
{
	pthread_mutex_lock(&f->lock);
	uint64_t n = f->writes++;
	int skip = f->orphan || (f->md.flags & MD_LINKED) || !f->md.fileid ||
	           (n >= REPORT_EVERY && n % REPORT_EVERY);
	char *path = skip ? NULL : strdup(f->path);
	pthread_mutex_unlock(&f->lock);
	if (skip)
		return 0;
	if (!path)
		return -ENOMEM;
	unsigned owner = placement_owner(s->ring, path);
	for (size_t i = nrq; i-- > 0;)
		if (rq[i].server == owner) {
			rq[i].report = path;
			rq[i].report_end = end;
			return 0;
		}
	free(path);
	return 0;
}

/* Did the owner record a WOP_WRITE_REPORT's size report? */
static int report_taken(const struct ioreq *q)
{
	struct wdec d;
	wdec_init(&d, q->rep + WIRE_HDR_LEN, q->replen - WIRE_HDR_LEN);
	wdec_u64(&d);
	int32_t status = (int32_t)wdec_u32(&d);
	return wdec_finish(&d) == 0 && status == 0;
}

/* Decode a READ reply: copy inline data, zero what the server did not have. */
static int finish_read(struct ioreq *q, uint8_t *buf, int *shortread, uint64_t *present_end)
{
	struct wdec d;
	wdec_init(&d, q->rep + WIRE_HDR_LEN, q->replen - WIRE_HDR_LEN);
	if (wdec_u32(&d) != q->nseg)
		return -EIO;
	uint64_t got[WIRE_MAX_SEGS];
	for (uint32_t i = 0; i < q->nseg; i++) {
		got[i] = wdec_u64(&d);
		if (got[i] > q->segs[i].len)
			return -EIO;
	}
	const uint8_t *data = NULL;
	if (!q->rma) {
		size_t n;
		data = wdec_bytes(&d, q->total, &n);
		if (!data || n != q->total)
			return -EIO;
	}
	if (wdec_finish(&d))
		return -EIO;
	for (uint32_t i = 0; i < q->nseg; i++) {
		const struct wire_seg *sg = &q->segs[i];
		if (data) {
			memcpy(buf + sg->bufoff, data, sg->len);
			data += sg->len;
		} else if (got[i] < sg->len) {
			memset(buf + sg->bufoff + got[i], 0, sg->len - got[i]);
		}
		if (got[i] < sg->len)
			*shortread = 1;
		if (got[i] && sg->off + got[i] > *present_end)
			*present_end = sg->off + got[i];
	}
	return 0;
}

/* The local fast path: the backing file of f on server sv, if sv runs on this node and its file
 * can be opened by this process (else -2: use RPCs), and its fast-path page (*guard, NULL for
 * none: then striped files go by RPC). Resolved once per descriptor and server address. */
static int direct_fd(struct srvlist *s, struct chfs_file *f, unsigned sv, struct fastpath_page **guard)
{
	if (!chfs_client.cfg.local_fastpath || !s->local[sv] || !f->md.fileid)
		return -2;
	int fd = -1;
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->ndirect; i++)
		if (strcmp(f->direct[i].addr, s->addrs[sv]) == 0) {
			fd = f->direct[i].fd;
			*guard = f->direct[i].guard;
		}
	pthread_mutex_unlock(&f->lock);
	if (fd != -1)
		return fd;
	RPC_DECL(r);
	char p[PATH_MAX]; /* a backing file: a local path */
	int nfd = -2;
	struct fastpath_page *g = NULL;
	rpc_begin(&r, WOP_LOCAL_PATH);
	wire_tag_put(&r.e, &f->md);
	if (rpc_call(s, sv, &r) == 0) {
		wdec_str(&r.d, p, sizeof p);
		if (wdec_finish(&r.d) == 0 && p[0] == '/') {
			nfd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
			g = lguard_get(p);
		}
		if (nfd < 0)
			nfd = -2;
	}
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->ndirect; i++)
		if (strcmp(f->direct[i].addr, s->addrs[sv]) == 0) { /* another thread was faster */
			if (nfd >= 0)
				close(nfd);
			nfd = f->direct[i].fd;
			g = f->direct[i].guard;
			goto out;
		}
	struct direct *nd = realloc(f->direct, (f->ndirect + 1) * sizeof *nd);
	if (nd) {
		f->direct = nd;
		snprintf(nd[f->ndirect].addr, sizeof nd[f->ndirect].addr, "%s", s->addrs[sv]);
		nd[f->ndirect].fd = nfd;
		nd[f->ndirect].guard = g;
		f->ndirect++;
	} else if (nfd >= 0) {
		close(nfd);
		nfd = -2;
	}
out:
	pthread_mutex_unlock(&f->lock);
	*guard = g;
	return nfd;
}

static int direct_io(int fd, int is_write, uint8_t *buf, const struct wire_seg *sg, int *shortread,
                     uint64_t *present_end)
{
	uint64_t done = 0;
	while (done < sg->len) {
		ssize_t k =
		        is_write
		                ? pwrite(fd, buf + sg->bufoff + done, sg->len - done, (off_t)(sg->off + done))
		                : pread(fd, buf + sg->bufoff + done, sg->len - done, (off_t)(sg->off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -EIO;
		if (k == 0)
			break;
		done += (uint64_t)k;
	}
	if (!is_write && done < sg->len) {
		memset(buf + sg->bufoff + done, 0, sg->len - done);
		*shortread = 1;
	}
	if (!is_write && done && sg->off + done > *present_end)
		*present_end = sg->off + done;
	return 0;
}

/* Run the pieces marked direct (fd >= 0). */
static int run_direct(struct piece *p, const int *dfd, size_t np, int is_write, uint8_t *buf, int *shortread,
                      uint64_t *present_end)
{
	int rc = 0;
	for (size_t i = 0; i < np && rc == 0; i++)
		if (dfd[i] >= 0)
			rc = direct_io(dfd[i], is_write, buf, &p[i].seg, shortread, present_end);
	return rc;
}

/* The size this descriptor may read up to: the size known at open (or last refresh), this
 * process's own writes, and — if end lies beyond both — a fresh size from the owner. */
static uint64_t read_limit(struct srvlist *s, struct chfs_file *f, uint64_t end)
{
	pthread_mutex_lock(&f->lock);
	uint64_t limit = f->md.size > f->written_end ? f->md.size : f->written_end;
	pthread_mutex_unlock(&f->lock);
	if (end <= limit)
		return limit;
	struct chfs_md md;
	if (ns_lookup(s, f->path, &md) == 0 && md.fileid == f->md.fileid) {
		pthread_mutex_lock(&f->lock);
		f->md.size = md.size;
		if (md.size > limit)
			limit = md.size;
		pthread_mutex_unlock(&f->lock);
	}
	return limit;
}

/* Guards of the local servers a transfer accesses directly (lib/localguard.h), per server of
 * the list: entered ones are left when the transfer's direct accesses are over. */
struct guards {
	struct fastpath_page **entered;
	unsigned char *refused;
};

/* May piece i (server sv) of a striped file go directly to the backing file? Enters the
 * server's guard once per transfer. */
static int guard_ok(struct guards *gs, struct srvlist *s, unsigned sv, struct fastpath_page *g)
{
	if (gs->entered[sv])
		return 1;
	if (gs->refused[sv] || !g || lguard_enter(g, s->members.ring_epoch) != 0) {
		gs->refused[sv] = 1;
		return 0;
	}
	gs->entered[sv] = g;
	return 1;
}

static void guards_leave(struct guards *gs, unsigned n)
{
	for (unsigned i = 0; gs->entered && i < n; i++)
		if (gs->entered[i]) {
			lguard_leave(gs->entered[i]);
			gs->entered[i] = NULL;
		}
}

/* One attempt with list s. -ERESTART: server *refused has a newer list (nothing of this
 * attempt needs undoing: writes are idempotent). report: a write may carry the size report
 * (not while a write-back buffer may hold other unreported bytes). */
static ssize_t transfer_once(struct srvlist *s, struct chfs_file *f, int is_write, void *vbuf, size_t size,
                             uint64_t off, unsigned *refused, int report)
{
	uint8_t *buf = vbuf;
	int rc = 0, shortread = 0, concurrent = 0, reported = 0;
	uint64_t present_end = 0;
	ssize_t ret = 0;
	xprt_mem_t *mr = NULL;
	struct xprt_rma_desc desc = {0};
	struct guards gs = {calloc(s->n, sizeof *gs.entered), calloc(s->n, 1)};
	if (!gs.entered || !gs.refused) {
		free(gs.entered);
		free(gs.refused);
		return -ENOMEM;
	}
	if (!is_write) {
		/* Clamp reads to the file size (refreshed only when the read goes beyond what we knew),
		 * so reading a small file with a big buffer does not touch every server. */
		uint64_t limit = read_limit(s, f, off + size);
		if (limit <= off || off + size > limit)
			size = limit <= off ? 0 : (size_t)(limit - off);
	}
	struct piece *p = NULL;
	size_t np = 0;
	if (size == 0 || (rc = make_pieces(s, &f->md, size, off, &p, &np)) < 0) {
		free(gs.entered);
		free(gs.refused);
		return rc;
	}

	/* Pieces on this node's servers go straight to their backing files (local fast path). */
	int *dfd = malloc(np * sizeof *dfd);
	size_t ndirect = 0;
	/* Group the other pieces into requests: one per server, split at WIRE_MAX_SEGS. */
	struct wire_seg *segs = malloc(np * sizeof *segs);
	struct ioreq *rq = calloc(np, sizeof *rq);
	size_t nrq = 0;
	uint64_t thresh = chfs_client.cfg.rdma_thresh;
	int need_rma = 0;
	if (!segs || !rq || !dfd) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		struct fastpath_page *g = NULL;
		dfd[i] = direct_fd(s, f, p[i].server, &g);
		/* A striped file's chunk goes directly only while the server places chunks with our
		 * ring and moves none (common/fastpath_page.h); a local-placement file never moves. */
		if (dfd[i] >= 0 && !(f->md.flags & MD_LOCAL) && !guard_ok(&gs, s, p[i].server, g))
			dfd[i] = -2;
		ndirect += dfd[i] >= 0;
	}
	for (size_t i = 0; i < np; i++) {
		if (dfd[i] >= 0)
			continue;
		segs[i] = p[i].seg;
		struct ioreq *q = nrq ? &rq[nrq - 1] : NULL;
		if (!q || q->server != p[i].server || q->nseg == WIRE_MAX_SEGS) {
			q = &rq[nrq++];
			q->server = p[i].server;
			q->segs = &segs[i];
		}
		q->nseg++;
		q->total += p[i].seg.len;
	}
	for (size_t i = 0; i < nrq; i++) {
		rq[i].rma = rq[i].total > thresh || rq[i].total > INLINE_MAX;
		need_rma |= rq[i].rma;
	}

	if (need_rma) {
		rc = xprt_mem_register(chfs_client.x, buf, size,
		                       is_write ? XPRT_MEM_REMOTE_READ : XPRT_MEM_REMOTE_WRITE, &mr, &desc);
		if (rc) {
			log_err("cannot register a %zu-byte buffer for RMA: %s", size, strerror(-rc));
			goto out;
		}
	}
	if (is_write && report)
		rc = plan_report(s, f, rq, nrq, off + size);
	for (size_t i = 0; i < nrq && rc == 0; i++)
		rc = build_msg(&rq[i], &f->md, is_write, buf, &desc, s->epoch);
	if (rc)
		goto out_mr;

	concurrent =
	        (nrq > 1 || (nrq && ndirect)) && (atomic_load(&chfs_client.async_access) || size > thresh);
	int timeout = need_rma ? xprt_transfer_timeout_ms(rpc_timeout(), size) : rpc_timeout();
	if (concurrent) {
		for (size_t i = 0; i < nrq; i++) {
			struct ioreq *q = &rq[i];
			q->rc = client_server_down(s, q->server)
			                ? -EHOSTDOWN
			                : xprt_call_start(chfs_client.x, s->peers[q->server], q->msg,
			                                  q->msglen, q->rep, q->repcap, timeout, &q->call);
			if (q->rc)
				q->call = NULL;
		}
		if (ndirect)
			rc = run_direct(p, dfd, np, is_write, buf, &shortread, &present_end);
		guards_leave(&gs, s->n);
		for (size_t i = 0; i < nrq; i++)
			if (rq[i].call)
				rq[i].rc = xprt_call_wait(rq[i].call, &rq[i].replen);
	} else {
		if (ndirect)
			rc = run_direct(p, dfd, np, is_write, buf, &shortread, &present_end);
		guards_leave(&gs, s->n);
		for (size_t i = 0; i < nrq; i++) {
			struct ioreq *q = &rq[i];
			q->rc = client_server_down(s, q->server)
			                ? -EHOSTDOWN
			                : xprt_call(chfs_client.x, s->peers[q->server], q->msg, q->msglen,
			                            q->rep, q->repcap, &q->replen, timeout);
			if (q->rc)
				break;
		}
	}
	for (size_t i = 0; i < nrq; i++) {
		struct ioreq *q = &rq[i];
		int r = q->msg ? rpc_status(s, q->server, q->rc, q->rep, q->rc ? 0 : q->replen, NULL) : -EIO;
		if (r == -ERESTART)
			*refused = q->server;
		if (r == 0 && !is_write)
			r = finish_read(q, buf, &shortread, &present_end);
		if (r == 0 && q->report)
			reported = report_taken(q);
		if (r && !rc)
			rc = r;
		if (!concurrent && q->rc)
			break;
	}
out_mr:
	if (mr)
		xprt_mem_deregister(mr);
	if (rc == 0 && is_write) {
		pthread_mutex_lock(&f->lock);
		if (off + size > f->written_end)
			f->written_end = off + size;
		int clean = reported && f->written_end <= off + size; /* the owner has all of it */
		if (clean && f->dirty) {
			f->dirty = 0;
			atomic_fetch_sub(&chfs_client.dirty_fds, 1);
		} else if (!clean && !f->dirty) {
			f->dirty = 1;
			atomic_fetch_add(&chfs_client.dirty_fds, 1);
		}
		pthread_mutex_unlock(&f->lock);
	}
	ret = (ssize_t)size;
	if (rc == 0 && shortread) {
		/* End of file somewhere in the range: clamp to the file size. */
		struct chfs_md md;
		uint64_t fsize = present_end;
		if (f->orphan)
			orphan_size(f, &md);
		if ((f->orphan || (ns_lookup(s, f->path, &md) == 0 && md.fileid == f->md.fileid)) &&
		    md.size > fsize)
			fsize = md.size;
		pthread_mutex_lock(&f->lock);
		if (f->written_end > fsize)
			fsize = f->written_end;
		pthread_mutex_unlock(&f->lock);
		ret = fsize <= off ? 0 : (ssize_t)((fsize - off) < size ? fsize - off : size);
	}
out:
	guards_leave(&gs, s->n);
	free(gs.entered);
	free(gs.refused);
	for (size_t i = 0; rq && i < nrq; i++) {
		free(rq[i].msg);
		free(rq[i].rep);
		free(rq[i].report);
	}
	free(rq);
	free(segs);
	free(dfd);
	free(p);
	return rc ? rc : ret;
}

static ssize_t transfer(struct chfs_file *f, int is_write, void *buf, size_t size, uint64_t off, int report)
{
	struct srvlist *s;
	if (size == 0)
		return 0;
	if (off > WIRE_MAX_OFFSET || size > WIRE_MAX_OFFSET - off)
		return -EFBIG;
	if (is_write)
		atomic_store_explicit(&chfs_client.wrote, 1, memory_order_relaxed);
	int rc = client_begin(&s);
	if (rc)
		return rc;
	ssize_t r = -ERESTART;
	for (int attempt = 0; attempt < CLIENT_RETRIES && r == -ERESTART; attempt++) {
		unsigned refused = 0;
		if ((r = transfer_once(s, f, is_write, buf, size, off, &refused, report)) == -ERESTART)
			s = client_list_retry(s, refused, attempt);
	}
	return r == -ERESTART ? rpc_restart_failed((int)r) : r;
}

ssize_t io_transfer(struct chfs_file *f, int is_write, void *buf, size_t size, uint64_t off)
{
	return transfer(f, is_write, buf, size, off, !f->wcap);
}

/* ---- CHFS_BUF_SIZE write-back buffer ---- */

int io_flush(struct chfs_file *f)
{
	if (!f->wcap)
		return 0;
	pthread_mutex_lock(&f->wlock);
	ssize_t rc = 0;
	if (f->wlen) {
		rc = transfer(f, 1, f->wbuf, f->wlen, f->woff, 1);
		f->wlen = 0;
	}
	pthread_mutex_unlock(&f->wlock);
	return rc < 0 ? (int)rc : 0;
}

/* Buffer a small write if it extends the buffered run; 1 if buffered, 0 if the caller must
 * write it directly, -errno if flushing the previous run failed. */
static int buffer_write(struct chfs_file *f, const void *buf, size_t size, uint64_t off)
{
	if (!f->wcap || size >= f->wcap)
		return io_flush(f);
	pthread_mutex_lock(&f->wlock);
	int rc = 0;
	if (!f->wbuf && !(f->wbuf = malloc(f->wcap)))
		rc = -ENOMEM;
	if (rc == 0 && f->wlen && (off != f->woff + f->wlen || f->wlen + size > f->wcap)) {
		ssize_t w = transfer(f, 1, f->wbuf, f->wlen, f->woff, 1);
		f->wlen = 0;
		if (w < 0)
			rc = (int)w;
	}
	if (rc == 0) {
		if (!f->wlen)
			f->woff = off;
		memcpy(f->wbuf + f->wlen, buf, size);
		f->wlen += size;
		pthread_mutex_lock(&f->lock);
		if (!f->dirty) { /* so size reports (which flush first) cover the buffer */
			f->dirty = 1;
			atomic_fetch_add(&chfs_client.dirty_fds, 1);
		}
		pthread_mutex_unlock(&f->lock);
		rc = 1;
	}
	pthread_mutex_unlock(&f->wlock);
	return rc;
}

static ssize_t do_write(struct chfs_file *f, const void *buf, size_t size, uint64_t off)
{
	int b = buffer_write(f, buf, size, off);
	if (b < 0)
		return b;
	return b ? (ssize_t)size : io_transfer(f, 1, (void *)buf, size, off);
}

static ssize_t do_read(struct chfs_file *f, void *buf, size_t size, uint64_t off)
{
	int rc = io_flush(f);
	return rc ? rc : io_transfer(f, 0, buf, size, off);
}

/* ---- public descriptor API ---- */

ssize_t chfs_pwrite(int fd, const void *buf, size_t size, off_t offset)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	ssize_t rc;
	if (offset < 0)
		rc = -EINVAL;
	else if (f->isdir)
		rc = -EISDIR;
	else
		rc = do_write(f, buf, size, (uint64_t)offset);
	fd_put(f);
	return rc < 0 ? set_err((int)rc) : rc;
}

ssize_t chfs_pread(int fd, void *buf, size_t size, off_t offset)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	ssize_t rc;
	if (offset < 0)
		rc = -EINVAL;
	else if (f->isdir)
		rc = -EISDIR;
	else
		rc = do_read(f, buf, size, (uint64_t)offset);
	fd_put(f);
	return rc < 0 ? set_err((int)rc) : rc;
}

/* Current size as this process sees it (owner's metadata and its own unreported writes). */
static int file_size(struct chfs_file *f, uint64_t *size, struct chfs_md *out)
{
	struct srvlist *s;
	struct chfs_md md;
	int rc = io_flush(f);
	if (rc == 0 && f->orphan) {
		orphan_size(f, &md);
		*size = md.size;
		if (out)
			*out = md;
		return 0;
	}
	if (rc == 0)
		rc = client_begin(&s);
	if (rc == 0)
		rc = ns_lookup(s, f->path, &md);
	if (rc == 0 && md.fileid != f->md.fileid)
		rc = -ESTALE;
	if (rc == -ESTALE || rc == -ENOENT) { /* renamed by another process? follow the file */
		char *found = malloc(CHFS_PATH_MAX);
		rc = found ? ns_lookup_fileid(s, f->md.fileid, &md, found) : -ENOMEM;
		free(found);
	}
	if ((rc == -ESTALE || rc == -ENOENT) && f->leased) { /* unlinked: our lease kept the data */
		orphan_mark_leased(f);
		return file_size(f, size, out);
	}
	if (rc == -ESTALE || rc == -ENOENT) { /* unlinked: what we know */
		md = f->md;
		md.size = 0;
		rc = 0;
	}
	if (rc)
		return rc;
	pthread_mutex_lock(&f->lock);
	if (f->written_end > md.size)
		md.size = f->written_end;
	pthread_mutex_unlock(&f->lock);
	*size = md.size;
	if (out)
		*out = md;
	return 0;
}

static ssize_t rw_at_pos(int fd, int is_write, void *buf, size_t size)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	ssize_t rc = 0;
	uint64_t pos;
	if (f->isdir)
		rc = -EISDIR;
	if (rc == 0 && is_write && f->append) {
		rc = file_size(f, &pos, NULL);
		pthread_mutex_lock(&f->lock);
		f->pos = (off_t)pos;
		pthread_mutex_unlock(&f->lock);
	}
	if (rc == 0) {
		pthread_mutex_lock(&f->lock);
		pos = (uint64_t)f->pos;
		pthread_mutex_unlock(&f->lock);
		rc = is_write ? do_write(f, buf, size, pos) : do_read(f, buf, size, pos);
		if (rc > 0) {
			pthread_mutex_lock(&f->lock);
			f->pos = (off_t)(pos + (uint64_t)rc);
			pthread_mutex_unlock(&f->lock);
		}
	}
	fd_put(f);
	return rc < 0 ? set_err((int)rc) : rc;
}

ssize_t chfs_write(int fd, const void *buf, size_t size) { return rw_at_pos(fd, 1, (void *)buf, size); }
ssize_t chfs_read(int fd, void *buf, size_t size) { return rw_at_pos(fd, 0, buf, size); }

off_t chfs_seek(int fd, off_t off, int whence)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	int rc = 0;
	uint64_t size = 0;
	off_t base = 0;
	if (whence == SEEK_END)
		rc = file_size(f, &size, NULL);
	pthread_mutex_lock(&f->lock);
	if (rc == 0) {
		switch (whence) {
		case SEEK_SET: base = 0; break;
		case SEEK_CUR: base = f->pos; break;
		case SEEK_END: base = (off_t)size; break;
		default: rc = -EINVAL;
		}
	}
	if (rc == 0 && (base + off < 0))
		rc = -EINVAL;
	if (rc == 0)
		f->pos = base + off;
	off_t res = f->pos;
	pthread_mutex_unlock(&f->lock);
	fd_put(f);
	return rc ? set_err(rc) : res;
}

int chfs_fsync(int fd)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	int rc = ns_report_size(f);
	fd_put(f);
	return set_err(rc);
}

int chfs_close(int fd)
{
	struct chfs_file *f;
	int rc = fd_release(fd, &f);
	if (rc)
		return set_err(rc);
	rc = ns_report_size(f);
	orphan_release(f);
	if (f->leased)
		open_lease_closed(f->md.fileid); /* told the owner with the next renewal */
	fd_put(f);
	return set_err(rc);
}

int chfs_fstat(int fd, struct stat *st)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	uint64_t size;
	struct chfs_md md;
	int rc = f->isdir ? 0 : file_size(f, &size, &md);
	if (f->isdir) {
		struct srvlist *s;
		rc = client_begin(&s);
		if (rc == 0)
			rc = ns_lookup(s, f->path, &md);
	}
	if (rc == 0) {
		md_to_stat(&md, f->path, st);
		if (f->orphan)
			st->st_nlink = 0;
	}
	fd_put(f);
	return set_err(rc);
}

int chfs_ftruncate(int fd, off_t len)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	struct srvlist *s;
	int rc = io_flush(f);
	if (rc == 0)
		rc = client_begin(&s);
	if (rc == 0)
		rc = f->orphan ? orphan_truncate(s, f, len) : ns_truncate(s, f->path, &f->md, len);
	fd_put(f);
	return set_err(rc);
}

int chfs_chunk_size_of(int fd)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	int cs = (int)f->md.chunk_size;
	fd_put(f);
	return cs;
}

int chfs_mode_of(int fd)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	int mode = (int)f->md.mode;
	fd_put(f);
	return mode;
}

ino_t chfs_ino_of(int fd)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return 0;
	ino_t ino = (ino_t)f->md.fileid; /* st_ino when not 0 (md_to_stat) */
	fd_put(f);
	if (!ino)
		errno = ENOENT;
	return ino;
}

int chfs_local_backing_path(int fd, char *buf, size_t size)
{
	struct chfs_file *f = fd_get(fd);
	if (!f)
		return -1;
	struct srvlist *s;
	int rc = client_begin(&s), h = -1;
	if (rc == 0 && !f->isdir && S_ISREG(f->md.mode)) {
		/* Only local-placement files: their server derives size and times from the backing
		 * file, so direct writers stay visible. A hash-placed file on a one-server pool has all
		 * its chunks here too, but its size lives only in the metadata. */
		if (f->md.flags & MD_LOCAL)
			h = client_server_index(s, f->md.home);
		if (h >= 0 && !s->local[h])
			h = -1;
	}
	if (rc == 0 && h < 0)
		rc = -ENXIO;
	/* without the backend, asking again would only tell the same path (backing_paths.c) */
	int keep = rc == 0 && !(f->md.flags & MD_PATHED);
	if (keep && backing_path_get(s->addrs[h], f->md.fileid, buf, size) == 0) {
		/* known: buf holds it */
	} else if (rc == 0) {
		RPC_DECL(r);
		char p[PATH_MAX]; /* a backing file: a local path */
		rpc_begin(&r, WOP_LOCAL_PATH);
		wire_tag_put(&r.e, &f->md);
		rc = rpc_call(s, (unsigned)h, &r);
		if (rc == 0) {
			wdec_str(&r.d, p, sizeof p);
			rc = wdec_finish(&r.d) ? -EIO : 0;
		}
		if (rc == 0 && strlen(p) >= size)
			rc = -ERANGE;
		if (rc == 0)
			memcpy(buf, p, strlen(p) + 1);
		if (rc == 0 && keep)
			backing_path_put(s->addrs[h], f->md.fileid, p);
	}
	fd_put(f);
	return set_err(rc);
}

void chfs_sync(void)
{
	if (chfs_client.initialized && fd_sync_sizes(0) == 0)
		client_flush_backend(); /* sync.c: failures are logged, path by path */
}
