/*
 * wire.c — see wire.h. The encoder writes little-endian fields and records overflow instead of
 * writing past the buffer; the decoder checks every length against what remains before touching
 * a byte. wire_decode_req() knows, per op, which fields follow and validates their values.
 */
#define _GNU_SOURCE
#include "wire.h"
#include "le.h"
#include "findpred.h"
#include "placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const op_names[WOP_MAX] = {
        [WOP_NODE_LIST] = "node_list",
        [WOP_JOIN] = "join",
        [WOP_SET_LIST] = "set_list",
        [WOP_CREATE] = "create",
        [WOP_STAT] = "stat",
        [WOP_MKDIR] = "mkdir",
        [WOP_RMDIR] = "rmdir",
        [WOP_DIR_EMPTY] = "dir_empty",
        [WOP_READDIR] = "readdir",
        [WOP_UNLINK] = "unlink",
        [WOP_INSERT] = "insert",
        [WOP_REMOVE_IF] = "remove_if",
        [WOP_RENAME] = "rename",
        [WOP_SETATTR] = "setattr",
        [WOP_WRITE] = "write",
        [WOP_READ] = "read",
        [WOP_DATA_TRUNCATE] = "data_truncate",
        [WOP_DATA_REMOVE] = "data_remove",
        [WOP_DATA_STAT] = "data_stat",
        [WOP_LOCAL_PATH] = "local_path",
        [WOP_SYNC] = "sync",
        [WOP_MOVED] = "moved",
        [WOP_STATUS] = "status",
        [WOP_MIG_GET_ENTRY] = "mig_get_entry",
        [WOP_MIG_DROP_ENTRY] = "mig_drop_entry",
        [WOP_MIG_GET_DATA] = "mig_get_data",
        [WOP_MIG_DROP_DATA] = "mig_drop_data",
        [WOP_MIG_HINT] = "mig_hint",
        [WOP_MIG_DONE] = "mig_done",
        [WOP_FIND] = "find",
        [WOP_STAGE_ENTRY] = "stage_entry",
        [WOP_STAGE_DATA] = "stage_data",
        [WOP_FLUSH] = "flush",
        [WOP_FLUSH_ERRORS] = "flush-errors",
        [WOP_INODE_GET] = "inode-get",
        [WOP_INODE_PUT] = "inode-put",
        [WOP_INODE_ADJUST] = "inode-adjust",
        [WOP_INODE_SETATTR] = "inode-setattr",
        [WOP_RELINK] = "relink",
        [WOP_ORPHAN_HOLD] = "orphan-hold",
        [WOP_ORPHAN_DROP] = "orphan-drop",
        [WOP_STAGE_ENTRIES] = "stage-entries",
        [WOP_STAGE_FILES] = "stage-files",
        [WOP_META_SETTLE] = "meta-settle",
        [WOP_RELINK_OWED] = "relink-owed",
        [WOP_WRITE_REPORT] = "write-report",
        [WOP_STAT_OPEN] = "stat-open",
        [WOP_LEASE_RENEW] = "lease-renew",
        [WOP_REJOINED] = "rejoined",
        [WOP_DATA_UNNAMED] = "data_unnamed",
        [WOP_UNNAMED_OWED] = "unnamed-owed",
        [WOP_ORPHAN_DUE] = "orphan-due",
};

const char *wire_op_name(unsigned op)
{
	op &= ~(unsigned)WIRE_REPLY;
	return op > 0 && op < WOP_MAX && op_names[op] ? op_names[op] : "unknown";
}

/* ---- encoder ---- */
void wenc_init(struct wenc *e, void *buf, size_t cap)
{
	e->p = buf;
	e->cap = cap;
	e->len = 0;
	e->err = 0;
}

void *wenc_reserve(struct wenc *e, size_t n)
{
	if (e->err || n > e->cap - e->len) {
		e->err = -EMSGSIZE;
		return NULL;
	}
	void *at = e->p + e->len;
	e->len += n;
	return at;
}

void wenc_u32(struct wenc *e, uint32_t v)
{
	uint8_t *p = wenc_reserve(e, 4);
	if (p)
		put_le(p, v, 4);
}

void wenc_u64(struct wenc *e, uint64_t v)
{
	uint8_t *p = wenc_reserve(e, 8);
	if (p)
		put_le(p, v, 8);
}

void wenc_i64(struct wenc *e, int64_t v) { wenc_u64(e, (uint64_t)v); }

void wenc_raw(struct wenc *e, const void *src, size_t n)
{
	uint8_t *p = wenc_reserve(e, n);
	if (p && n)
		memcpy(p, src, n);
}

void wenc_bytes(struct wenc *e, const void *src, size_t n)
{
	if (n > UINT32_MAX) {
		e->err = -EMSGSIZE;
		return;
	}
	wenc_u32(e, (uint32_t)n);
	wenc_raw(e, src, n);
}

void wenc_str(struct wenc *e, const char *s) { wenc_bytes(e, s, strlen(s)); }

void wenc_md(struct wenc *e, const struct chfs_md *m)
{
	wenc_u32(e, m->mode);
	wenc_u32(e, m->uid);
	wenc_u32(e, m->gid);
	wenc_u32(e, m->flags);
	wenc_u32(e, m->chunk_size);
	wenc_u32(e, m->pkey);
	wenc_u64(e, m->size);
	wenc_u64(e, m->fileid);
	wenc_i64(e, m->atime_ns);
	wenc_i64(e, m->mtime_ns);
	wenc_i64(e, m->ctime_ns);
	wenc_str(e, m->link);
	wenc_str(e, m->home);
	wenc_u32(e, m->nlink);
}

void wire_inode_key(uint64_t fileid, char *out)
{
	static const char hex[] = "0123456789abcdef";
	out[0] = '\x01';
	for (int i = 0; i < 16; i++)
		out[1 + i] = hex[(fileid >> (60 - 4 * i)) & 15];
	out[WIRE_INODE_KEY_LEN] = '\0';
}

/* ---- decoder ---- */
void wdec_init(struct wdec *d, const void *buf, size_t len)
{
	d->p = buf;
	d->len = len;
	d->pos = 0;
	d->err = 0;
}

const void *wdec_raw(struct wdec *d, size_t n)
{
	if (d->err || n > d->len - d->pos) {
		d->err = -EBADMSG;
		return NULL;
	}
	const void *at = d->p + d->pos;
	d->pos += n;
	return at;
}

uint32_t wdec_u32(struct wdec *d)
{
	const uint8_t *p = wdec_raw(d, 4);
	return p ? (uint32_t)get_le(p, 4) : 0;
}

uint64_t wdec_u64(struct wdec *d)
{
	const uint8_t *p = wdec_raw(d, 8);
	return p ? get_le(p, 8) : 0;
}

int64_t wdec_i64(struct wdec *d) { return (int64_t)wdec_u64(d); }

const void *wdec_bytes(struct wdec *d, size_t max, size_t *n)
{
	uint32_t len = wdec_u32(d);
	if (d->err)
		return NULL;
	if (len > max) {
		d->err = -EBADMSG;
		return NULL;
	}
	*n = len;
	return wdec_raw(d, len);
}

void wdec_str(struct wdec *d, char *out, size_t cap)
{
	size_t n = 0;
	const char *s = wdec_bytes(d, cap - 1, &n);
	if (!s || memchr(s, '\0', n)) {
		d->err = -EBADMSG;
		out[0] = '\0';
		return;
	}
	memcpy(out, s, n);
	out[n] = '\0';
}

void wdec_md(struct wdec *d, struct chfs_md *m)
{
	m->mode = wdec_u32(d);
	m->uid = wdec_u32(d);
	m->gid = wdec_u32(d);
	m->flags = wdec_u32(d);
	m->chunk_size = wdec_u32(d);
	m->pkey = wdec_u32(d);
	m->size = wdec_u64(d);
	m->fileid = wdec_u64(d);
	m->atime_ns = wdec_i64(d);
	m->mtime_ns = wdec_i64(d);
	m->ctime_ns = wdec_i64(d);
	wdec_str(d, m->link, sizeof m->link);
	wdec_str(d, m->home, sizeof m->home);
	m->nlink = wdec_u32(d);
}

int wdec_finish(struct wdec *d)
{
	if (d->err)
		return d->err;
	return d->pos == d->len ? 0 : -EBADMSG;
}

/* ---- header ---- */
void wire_hdr_put(void *buf, const struct wire_hdr *h)
{
	uint8_t *p = buf;
	put_le(p, h->magic, 4);
	put_le(p + 4, h->version, 2);
	put_le(p + 6, h->op, 2);
	put_le(p + 8, h->reqid, 8);
	memcpy(p + 16, h->secret, CHFS_SECRET_LEN);
	put_le(p + 48, h->body_len, 4);
	put_le(p + 52, (uint32_t)h->status, 4);
	put_le(p + 56, h->epoch, 8);
}

int wire_hdr_get(const void *buf, size_t len, struct wire_hdr *h)
{
	const uint8_t *p = buf;
	if (len < WIRE_HDR_LEN)
		return -EBADMSG;
	h->magic = (uint32_t)get_le(p, 4);
	h->version = (uint16_t)get_le(p + 4, 2);
	h->op = (uint16_t)get_le(p + 6, 2);
	h->reqid = get_le(p + 8, 8);
	memcpy(h->secret, p + 16, CHFS_SECRET_LEN);
	h->body_len = (uint32_t)get_le(p + 48, 4);
	h->status = (int32_t)(uint32_t)get_le(p + 52, 4);
	h->epoch = get_le(p + 56, 8);
	if (h->magic != WIRE_MAGIC)
		return -EBADMSG;
	if (h->version != WIRE_VERSION)
		return -EPROTO;
	unsigned op = h->op & ~(unsigned)WIRE_REPLY;
	if (op == 0 || op >= WOP_MAX)
		return -EBADMSG;
	if ((uint64_t)h->body_len != len - WIRE_HDR_LEN)
		return -EBADMSG;
	return 0;
}

/* ---- request validation ---- */
int wire_addr_ok(const char *a, size_t len)
{
	if (len == 0 || len >= WIRE_ADDR_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)a[i];
		if (c <= ' ' || c >= 127 || c == ',')
			return 0;
	}
	return memmem(a, len, "://", 3) != NULL;
}

int wire_id_ok(const char *id, size_t len)
{
	if (len != WIRE_ID_LEN)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return 0;
	return 1;
}

int wire_list_parse(const char *l, size_t len, struct wire_member *m, unsigned max)
{
	unsigned n = 0;
	size_t s = 0;
	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && l[i] != ',')
			continue;
		const char *e = l + s, *eq = memchr(e, '=', i - s);
		if (!eq || !wire_id_ok(e, (size_t)(eq - e)) || !wire_addr_ok(eq + 1, i - s - WIRE_ID_LEN - 1))
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		if (m) {
			memcpy(m[n].id, e, WIRE_ID_LEN);
			m[n].id[WIRE_ID_LEN] = '\0';
			memcpy(m[n].addr, eq + 1, i - s - WIRE_ID_LEN - 1);
			m[n].addr[i - s - WIRE_ID_LEN - 1] = '\0';
			for (unsigned k = 0; k < n; k++)
				if (strcmp(m[k].id, m[n].id) == 0 || strcmp(m[k].addr, m[n].addr) == 0)
					return -EINVAL;
		}
		n++;
		s = i + 1;
	}
	return (int)n;
}

void wire_list_put(struct wenc *e, const struct wire_listinfo *li)
{
	wenc_u64(e, li->epoch);
	wenc_u32(e, li->vnodes);
	wenc_bytes(e, li->list, li->nlist);
	wenc_bytes(e, li->down, li->ndown);
	wenc_u64(e, li->ring_epoch);
	wenc_bytes(e, li->prev, li->nprev);
}

static int ids_ok(const char *l, size_t len)
{
	for (size_t s = 0, i = 0; len && i <= len; i++)
		if (i == len || l[i] == ',') {
			if (!wire_id_ok(l + s, i - s))
				return 0;
			s = i + 1;
		}
	return 1;
}

int wire_id_in(const char *id, const char *down, size_t n)
{
	for (size_t i = 0; i + WIRE_ID_LEN <= n; i += WIRE_ID_LEN + 1)
		if (memcmp(down + i, id, WIRE_ID_LEN) == 0)
			return 1;
	return 0;
}

/* Decode a member-list body from d (no finish). */
static int list_dec(struct wdec *d, struct wire_listinfo *li)
{
	li->epoch = wdec_u64(d);
	li->vnodes = wdec_u32(d);
	li->list = wdec_bytes(d, WIRE_LIST_MAX, &li->nlist);
	li->down = wdec_bytes(d, WIRE_LIST_MAX, &li->ndown);
	li->ring_epoch = wdec_u64(d);
	li->prev = wdec_bytes(d, WIRE_LIST_MAX, &li->nprev);
	if (d->err)
		return d->err;
	if (li->vnodes == 0 || li->vnodes > RING_VNODES_MAX ||
	    wire_list_parse(li->list, li->nlist, NULL, WIRE_LIST_MAX) < 0 || !ids_ok(li->down, li->ndown) ||
	    (li->nprev && wire_list_parse(li->prev, li->nprev, NULL, WIRE_LIST_MAX) < 0) ||
	    li->ring_epoch > li->epoch)
		return -EINVAL;
	return 0;
}

int wire_list_get(const void *body, size_t len, struct wire_listinfo *li)
{
	struct wdec d;
	wdec_init(&d, body, len);
	if (list_dec(&d, li) || wdec_finish(&d))
		return -EBADMSG;
	return 0;
}

static void dec_tag(struct wdec *d, struct wire_tag *t, int *bad)
{
	t->pkey = wdec_u32(d);
	t->chunk_size = wdec_u32(d);
	t->flags = wdec_u32(d);
	if (!d->err &&
	    (t->chunk_size == 0 || t->chunk_size > (1u << 30) || (t->flags & ~(uint32_t)MD_FLAGS_ALL)))
		*bad = -EINVAL;
}

void wire_tag_put(struct wenc *e, const struct chfs_md *m)
{
	wenc_u64(e, m->fileid);
	wenc_u32(e, m->pkey);
	wenc_u32(e, m->chunk_size);
	wenc_u32(e, m->flags);
	if (m->flags & MD_PATHED)
		wenc_str(e, m->link);
}

void wire_mig_item_put(struct wenc *e, const struct wire_mig_item *it)
{
	wenc_u32(e, it->kind);
	if (it->kind == WIRE_MIG_ENTRY) {
		wenc_str(e, it->path);
		return;
	}
	wenc_u64(e, it->fileid);
	wenc_u32(e, it->tag.pkey);
	wenc_u32(e, it->tag.chunk_size);
	wenc_u32(e, it->tag.flags);
	wenc_u64(e, it->index);
}

static void dec_path(struct wdec *d, char *out, int allow_root, int *bad);

int wire_mig_item_get(struct wdec *d, struct wire_mig_item *it)
{
	int bad = 0;
	it->kind = wdec_u32(d);
	if (it->kind == WIRE_MIG_ENTRY) {
		dec_path(d, it->path, 0, &bad);
	} else if (it->kind == WIRE_MIG_CHUNK) {
		it->fileid = wdec_u64(d);
		dec_tag(d, &it->tag, &bad);
		it->index = wdec_u64(d);
		if (!d->err && !bad && it->index > WIRE_MAX_OFFSET / it->tag.chunk_size)
			bad = -EINVAL;
	} else if (!d->err) {
		bad = -EINVAL;
	}
	return d->err ? d->err : bad;
}

static void dec_path_check(const char *path, int allow_root, int *bad)
{
	int rc = path_check_canonical(path, strlen(path), allow_root);
	if (rc && !*bad)
		*bad = rc;
}

static void dec_path(struct wdec *d, char *out, int allow_root, int *bad)
{
	wdec_str(d, out, CHFS_PATH_MAX);
	if (!d->err)
		dec_path_check(out, allow_root, bad);
}

void wire_stage_file_put(struct wenc *e, const struct chfs_md *m)
{
	wire_tag_put(e, m);
	wenc_u64(e, m->size);
}

int wire_stage_file_get(struct wdec *d, struct wire_stage_file *f)
{
	int bad = 0;
	f->fileid = wdec_u64(d);
	dec_tag(d, &f->tag, &bad);
	if (!d->err && !bad && !(f->tag.flags & MD_BACKEND))
		bad = -EINVAL; /* only a backend file is staged (and it carries its backend path) */
	if (!d->err && !bad)
		dec_path(d, f->path, 0, &bad);
	f->size = wdec_u64(d);
	if (!d->err && !bad && f->size > WIRE_MAX_OFFSET)
		bad = -EINVAL;
	return d->err ? d->err : bad;
}

int wire_lease_item_get(struct wdec *d, uint64_t *fileid, uint32_t *closes)
{
	*fileid = wdec_u64(d);
	*closes = wdec_u32(d);
	return d->err ? d->err : 0;
}

int wire_stage_path_get(struct wdec *d, char *path)
{
	int bad = 0;
	dec_path(d, path, 0, &bad);
	return d->err ? d->err : bad;
}

/* STAGE_ENTRIES/FILES: u32 n (1..WIRE_STAGE_MAX), then n items, each validated. */
static int dec_stage_items(struct wdec *d, struct wire_req *r)
{
	r->nitems = wdec_u32(d);
	if (d->err)
		return 0;
	if (r->nitems == 0 || r->nitems > WIRE_STAGE_MAX)
		return -EINVAL;
	r->items = d->p + d->pos;
	size_t start = d->pos;
	struct wire_stage_file *f = malloc(sizeof *f);
	if (!f)
		return -ENOMEM;
	int bad = 0;
	for (uint32_t i = 0; i < r->nitems && !d->err && !bad; i++)
		bad = r->h.op == WOP_STAGE_FILES ? wire_stage_file_get(d, f)
		                                 : wire_stage_path_get(d, f->path);
	free(f);
	r->items_len = d->pos - start;
	return d->err ? 0 : bad;
}

/* The backend path after the tag of an MD_BACKEND file's data request (into r->path). */
static void dec_backend_path(struct wdec *d, struct wire_req *r, int *bad)
{
	r->path[0] = '\0';
	if (!d->err && !*bad && (r->tag.flags & MD_PATHED))
		dec_path(d, r->path, 0, bad);
}

static int md_ok(const struct chfs_md *m)
{
	if (m->chunk_size == 0 || m->chunk_size > (1u << 30))
		return 0;
	if (m->size > WIRE_MAX_OFFSET)
		return 0;
	if (m->flags & ~(uint32_t)MD_FLAGS_ALL)
		return 0;
	if (m->nlink > WIRE_NLINK_MAX || (m->nlink && !(m->flags & MD_LINKED)))
		return 0;
	if ((m->flags & MD_LOCAL) && !wire_addr_ok(m->home, strlen(m->home)))
		return 0;
	return 1;
}

/* SETATTR's fields after the file id (SETATTR, INODE_SETATTR). */
void wenc_setattr(struct wenc *e, const struct wire_setattr *a)
{
	wenc_u32(e, a->which);
	wenc_u32(e, a->mode);
	wenc_i64(e, a->atime_ns);
	wenc_i64(e, a->mtime_ns);
	wenc_u64(e, a->size);
	wenc_u32(e, a->uid);
	wenc_u32(e, a->gid);
}

struct wire_setattr wire_req_setattr(const struct wire_req *r)
{
	return (struct wire_setattr){.which = r->which,
	                             .mode = r->mode,
	                             .uid = r->uid,
	                             .gid = r->gid,
	                             .atime_ns = r->atime_ns,
	                             .mtime_ns = r->mtime_ns,
	                             .size = r->size};
}

/* The decoding side of wenc_setattr, with its validation. */
static void dec_setattr(struct wdec *d, struct wire_req *r, int *bad)
{
	r->which = wdec_u32(d);
	r->mode = wdec_u32(d);
	r->atime_ns = wdec_i64(d);
	r->mtime_ns = wdec_i64(d);
	r->size = wdec_u64(d);
	r->uid = wdec_u32(d);
	r->gid = wdec_u32(d);
	if (!d->err && (r->which == 0 || (r->which & ~(uint32_t)WIRE_SET_ALL) || r->size > WIRE_MAX_OFFSET))
		*bad = -EINVAL;
}

static void dec_segs(struct wdec *d, struct wire_req *r, int *bad)
{
	r->nseg = wdec_u32(d);
	if (d->err)
		return;
	if (r->nseg == 0 || r->nseg > WIRE_MAX_SEGS) {
		d->err = -EBADMSG;
		return;
	}
	r->seg_total = 0;
	for (uint32_t i = 0; i < r->nseg; i++) {
		struct wire_seg *s = &r->seg[i];
		s->off = wdec_u64(d);
		s->len = wdec_u64(d);
		s->bufoff = wdec_u64(d);
		if (d->err)
			return;
		if (s->len == 0 || s->off > WIRE_MAX_OFFSET || s->len > WIRE_MAX_OFFSET - s->off ||
		    s->bufoff > WIRE_MAX_OFFSET || s->len > WIRE_MAX_OFFSET - s->bufoff) {
			*bad = -EINVAL;
			return;
		}
		r->seg_total += s->len;
		if (r->seg_total > WIRE_MAX_OFFSET) {
			*bad = -EINVAL;
			return;
		}
	}
	r->has_rma = (int)wdec_u32(d);
	if (d->err)
		return;
	if (r->has_rma != 0 && r->has_rma != 1) {
		d->err = -EBADMSG;
		return;
	}
	if (r->has_rma) {
		r->rma.addr = wdec_u64(d);
		r->rma.key = wdec_u64(d);
		r->rma.len = wdec_u64(d);
		if (d->err)
			return;
		for (uint32_t i = 0; i < r->nseg; i++)
			if (r->seg[i].bufoff + r->seg[i].len > r->rma.len) {
				*bad = -EINVAL;
				return;
			}
	}
}

int wire_decode_req(const void *msg, size_t len, struct wire_req *r)
{
	int rc = wire_hdr_get(msg, len, &r->h);
	if (rc)
		return rc;
	if (r->h.op & WIRE_REPLY || r->h.status != 0)
		return -EBADMSG;
	struct wdec d;
	int bad = 0;
	size_t n;
	wdec_init(&d, (const uint8_t *)msg + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
	r->path[0] = r->path2[0] = r->addr[0] = '\0';
	r->dirid = 0;
	r->nseg = 0;
	r->has_rma = 0;
	r->data = NULL;
	r->data_len = 0;
	r->list = NULL;
	r->list_len = 0;

	switch (r->h.op) {
	case WOP_NODE_LIST:
	case WOP_STATUS:
	case WOP_SYNC: break;
	case WOP_MIG_GET_ENTRY: dec_path(&d, r->path, 0, &bad); break;
	case WOP_MIG_DROP_ENTRY:
		dec_path(&d, r->path, 0, &bad);
		r->fileid = wdec_u64(&d);
		break;
	case WOP_MIG_GET_DATA:
	case WOP_MIG_DROP_DATA:
		r->fileid = wdec_u64(&d);
		r->seg[0].off = wdec_u64(&d);
		r->seg[0].len = wdec_u64(&d);
		if (!d.err && (r->seg[0].off > WIRE_MAX_OFFSET ||
		               r->seg[0].len > WIRE_MAX_OFFSET - r->seg[0].off || r->seg[0].len == 0))
			bad = -EINVAL;
		break;
	case WOP_MIG_HINT: {
		r->nitems = wdec_u32(&d);
		if (d.err)
			break;
		if (r->nitems == 0 || r->nitems > WIRE_MIG_HINT_MAX) {
			bad = -EINVAL;
			break;
		}
		r->items = d.p + d.pos;
		size_t start = d.pos;
		struct wire_mig_item *it = malloc(sizeof *it);
		if (!it)
			return -ENOMEM;
		for (uint32_t i = 0; i < r->nitems && !d.err && !bad; i++)
			bad = wire_mig_item_get(&d, it);
		free(it);
		r->items_len = d.pos - start;
		break;
	}
	case WOP_MIG_DONE:
		r->ring_epoch = wdec_u64(&d);
		wdec_str(&d, r->id, sizeof r->id);
		if (!d.err && !wire_id_ok(r->id, strlen(r->id)))
			bad = -EINVAL;
		break;
	case WOP_REJOINED:
		wdec_str(&d, r->id, sizeof r->id);
		if (!d.err && !wire_id_ok(r->id, strlen(r->id)))
			bad = -EINVAL;
		break;
	case WOP_JOIN:
		wdec_str(&d, r->id, sizeof r->id);
		wdec_str(&d, r->addr, sizeof r->addr);
		if (!d.err && (!wire_id_ok(r->id, strlen(r->id)) || !wire_addr_ok(r->addr, strlen(r->addr))))
			bad = -EINVAL;
		break;
	case WOP_SET_LIST: {
		struct wire_listinfo li;
		rc = list_dec(&d, &li);
		r->epoch = li.epoch;
		r->vnodes = li.vnodes;
		r->ring_epoch = li.ring_epoch;
		r->list = li.list;
		r->list_len = (uint32_t)li.nlist;
		r->prev = li.prev;
		r->prev_len = (uint32_t)li.nprev;
		if (rc == -EINVAL)
			bad = -EINVAL;
		break;
	}
	case WOP_CREATE:
	case WOP_MKDIR:
	case WOP_INSERT:
		dec_path(&d, r->path, 0, &bad);
		wdec_md(&d, &r->md);
		if (r->h.op != WOP_MKDIR)
			r->flags = wdec_u32(&d);
		r->dirid = d.pos < d.len ? wdec_u64(&d) : 0; /* (absent: unknown) */
		if (!d.err && !md_ok(&r->md))
			bad = -EINVAL;
		/* The entry type must fit the op: files, symlinks, FIFOs, sockets and device nodes
		 * are created, directories made. */
		if (!d.err && !bad) {
			uint32_t t = r->md.mode & S_IFMT;
			int special = t == S_IFIFO || t == S_IFSOCK || t == S_IFCHR || t == S_IFBLK;
			int ok = r->h.op == WOP_MKDIR ? t == S_IFDIR
			         : r->h.op == WOP_CREATE
			                 ? (t == S_IFREG || t == S_IFLNK || special)
			                 : (t == S_IFREG || t == S_IFLNK || t == S_IFDIR || special);
			if (!ok)
				bad = -EINVAL;
		}
		break;
	case WOP_STAT:
	case WOP_STAT_OPEN: dec_path(&d, r->path, 1, &bad); break;
	case WOP_DIR_EMPTY: /* [u64 dir id, u32 fence]: absent = only look */
		dec_path(&d, r->path, 1, &bad);
		r->flags = 0;
		if (d.pos < d.len) {
			r->dirid = wdec_u64(&d);
			r->flags = wdec_u32(&d);
			if (!d.err && r->flags != WIRE_FENCE_SET && r->flags != WIRE_FENCE_LIFT)
				bad = -EINVAL;
			if (!d.err && !bad && !r->path[0])
				bad = -EINVAL; /* the root is never removed */
		}
		break;
	case WOP_LEASE_RENEW: {
		r->nitems = wdec_u32(&d);
		if (!d.err && r->nitems > WIRE_LEASE_MAX)
			bad = -EINVAL;
		r->items = d.p + d.pos;
		size_t start = d.pos;
		for (uint32_t i = 0; i < r->nitems && !d.err && !bad; i++) {
			uint64_t id;
			uint32_t n;
			bad = wire_lease_item_get(&d, &id, &n);
		}
		r->items_len = d.pos - start;
		break;
	}
	case WOP_RMDIR:
	case WOP_UNLINK: dec_path(&d, r->path, 0, &bad); break;
	case WOP_READDIR:
		dec_path(&d, r->path, 1, &bad);
		wdec_str(&d, r->path2, CHFS_NAME_MAX + 1); /* cursor: last name returned, or "" */
		if (!d.err && strchr(r->path2, '/'))
			bad = -EINVAL;
		break;
	case WOP_REMOVE_IF:
		dec_path(&d, r->path, 0, &bad);
		r->fileid = wdec_u64(&d);
		break;
	case WOP_RENAME:
		dec_path(&d, r->path, 0, &bad);
		dec_path(&d, r->path2, 0, &bad);
		r->dirid = d.pos < d.len ? wdec_u64(&d) : 0;
		break;
	case WOP_SETATTR:
		dec_path(&d, r->path, 1, &bad);
		r->fileid = wdec_u64(&d);
		dec_setattr(&d, r, &bad);
		break;
	case WOP_WRITE_REPORT: /* the file's name and the size reported, then WRITE's body */
		dec_path(&d, r->path2, 0, &bad);
		r->size = wdec_u64(&d);
		if (!d.err && r->size > WIRE_MAX_OFFSET)
			bad = -EINVAL;
		/* fall through */
	case WOP_WRITE:
	case WOP_READ:
		r->fileid = wdec_u64(&d);
		dec_tag(&d, &r->tag, &bad);
		dec_backend_path(&d, r, &bad);
		dec_segs(&d, r, &bad);
		if (r->h.op != WOP_READ && !d.err && !bad) {
			r->data = wdec_bytes(&d, UINT32_MAX, &n);
			r->data_len = n;
			if (!d.err && !r->has_rma && r->data_len != r->seg_total)
				bad = -EINVAL;
			if (!d.err && r->has_rma && r->data_len != 0)
				bad = -EINVAL;
		}
		break;
	case WOP_DATA_TRUNCATE:
		r->fileid = wdec_u64(&d);
		r->size = wdec_u64(&d);
		if (!d.err && r->size > WIRE_MAX_OFFSET)
			bad = -EINVAL;
		break;
	case WOP_DATA_STAT:
		r->fileid = wdec_u64(&d);
		r->md.size = wdec_u64(&d);
		r->md.mtime_ns = wdec_i64(&d);
		r->md.ctime_ns = wdec_i64(&d);
		break;
	case WOP_LOCAL_PATH:
		r->fileid = wdec_u64(&d);
		dec_tag(&d, &r->tag, &bad);
		dec_backend_path(&d, r, &bad);
		break;
	case WOP_DATA_UNNAMED:
		r->fileid = wdec_u64(&d);
		dec_tag(&d, &r->tag, &bad);
		break;
	case WOP_DATA_REMOVE:
	case WOP_MOVED: r->fileid = wdec_u64(&d); break;
	case WOP_UNNAMED_OWED:
		r->fileid = wdec_u64(&d);
		wdec_str(&d, r->addr, sizeof r->addr);
		if (!d.err && (r->fileid == 0 || !wire_addr_ok(r->addr, strlen(r->addr))))
			bad = -EINVAL;
		break;
	case WOP_FIND: {
		dec_path(&d, r->path, 1, &bad);
		r->fileid = wdec_u64(&d);                        /* session */
		dec_path(&d, r->path2, 1, &bad);                 /* cursor, relative to the start */
		r->data = wdec_bytes(&d, FINDPRED_WIRE_MAX, &n); /* predicate */
		r->data_len = n;
		if (d.err || bad)
			break;
		struct findpred *fp = malloc(sizeof *fp);
		if (!fp)
			return -ENOMEM;
		bad = findpred_decode(r->data, n, fp);
		free(fp);
		if (bad == -EBADMSG)
			bad = -EINVAL;
		break;
	}
	case WOP_FLUSH: /* [u32 phase]: absent (an older client) = both */
		r->flags = d.pos < d.len ? wdec_u32(&d) : 0;
		if (!d.err && r->flags > 2)
			bad = -EINVAL;
		break;
	case WOP_FLUSH_ERRORS: break;
	case WOP_INODE_GET: r->fileid = wdec_u64(&d); break;
	case WOP_INODE_PUT:
		r->fileid = wdec_u64(&d);
		wdec_md(&d, &r->md);
		if (!d.err && (!md_ok(&r->md) || !S_ISREG(r->md.mode) || r->md.fileid != r->fileid))
			bad = -EINVAL;
		break;
	case WOP_INODE_ADJUST:
		r->fileid = wdec_u64(&d);
		r->flags = wdec_u32(&d);
		if (!d.err && r->flags > 1)
			bad = -EINVAL;
		break;
	case WOP_INODE_SETATTR:
		r->fileid = wdec_u64(&d);
		dec_setattr(&d, r, &bad);
		if (!d.err && (r->which & (WIRE_SET_LINKED | WIRE_SET_TOUCH | WIRE_SET_SUBDIR_ADD |
		                           WIRE_SET_SUBDIR_DEL)))
			bad = -EINVAL;
		break;
	case WOP_RELINK: /* an empty name: the file lost its last name (server/relink.h) */
		r->fileid = wdec_u64(&d);
		wdec_str(&d, r->path, CHFS_PATH_MAX);
		if (!d.err && *r->path)
			dec_path_check(r->path, 0, &bad);
		break;
	case WOP_ORPHAN_HOLD:
	case WOP_ORPHAN_DUE:
	case WOP_ORPHAN_DROP:
		r->fileid = wdec_u64(&d);
		r->size = r->h.op != WOP_ORPHAN_DROP ? wdec_u64(&d) : 0;
		if (!d.err && (r->fileid == 0 || r->size > WIRE_MAX_OFFSET))
			bad = -EINVAL;
		break;
	case WOP_META_SETTLE: dec_path(&d, r->path, 0, &bad); break;
	case WOP_RELINK_OWED: /* the asking member's address, then (optional: newer builds) its id */
		wdec_str(&d, r->addr, sizeof r->addr);
		r->id[0] = '\0';
		if (!d.err && d.pos < d.len)
			wdec_str(&d, r->id, sizeof r->id);
		if (!d.err && (!wire_addr_ok(r->addr, strlen(r->addr)) ||
		               (*r->id && !wire_id_ok(r->id, strlen(r->id)))))
			bad = -EINVAL;
		break;
	case WOP_STAGE_ENTRY:
		dec_path(&d, r->path, 0, &bad);
		r->flags = wdec_u32(&d);
		if (!d.err && (r->flags == 0 || r->flags > (1u << 30)))
			bad = -EINVAL;
		break;
	case WOP_STAGE_DATA:
		r->fileid = wdec_u64(&d);
		dec_tag(&d, &r->tag, &bad);
		dec_backend_path(&d, r, &bad);
		r->size = wdec_u64(&d);
		r->piece = wdec_u32(&d);
		if (!d.err && !bad && (!(r->tag.flags & MD_BACKEND) || r->size > WIRE_MAX_OFFSET))
			bad = -EINVAL;
		break;
	case WOP_STAGE_ENTRIES:
	case WOP_STAGE_FILES:
		r->flags = wdec_u32(&d); /* ENTRIES: chunk size; FILES: piece */
		r->piece = r->flags;
		if (!d.err && r->h.op == WOP_STAGE_ENTRIES && (r->flags == 0 || r->flags > (1u << 30)))
			bad = -EINVAL;
		if (!d.err && !bad && (bad = dec_stage_items(&d, r)) == -ENOMEM)
			return -ENOMEM;
		break;
	default: return -EBADMSG;
	}
	if (bad && !d.err)
		return bad; /* a field was well-formed but invalid (decoding may have stopped there) */
	return wdec_finish(&d);
}
