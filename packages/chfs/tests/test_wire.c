/*
 * test_wire.c — encode/decode of requests, and rejection of malformed input: every truncation,
 * bad header fields, trailing bytes, invalid paths, strings with NUL, bad segment lists and RMA
 * ranges.
 */
#include "check.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct wire_req req; /* large: keep off the stack */

static size_t finish(struct wenc *e, unsigned op)
{
	struct wire_hdr h = {.magic = WIRE_MAGIC,
	                     .version = WIRE_VERSION,
	                     .op = (uint16_t)op,
	                     .reqid = 7,
	                     .body_len = (uint32_t)(e->len - WIRE_HDR_LEN)};
	memset(h.secret, 0xab, sizeof h.secret);
	wire_hdr_put(e->p, &h);
	return e->len;
}

static void begin(struct wenc *e, uint8_t *buf, size_t cap)
{
	wenc_init(e, buf, cap);
	wenc_reserve(e, WIRE_HDR_LEN);
}

/* A data request's placement tag (pkey, chunk size, md flags). */
static void put_tag(struct wenc *e)
{
	wenc_u32(e, 7);
	wenc_u32(e, 65536);
	wenc_u32(e, 0);
}

static void write_body(struct wenc *e, int rma, uint64_t seglen, const char *data);

static size_t make_write(uint8_t *buf, size_t cap, int rma, uint64_t seglen, const char *data)
{
	struct wenc e;
	begin(&e, buf, cap);
	write_body(&e, rma, seglen, data);
	return finish(&e, WOP_WRITE);
}

/* A WRITE_REPORT: the name and the size reported, then WRITE's body. */
static size_t make_write_report(uint8_t *buf, size_t cap, const char *name, uint64_t end, const char *data)
{
	struct wenc e;
	begin(&e, buf, cap);
	wenc_str(&e, name);
	wenc_u64(&e, end);
	write_body(&e, 0, 3, data);
	return finish(&e, WOP_WRITE_REPORT);
}

static void write_body(struct wenc *e, int rma, uint64_t seglen, const char *data)
{
	wenc_u64(e, 0x1234);
	put_tag(e);
	wenc_u32(e, 2);
	wenc_u64(e, 0);
	wenc_u64(e, seglen);
	wenc_u64(e, 0);
	wenc_u64(e, 65536);
	wenc_u64(e, seglen);
	wenc_u64(e, seglen);
	wenc_u32(e, (uint32_t)rma);
	if (rma) {
		wenc_u64(e, 0);
		wenc_u64(e, 99);
		wenc_u64(e, 2 * seglen);
		wenc_u32(e, 0);
	} else {
		wenc_bytes(e, data, strlen(data));
	}
}

static size_t make_path_op(uint8_t *buf, size_t cap, unsigned op, const char *p, size_t plen)
{
	struct wenc e;
	begin(&e, buf, cap);
	wenc_bytes(&e, p, plen);
	return finish(&e, op);
}

static void list_put(struct wenc *e, uint64_t epoch, uint32_t vnodes, const char *list, const char *down)
{
	struct wire_listinfo li = {.epoch = epoch, .vnodes = vnodes, .list = list, .down = down, .prev = ""};
	li.nlist = strlen(list);
	li.ndown = strlen(down);
	wire_list_put(e, &li);
}

int main(void)
{
	uint8_t buf[16384], copy[16384];
	struct wenc e;
	size_t n;

	/* A valid CREATE round-trips every metadata field. */
	struct chfs_md md = {.mode = 0100644,
	                     .uid = 1,
	                     .gid = 2,
	                     .flags = MD_LOCAL,
	                     .chunk_size = 4096,
	                     .pkey = 3,
	                     .size = 10,
	                     .fileid = 99,
	                     .atime_ns = -5,
	                     .mtime_ns = 6,
	                     .ctime_ns = 7};
	strcpy(md.home, "tcp://127.0.0.1:5");
	strcpy(md.link, "some/target");
	begin(&e, buf, sizeof buf);
	wenc_str(&e, "dir/file");
	wenc_md(&e, &md);
	wenc_u32(&e, WIRE_CREATE_EXCL);
	n = finish(&e, WOP_CREATE);
	CHECK_EQ(wire_decode_req(buf, n, &req), 0);
	CHECK(strcmp(req.path, "dir/file") == 0);
	CHECK(req.md.mode == md.mode && req.md.uid == 1 && req.md.gid == 2 && req.md.pkey == 3);
	CHECK(req.md.size == 10 && req.md.fileid == 99 && req.md.atime_ns == -5);
	CHECK(strcmp(req.md.home, md.home) == 0 && strcmp(req.md.link, md.link) == 0);
	CHECK_EQ(req.flags, (uint32_t)WIRE_CREATE_EXCL);
	CHECK(req.h.reqid == 7 && req.h.secret[0] == 0xab);
	CHECK(req.dirid == 0); /* no parent id sent: unknown */

	{ /* The fence (server/fence.c): the parent id closing CREATE, MKDIR, INSERT and RENAME,
	   * DIR_EMPTY's directory id and fence; the root is never fenced, other fence values and
	   * anything after the optional fields are refused. */
		uint8_t fb[16384];
		size_t fn;
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "dir/file");
		wenc_md(&e, &md);
		wenc_u32(&e, WIRE_CREATE_EXCL);
		wenc_u64(&e, 0x1234567890ull);
		fn = finish(&e, WOP_CREATE);
		CHECK_EQ(wire_decode_req(fb, fn, &req), 0);
		CHECK(req.dirid == 0x1234567890ull && req.flags == WIRE_CREATE_EXCL);
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "dir/file");
		wenc_md(&e, &md);
		wenc_u32(&e, WIRE_CREATE_EXCL);
		wenc_u64(&e, 5);
		wenc_u32(&e, 0); /* trailing garbage */
		CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_CREATE), &req), -EBADMSG);
		struct chfs_md dmd = md;
		dmd.mode = S_IFDIR | 0755;
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "d/sub");
		wenc_md(&e, &dmd);
		wenc_u64(&e, 77);
		CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_MKDIR), &req), 0);
		CHECK(req.dirid == 77);
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "a");
		wenc_str(&e, "d/b");
		wenc_u64(&e, 78);
		CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_RENAME), &req), 0);
		CHECK(req.dirid == 78 && strcmp(req.path2, "d/b") == 0);
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "d/b");
		wenc_md(&e, &md);
		wenc_u32(&e, WIRE_INSERT_NOREPLACE);
		wenc_u64(&e, 79);
		CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_INSERT), &req), 0);
		CHECK(req.dirid == 79 && req.flags == WIRE_INSERT_NOREPLACE);
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "d");
		CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_DIR_EMPTY), &req), 0);
		CHECK(req.flags == 0 && req.dirid == 0); /* only look */
		uint32_t fences[] = {WIRE_FENCE_SET, WIRE_FENCE_LIFT, 0, 3};
		for (int i = 0; i < 4; i++) {
			begin(&e, fb, sizeof fb);
			wenc_str(&e, "d");
			wenc_u64(&e, 42);
			wenc_u32(&e, fences[i]);
			int want = i < 2 ? 0 : -EINVAL;
			CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_DIR_EMPTY), &req), want);
			if (i < 2)
				CHECK(req.dirid == 42 && req.flags == fences[i]);
		}
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "");
		wenc_u64(&e, 42);
		wenc_u32(&e, WIRE_FENCE_SET);
		CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_DIR_EMPTY), &req), -EINVAL);
		begin(&e, fb, sizeof fb);
		wenc_str(&e, "d");
		wenc_u64(&e, 42); /* the fence missing */
		CHECK_EQ(wire_decode_req(fb, finish(&e, WOP_DIR_EMPTY), &req), -EBADMSG);
	}

	{ /* Hard links: nlink travels in the md, only with MD_LINKED; the inode ops' fields. */
		uint8_t lb[16384];
		size_t ln;
		char key[WIRE_INODE_KEY_LEN + 1];
		wire_inode_key(0x0123456789abcdefull, key);
		CHECK(strcmp(key, "\x01"
		                  "0123456789abcdef") == 0);
		struct chfs_md lmd = md;
		lmd.flags = MD_LINKED;
		lmd.nlink = 3;
		lmd.mode = 0100644;
		for (int bad = 0; bad < 3; bad++) {
			begin(&e, lb, sizeof lb);
			wenc_u64(&e, bad == 2 ? 98 : 99); /* the md must be the file id's */
			lmd.flags = bad == 1 ? 0 : MD_LINKED;
			wenc_md(&e, &lmd);
			ln = finish(&e, WOP_INODE_PUT);
			CHECK_EQ(wire_decode_req(lb, ln, &req), bad ? -EINVAL : 0);
			if (!bad)
				CHECK(req.md.nlink == 3 && req.fileid == 99);
		}
		for (uint32_t add = 0; add < 3; add++) {
			begin(&e, lb, sizeof lb);
			wenc_u64(&e, 99);
			wenc_u32(&e, add);
			ln = finish(&e, WOP_INODE_ADJUST);
			CHECK_EQ(wire_decode_req(lb, ln, &req), add > 1 ? -EINVAL : 0);
		}
		uint32_t inode_which[] = {WIRE_SET_SIZE_MAX, WIRE_SET_LINKED, WIRE_SET_TOUCH};
		for (int i = 0; i < 3; i++) {
			begin(&e, lb, sizeof lb);
			wenc_u64(&e, 99);
			wenc_u32(&e, inode_which[i]);
			wenc_u32(&e, 0);
			wenc_i64(&e, 0);
			wenc_i64(&e, 0);
			wenc_u64(&e, 5);
			wenc_u32(&e, 0);
			wenc_u32(&e, 0);
			ln = finish(&e, WOP_INODE_SETATTR);
			CHECK_EQ(wire_decode_req(lb, ln, &req), i ? -EINVAL : 0);
		}
		/* Orphan leases: a file id (never 0) and, to hold or to make due, a size. */
		for (int i = 0; i < 8; i++) {
			begin(&e, lb, sizeof lb);
			wenc_u64(&e, i % 4 == 1 ? 0 : 77);
			if (i % 4 != 3)
				wenc_u64(&e, i % 4 == 2 ? WIRE_MAX_OFFSET + 1 : 8u << 20);
			ln = finish(&e, i < 4 ? WOP_ORPHAN_HOLD : WOP_ORPHAN_DUE);
			CHECK_EQ(wire_decode_req(lb, ln, &req), i % 4 == 0   ? 0
			                                        : i % 4 == 3 ? -EBADMSG
			                                                     : -EINVAL);
			if (i % 4 == 0)
				CHECK(req.fileid == 77 && req.size == 8u << 20);
		}
		CHECK(strcmp(wire_op_name(WOP_ORPHAN_DUE), "orphan-due") == 0);
		begin(&e, lb, sizeof lb);
		wenc_u64(&e, 77);
		CHECK_EQ(wire_decode_req(lb, finish(&e, WOP_ORPHAN_DROP), &req), 0);
		CHECK(req.fileid == 77);
		/* Open leases: STAT_OPEN is a STAT; LEASE_RENEW lists (file id, closes), at most
		 * WIRE_LEASE_MAX of them, each read back as sent. */
		begin(&e, lb, sizeof lb);
		wenc_str(&e, "a/b");
		CHECK_EQ(wire_decode_req(lb, finish(&e, WOP_STAT_OPEN), &req), 0);
		CHECK(strcmp(req.path, "a/b") == 0);
		begin(&e, lb, sizeof lb);
		wenc_str(&e, "a/../b");
		CHECK_EQ(wire_decode_req(lb, finish(&e, WOP_STAT_OPEN), &req), -EINVAL);
		for (int i = 0; i < 3; i++) {
			begin(&e, lb, sizeof lb);
			wenc_u32(&e, i == 1 ? WIRE_LEASE_MAX + 1 : 2);
			wenc_u64(&e, 77);
			wenc_u32(&e, 3);
			if (i != 2) {
				wenc_u64(&e, 0);
				wenc_u32(&e, 0);
			}
			ln = finish(&e, WOP_LEASE_RENEW);
			CHECK_EQ(wire_decode_req(lb, ln, &req), i == 0 ? 0 : i == 1 ? -EINVAL : -EBADMSG);
		}
		begin(&e, lb, sizeof lb);
		wenc_u32(&e, 1);
		wenc_u64(&e, 77);
		wenc_u32(&e, 3);
		CHECK_EQ(wire_decode_req(lb, finish(&e, WOP_LEASE_RENEW), &req), 0);
		{
			struct wdec d;
			uint64_t id;
			uint32_t closes;
			wdec_init(&d, req.items, req.items_len);
			CHECK(req.nitems == 1 && wire_lease_item_get(&d, &id, &closes) == 0 && id == 77 &&
			      closes == 3 && wdec_finish(&d) == 0);
		}
		CHECK(strcmp(wire_op_name(WOP_LEASE_RENEW), "lease-renew") == 0);
	}

	/* The entry type must fit the op (a client cannot create a "file" that claims to be a
	 * directory). */
	{
		uint8_t b2[16384];
		struct chfs_md dm = md;
		dm.mode = S_IFDIR | 0755;
		begin(&e, b2, sizeof b2);
		wenc_str(&e, "x");
		wenc_md(&e, &dm);
		wenc_u32(&e, 0);
		CHECK_EQ(wire_decode_req(b2, finish(&e, WOP_CREATE), &req), -EINVAL);
		begin(&e, b2, sizeof b2);
		wenc_str(&e, "x");
		wenc_md(&e, &md);
		CHECK_EQ(wire_decode_req(b2, finish(&e, WOP_MKDIR), &req), -EINVAL);
	}

	/* Every proper prefix of a valid message is rejected. */
	for (size_t k = 0; k < n; k++)
		CHECK(wire_decode_req(buf, k, &req) != 0);
	/* Trailing garbage is rejected (body_len adjusted so only the body check can catch it). */
	memcpy(copy, buf, n);
	copy[n] = 0;
	struct wire_hdr h;
	CHECK_EQ(wire_hdr_get(copy, n, &h), 0);
	h.body_len++;
	wire_hdr_put(copy, &h);
	CHECK_EQ(wire_decode_req(copy, n + 1, &req), -EBADMSG);

	/* Header fields. */
	memcpy(copy, buf, n);
	copy[0] ^= 1;
	CHECK_EQ(wire_decode_req(copy, n, &req), -EBADMSG);
	memcpy(copy, buf, n);
	copy[4] = 9;
	CHECK_EQ(wire_decode_req(copy, n, &req), -EPROTO);
	memcpy(copy, buf, n);
	copy[6] = 200;
	CHECK_EQ(wire_decode_req(copy, n, &req), -EBADMSG);
	memcpy(copy, buf, n);
	copy[7] = 0x80; /* reply bit on a request */
	CHECK(wire_decode_req(copy, n, &req) != 0);
	memcpy(copy, buf, n);
	copy[48]++; /* body length does not match */
	CHECK_EQ(wire_decode_req(copy, n, &req), -EBADMSG);

	/* Paths: traversal, absolute, NUL, too long. */
	CHECK_EQ(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, "a/../b", 6), &req), -EINVAL);
	CHECK_EQ(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, "/etc", 4), &req), -EINVAL);
	CHECK_EQ(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, "..", 2), &req), -EINVAL);
	CHECK(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, "a\0b", 3), &req) != 0);
	CHECK_EQ(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, "", 0), &req), 0);
	CHECK_EQ(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_UNLINK, "", 0), &req), -EINVAL);
	char longp[5000];
	memset(longp, 'a', sizeof longp);
	CHECK(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, longp, sizeof longp), &req) != 0);
	memset(longp, 'a', 300);
	CHECK_EQ(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, longp, 300), &req),
	         -ENAMETOOLONG);
	CHECK_EQ(wire_decode_req(buf, make_path_op(buf, sizeof buf, WOP_STAT, "ok/name", 7), &req), 0);

	/* WRITE: inline data must match the segments; RMA ranges must lie inside the descriptor. */
	CHECK_EQ(wire_decode_req(buf, make_write(buf, sizeof buf, 0, 3, "abcdef"), &req), 0);
	CHECK(req.nseg == 2 && req.seg_total == 6 && req.data_len == 6 && memcmp(req.data, "abcdef", 6) == 0);
	CHECK_EQ(wire_decode_req(buf, make_write(buf, sizeof buf, 0, 3, "abcde"), &req), -EINVAL);
	CHECK_EQ(wire_decode_req(buf, make_write(buf, sizeof buf, 1, 4096, ""), &req), 0);
	CHECK(req.has_rma && req.rma.key == 99 && req.rma.len == 8192);
	n = make_write(buf, sizeof buf, 1, 4096, "");
	buf[n - 4 - 8] = 1; /* rma.len = 4096 * 2 - ... now too short? set to tiny */
	memset(buf + n - 4 - 8, 0, 8);
	buf[n - 4 - 8] = 10;
	CHECK_EQ(wire_decode_req(buf, n, &req), -EINVAL);
	CHECK_EQ(wire_decode_req(buf, make_write(buf, sizeof buf, 0, 0, ""), &req), -EINVAL); /* empty seg */
	/* WRITE_REPORT: a canonical name and an end within range, then a valid WRITE body. */
	CHECK_EQ(wire_decode_req(buf, make_write_report(buf, sizeof buf, "d/f", 6, "abcdef"), &req), 0);
	CHECK(strcmp(req.path2, "d/f") == 0 && req.size == 6 && req.fileid == 0x1234 && req.nseg == 2 &&
	      req.data_len == 6 && memcmp(req.data, "abcdef", 6) == 0);
	CHECK_EQ(wire_decode_req(buf, make_write_report(buf, sizeof buf, "d/f", 6, "abc"), &req), -EINVAL);
	CHECK(wire_decode_req(buf, make_write_report(buf, sizeof buf, "d/../f", 6, "abcdef"), &req) != 0);
	CHECK(wire_decode_req(buf, make_write_report(buf, sizeof buf, "", 6, "abcdef"), &req) != 0);
	CHECK_EQ(wire_decode_req(buf, make_write_report(buf, sizeof buf, "f", WIRE_MAX_OFFSET + 1, "abcdef"),
	                         &req),
	         -EINVAL);
	CHECK(strcmp(wire_op_name(WOP_WRITE_REPORT), "write-report") == 0);
	begin(&e, buf, sizeof buf); /* a tag without a chunk size */
	wenc_u64(&e, 1);
	wenc_u32(&e, 7);
	wenc_u32(&e, 0);
	wenc_u32(&e, 0);
	wenc_u32(&e, 1);
	wenc_u64(&e, 0);
	wenc_u64(&e, 100);
	wenc_u64(&e, 0);
	wenc_u32(&e, 0);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_READ), &req), -EINVAL);

	/* Segment count limits and overflow. */
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 1);
	put_tag(&e);
	wenc_u32(&e, WIRE_MAX_SEGS + 1);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_READ), &req), -EBADMSG);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 1);
	put_tag(&e);
	wenc_u32(&e, 1);
	wenc_u64(&e, UINT64_MAX - 10);
	wenc_u64(&e, 100);
	wenc_u64(&e, 0);
	wenc_u32(&e, 0);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_READ), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 1);
	put_tag(&e);
	wenc_u32(&e, 1);
	wenc_u64(&e, 0);
	wenc_u64(&e, 100);
	wenc_u64(&e, 0);
	wenc_u32(&e, 2); /* has_rma must be 0 or 1 */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_READ), &req), -EBADMSG);

	/* Membership messages: ids, addresses and the ring parameter are validated. */
#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210"
	begin(&e, buf, sizeof buf);
	wenc_str(&e, ID1);
	wenc_str(&e, "tcp://1.2.3.4:5");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_JOIN), &req), 0);
	CHECK(strcmp(req.id, ID1) == 0 && strcmp(req.addr, "tcp://1.2.3.4:5") == 0);
	begin(&e, buf, sizeof buf);
	wenc_str(&e, ID1);
	wenc_str(&e, "not an address");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_JOIN), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	wenc_str(&e, "0123456789ABCDEF0123456789ABCDEF"); /* ids are lowercase */
	wenc_str(&e, "tcp://1.2.3.4:5");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_JOIN), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	wenc_str(&e, ID2);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_REJOINED), &req), 0);
	CHECK(strcmp(req.id, ID2) == 0 && strcmp(wire_op_name(WOP_REJOINED), "rejoined") == 0);
	begin(&e, buf, sizeof buf);
	wenc_str(&e, "tcp://1.2.3.4:5"); /* not an id */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_REJOINED), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	wenc_str(&e, "tcp://1.2.3.4:5");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK_OWED), &req), 0);
	CHECK(strcmp(req.addr, "tcp://1.2.3.4:5") == 0);
	begin(&e, buf, sizeof buf);
	wenc_str(&e, "not an address");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK_OWED), &req), -EINVAL);
	begin(&e, buf, sizeof buf); /* a newer build's: the identity after the address */
	wenc_str(&e, "tcp://1.2.3.4:5");
	wenc_str(&e, ID1);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK_OWED), &req), 0);
	CHECK(strcmp(req.addr, "tcp://1.2.3.4:5") == 0 && strcmp(req.id, ID1) == 0);
	begin(&e, buf, sizeof buf);
	wenc_str(&e, "tcp://1.2.3.4:5");
	wenc_str(&e, "xyz"); /* not an identity */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK_OWED), &req), -EINVAL);
	begin(&e, buf, sizeof buf); /* an earlier build's, after a request that had an id: none */
	wenc_str(&e, "tcp://1.2.3.4:5");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK_OWED), &req), 0);
	CHECK(req.id[0] == '\0');
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 42);
	wenc_str(&e, "dir/new");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK), &req), 0);
	CHECK(req.fileid == 42 && strcmp(req.path, "dir/new") == 0);
	begin(&e, buf, sizeof buf); /* empty: the file lost its last name (server/relink.h) */
	wenc_u64(&e, 42);
	wenc_str(&e, "");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK), &req), 0);
	CHECK(req.fileid == 42 && req.path[0] == '\0');
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 42);
	wenc_str(&e, "dir/../x"); /* not canonical */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_RELINK), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	list_put(&e, 3, 64, ID1 "=tcp://a:1," ID2 "=shm://b", ID2);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), 0);
	CHECK(req.epoch == 3 && req.vnodes == 64);
	begin(&e, buf, sizeof buf);
	list_put(&e, 3, 64, ID1 "=tcp://a:1,," ID2 "=shm://b", "");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	list_put(&e, 3, 64, "tcp://a:1", ""); /* entries without an id */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	list_put(&e, 3, 0, ID1 "=tcp://a:1", ""); /* no virtual nodes */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	list_put(&e, 3, 64, ID1 "=tcp://a:1", "xyz"); /* down: not an id */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), -EINVAL);
	CHECK(wire_id_in(ID2, ID1 "," ID2, 2 * WIRE_ID_LEN + 1) && !wire_id_in(ID2, ID1, WIRE_ID_LEN));
	{ /* the ring history: a malformed previous list, or a ring epoch newer than the list's */
		struct wire_listinfo li = {.epoch = 5,
		                           .ring_epoch = 4,
		                           .vnodes = 64,
		                           .list = ID1 "=tcp://a:1",
		                           .down = "",
		                           .prev = ID1 "=tcp://a:1," ID2 "=tcp://b:1"};
		li.nlist = strlen(li.list);
		li.nprev = strlen(li.prev);
		begin(&e, buf, sizeof buf);
		wire_list_put(&e, &li);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), 0);
		CHECK(req.ring_epoch == 4 && req.prev_len == li.nprev);
		li.ring_epoch = 6;
		begin(&e, buf, sizeof buf);
		wire_list_put(&e, &li);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), -EINVAL);
		li.ring_epoch = 4;
		li.prev = "garbage";
		li.nprev = 7;
		begin(&e, buf, sizeof buf);
		wire_list_put(&e, &li);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SET_LIST), &req), -EINVAL);
	}
	{ /* MIG_HINT: items validated (kind, path syntax, tag, chunk index), count bounded */
		struct wire_mig_item it = {.kind = WIRE_MIG_ENTRY};
		snprintf(it.path, sizeof it.path, "a/b");
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 2);
		wire_mig_item_put(&e, &it);
		it = (struct wire_mig_item){.kind = WIRE_MIG_CHUNK,
		                            .fileid = 9,
		                            .index = 3,
		                            .tag = {.pkey = 1, .chunk_size = 65536}};
		wire_mig_item_put(&e, &it);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_MIG_HINT), &req), 0);
		CHECK(req.nitems == 2);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 1);
		it.tag.chunk_size = 0; /* no chunk size */
		wire_mig_item_put(&e, &it);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_MIG_HINT), &req), -EINVAL);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 1);
		wenc_u32(&e, 7); /* unknown kind */
		CHECK(wire_decode_req(buf, finish(&e, WOP_MIG_HINT), &req) < 0);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 1);
		it = (struct wire_mig_item){.kind = WIRE_MIG_ENTRY};
		snprintf(it.path, sizeof it.path, "../x");
		wire_mig_item_put(&e, &it);
		CHECK(wire_decode_req(buf, finish(&e, WOP_MIG_HINT), &req) < 0);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, WIRE_MIG_HINT_MAX + 1);
		CHECK(wire_decode_req(buf, finish(&e, WOP_MIG_HINT), &req) < 0);
	}
	{ /* STAGE_FILES: backend files only, with their backend path; count bounded; read back */
		static struct chfs_md md;
		static struct wire_stage_file f;
		md = (struct chfs_md){
		        .fileid = 9, .pkey = 3, .chunk_size = 65536, .flags = MD_BACKEND, .size = 5};
		snprintf(md.link, sizeof md.link, "in/f1");
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 0); /* piece */
		wenc_u32(&e, 2);
		wire_stage_file_put(&e, &md);
		md.size = 1u << 20;
		wire_stage_file_put(&e, &md);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_STAGE_FILES), &req), 0);
		CHECK(req.nitems == 2);
		struct wdec d;
		wdec_init(&d, req.items, req.items_len);
		CHECK_EQ(wire_stage_file_get(&d, &f), 0);
		CHECK(f.fileid == 9 && f.size == 5 && f.tag.pkey == 3 && strcmp(f.path, "in/f1") == 0);
		CHECK_EQ(wire_stage_file_get(&d, &f), 0);
		CHECK(f.size == 1u << 20 && d.pos == d.len);
		md.flags = 0; /* not a backend file */
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 0);
		wenc_u32(&e, 1);
		wire_stage_file_put(&e, &md);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_STAGE_FILES), &req), -EINVAL);
		md.flags = MD_BACKEND;
		snprintf(md.link, sizeof md.link, "../etc/passwd"); /* not canonical */
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 0);
		wenc_u32(&e, 1);
		wire_stage_file_put(&e, &md);
		CHECK(wire_decode_req(buf, finish(&e, WOP_STAGE_FILES), &req) < 0);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 0);
		wenc_u32(&e, 2); /* says two, carries none */
		CHECK(wire_decode_req(buf, finish(&e, WOP_STAGE_FILES), &req) < 0);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 0);
		wenc_u32(&e, WIRE_STAGE_MAX + 1);
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_STAGE_FILES), &req), -EINVAL);
	}
	{ /* STAGE_ENTRIES: chunk size, then canonical paths */
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 65536);
		wenc_u32(&e, 2);
		wenc_str(&e, "a/b");
		wenc_str(&e, "c");
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_STAGE_ENTRIES), &req), 0);
		CHECK(req.nitems == 2 && req.flags == 65536);
		char p[CHFS_PATH_MAX];
		struct wdec d;
		wdec_init(&d, req.items, req.items_len);
		CHECK_EQ(wire_stage_path_get(&d, p), 0);
		CHECK(strcmp(p, "a/b") == 0);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 0); /* no chunk size */
		wenc_u32(&e, 1);
		wenc_str(&e, "a");
		CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_STAGE_ENTRIES), &req), -EINVAL);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 65536);
		wenc_u32(&e, 1);
		wenc_str(&e, "a//b");
		CHECK(wire_decode_req(buf, finish(&e, WOP_STAGE_ENTRIES), &req) < 0);
		begin(&e, buf, sizeof buf);
		wenc_u32(&e, 65536);
		wenc_u32(&e, 1);
		wenc_str(&e, "a");
		wenc_u32(&e, 5); /* trailing garbage */
		CHECK(wire_decode_req(buf, finish(&e, WOP_STAGE_ENTRIES), &req) < 0);
	}
	{
		struct wire_member m[2];
		const char *l = ID1 "=tcp://a:1," ID2 "=tcp://a:1"; /* one address twice */
		CHECK_EQ(wire_list_parse(l, strlen(l), m, 2), -EINVAL);
		l = ID1 "=tcp://a:1," ID2 "=tcp://b:1";
		CHECK_EQ(wire_list_parse(l, strlen(l), m, 1), -E2BIG);
		CHECK_EQ(wire_list_parse(l, strlen(l), m, 2), 2);
		CHECK(strcmp(m[1].id, ID2) == 0 && strcmp(m[1].addr, "tcp://b:1") == 0);
	}

	/* DATA_REMOVE is a file id alone; LOCAL_PATH a file id and the placement tag. */
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 5);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_DATA_REMOVE), &req), 0);
	CHECK(req.fileid == 5);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 5);
	put_tag(&e);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_DATA_REMOVE), &req), -EBADMSG);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_LOCAL_PATH), &req), 0);
	CHECK(req.fileid == 5 && req.tag.chunk_size == 65536);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 5);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_LOCAL_PATH), &req), -EBADMSG);
	/* DATA_UNNAMED: a file id and the tag, no path (whatever the tag's flags say) */
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_DATA_UNNAMED), &req), -EBADMSG);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 6);
	wenc_u32(&e, 3);
	wenc_u32(&e, 65536);
	wenc_u32(&e, MD_LOCAL | MD_FLUSH);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_DATA_UNNAMED), &req), 0);
	CHECK(req.fileid == 6 && req.tag.chunk_size == 65536 && req.tag.flags == (MD_LOCAL | MD_FLUSH));
	CHECK(strcmp(wire_op_name(WOP_DATA_UNNAMED), "data_unnamed") == 0);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 6);
	wenc_u32(&e, 3);
	wenc_u32(&e, 0); /* chunk size 0 */
	wenc_u32(&e, MD_FLUSH);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_DATA_UNNAMED), &req), -EINVAL);
	/* UNNAMED_OWED: a file id (not 0) and the address of the member that missed it */
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 7);
	wenc_str(&e, "tcp://127.0.0.1:4000");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_UNNAMED_OWED), &req), 0);
	CHECK(req.fileid == 7 && strcmp(req.addr, "tcp://127.0.0.1:4000") == 0);
	CHECK(strcmp(wire_op_name(WOP_UNNAMED_OWED), "unnamed-owed") == 0);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 0);
	wenc_str(&e, "tcp://127.0.0.1:4000");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_UNNAMED_OWED), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 7);
	wenc_str(&e, "no address");
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_UNNAMED_OWED), &req), -EINVAL);
	begin(&e, buf, sizeof buf);
	wenc_u64(&e, 7);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_UNNAMED_OWED), &req), -EBADMSG);

	/* SETATTR: unknown bits rejected. */
	begin(&e, buf, sizeof buf);
	wenc_str(&e, "f");
	wenc_u64(&e, 0);
	wenc_u32(&e, WIRE_SET_ALL + 1);
	wenc_u32(&e, 0);
	wenc_i64(&e, 0);
	wenc_i64(&e, 0);
	wenc_u64(&e, 0);
	wenc_u32(&e, 0);
	wenc_u32(&e, 0);
	CHECK_EQ(wire_decode_req(buf, finish(&e, WOP_SETATTR), &req), -EINVAL);

	/* The encoder reports overflow instead of writing past its buffer. */
	uint8_t tiny[8];
	wenc_init(&e, tiny, sizeof tiny);
	wenc_u64(&e, 1);
	CHECK_EQ(e.err, 0);
	wenc_u32(&e, 1);
	CHECK_EQ(e.err, -EMSGSIZE);
	CHECK(strcmp(wire_op_name(WOP_READ), "read") == 0 && strcmp(wire_op_name(999), "unknown") == 0);
	return check_result("test_wire");
}
