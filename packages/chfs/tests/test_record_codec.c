/*
 * test_record_codec.c — the on-disk record format (server/record_codec.c): every field survives
 * a round trip, including a symlink target and home address at their maximum lengths; the
 * layout is the documented one (magic and version at the front, not the wire encoding); and
 * the decoder rejects every truncation, a bad magic, another version, a non-zero reserved
 * field, oversized or NUL-holding strings, and trailing bytes.
 */
#define _GNU_SOURCE
#include "check.h"
#include "record_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint8_t buf[RECORD_MAX_LEN + 16];
static struct chfs_md in, out;

static int md_equal(const struct chfs_md *a, const struct chfs_md *b)
{
	return a->mode == b->mode && a->uid == b->uid && a->gid == b->gid && a->flags == b->flags &&
	       a->chunk_size == b->chunk_size && a->pkey == b->pkey && a->size == b->size &&
	       a->fileid == b->fileid && a->atime_ns == b->atime_ns && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns && a->nlink == b->nlink && strcmp(a->link, b->link) == 0 &&
	       strcmp(a->home, b->home) == 0;
}

/* Every field distinct and using its high bits, so a swapped or narrowed field shows. */
static void fill(struct chfs_md *m, size_t link_len, size_t home_len)
{
	memset(m, 0, sizeof *m);
	m->mode = S_IFLNK | 0777;
	m->uid = 0xfedcba98u;
	m->gid = 0x89abcdefu;
	m->flags = 0x80000001u;
	m->chunk_size = 0x7fff0000u;
	m->pkey = 0xdeadbeefu;
	m->size = 0xf123456789abcdefull;
	m->fileid = 0x8877665544332211ull;
	m->atime_ns = -1234567890123456789ll;
	m->mtime_ns = 0x7fffffffffffffffll;
	m->ctime_ns = (int64_t)0x8000000000000000ull;
	for (size_t i = 0; i < link_len; i++)
		m->link[i] = (char)('a' + i % 26);
	for (size_t i = 0; i < home_len; i++)
		m->home[i] = (char)('0' + i % 10);
}

static size_t encode(const struct chfs_md *m)
{
	size_t len = 0;
	memset(buf, 0xa5, sizeof buf); /* no byte left over from an earlier record */
	CHECK_EQ(record_encode(m, buf, sizeof buf, &len), 0);
	return len;
}

static void test_round_trip(void)
{
	size_t lens[][2] = {{0, 0}, {1, 0}, {0, 1}, {17, 23}, {CHFS_LINK_MAX - 1, WIRE_ADDR_MAX - 1}};
	for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		fill(&in, lens[k][0], lens[k][1]);
		size_t len = encode(&in);
		CHECK_EQ(len, RECORD_FIXED_LEN + lens[k][0] + lens[k][1]);
		memset(&out, 0x5a, sizeof out);
		CHECK_EQ(record_decode(buf, len, &out), 0);
		CHECK(md_equal(&in, &out));
		CHECK_EQ(strlen(out.link), lens[k][0]);
		CHECK_EQ(strlen(out.home), lens[k][1]);
	}
	/* The longest record is RECORD_MAX_LEN and fits exactly. */
	fill(&in, CHFS_LINK_MAX - 1, WIRE_ADDR_MAX - 1);
	size_t len = 0;
	CHECK_EQ(record_encode(&in, buf, RECORD_MAX_LEN, &len), 0);
	CHECK_EQ(len, (size_t)RECORD_MAX_LEN);
	CHECK_EQ(record_encode(&in, buf, RECORD_MAX_LEN - 1, &len), -EMSGSIZE);
	/* A string without its terminator cannot be encoded. */
	memset(in.link, 'x', sizeof in.link);
	CHECK_EQ(record_encode(&in, buf, sizeof buf, &len), -ENAMETOOLONG);
	fill(&in, 3, 0);
	memset(in.home, 'y', sizeof in.home);
	CHECK_EQ(record_encode(&in, buf, sizeof buf, &len), -ENAMETOOLONG);
}

/* The documented layout: little-endian magic "CFSR", u16 version, u16 reserved, mode at 8, the
 * two string lengths at 72 and 74, strings from 76 — not the wire's length-prefixed stream. */
static void test_layout(void)
{
	fill(&in, 2, 3);
	size_t len = encode(&in);
	CHECK(memcmp(buf, "CFSR", 4) == 0);
	CHECK(buf[4] == RECORD_VERSION && buf[5] == 0 && buf[6] == 0 && buf[7] == 0);
	CHECK(buf[8] == (uint8_t)in.mode && buf[9] == (uint8_t)(in.mode >> 8));
	CHECK(buf[40] == 0x11 && buf[47] == 0x88); /* fileid, little endian */
	CHECK(buf[72] == 2 && buf[73] == 0 && buf[74] == 3 && buf[75] == 0);
	CHECK(memcmp(buf + 76, "ab012", 5) == 0);
	CHECK_EQ(len, (size_t)81);
}

static void test_rejects(void)
{
	fill(&in, 40, 20);
	size_t len = encode(&in);
	/* Every truncation, including an empty file. */
	for (size_t n = 0; n < len; n++)
		CHECK_EQ(record_decode(buf, n, &out), -EBADMSG);
	/* Trailing garbage, one byte or many. */
	buf[len] = 0;
	CHECK_EQ(record_decode(buf, len + 1, &out), -EBADMSG);
	CHECK_EQ(record_decode(buf, len + 16, &out), -EBADMSG);
	CHECK_EQ(record_decode(buf, len, &out), 0);

	uint8_t save;
	/* Bad magic: each byte in turn. */
	for (int i = 0; i < 4; i++) {
		save = buf[i];
		buf[i] ^= 0x20;
		CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
		buf[i] = save;
	}
	/* Wrong version, older, newer or with the high byte set. */
	uint8_t versions[][2] = {{0, 0}, {RECORD_VERSION + 1, 0}, {RECORD_VERSION, 1}, {0xff, 0xff}};
	for (size_t k = 0; k < sizeof versions / sizeof versions[0]; k++) {
		buf[4] = versions[k][0];
		buf[5] = versions[k][1];
		CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
	}
	buf[4] = RECORD_VERSION;
	buf[5] = 0;
	/* An nlink (the old reserved field) on a record that is not a linked file's. */
	buf[6] = 1;
	CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
	buf[6] = 0;
	/* A linked file's inode record keeps its nlink (16 bits); more, or none of MD_LINKED, is
	 * refused at encode. */
	struct chfs_md *lm = calloc(1, sizeof *lm);
	CHECK(lm != NULL);
	lm->mode = S_IFREG | 0644;
	lm->flags = MD_LINKED;
	lm->nlink = 65535;
	size_t lmlen;
	CHECK_EQ(record_encode(lm, buf, sizeof buf, &lmlen), 0);
	CHECK(buf[6] == 0xff && buf[7] == 0xff);
	CHECK_EQ(record_decode(buf, lmlen, &out), 0);
	CHECK(out.nlink == 65535 && out.flags == MD_LINKED);
	lm->nlink = 65536;
	CHECK_EQ(record_encode(lm, buf, sizeof buf, &lmlen), -EINVAL);
	lm->nlink = 2;
	lm->flags = 0;
	CHECK_EQ(record_encode(lm, buf, sizeof buf, &lmlen), -EINVAL);
	free(lm);
	CHECK_EQ(record_encode(&in, buf, sizeof buf, &len), 0);
	/* The wire encoding of the same metadata (old "CMD1" records) is not a record. */
	memcpy(buf, "CMD1", 4);
	CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
	memcpy(buf, "CFSR", 4);
	CHECK_EQ(record_decode(buf, len, &out), 0);
	/* String lengths that disagree with the record's size. */
	buf[72]++;
	CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
	buf[72]--;
	buf[74]--;
	CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
	buf[74]++;
	/* NUL inside a string. */
	buf[76 + 5] = '\0';
	CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
	buf[76 + 5] = 'f';
	buf[76 + 40 + 2] = '\0';
	CHECK_EQ(record_decode(buf, len, &out), -EBADMSG);
	buf[76 + 40 + 2] = '2';
	CHECK_EQ(record_decode(buf, len, &out), 0);
	CHECK(md_equal(&in, &out));

	/* Oversized strings, even when the record's size agrees with the lengths. */
	memset(&in, 0, sizeof in);
	len = encode(&in);
	size_t ll = CHFS_LINK_MAX; /* one more than the limit */
	buf[72] = (uint8_t)ll;
	buf[73] = (uint8_t)(ll >> 8);
	memset(buf + RECORD_FIXED_LEN, 'z', ll);
	CHECK_EQ(record_decode(buf, RECORD_FIXED_LEN + ll, &out), -EBADMSG);
	memset(buf + 72, 0, 4);
	size_t hl = WIRE_ADDR_MAX;
	buf[74] = (uint8_t)hl;
	buf[75] = (uint8_t)(hl >> 8);
	CHECK_EQ(record_decode(buf, RECORD_FIXED_LEN + hl, &out), -EBADMSG);
}

int main(void)
{
	test_round_trip();
	test_layout();
	test_rejects();
	return check_result("test_record_codec");
}
