/*
 * test_findpred.c — the chfind predicate (common/findpred.c): find(1)'s semantics (-size
 * rounding up to units with +/-/exact, -name globs, -type lists, -newer strictly later),
 * parse errors, encode/decode round trips, and a decoder that rejects malformed input —
 * every truncation, trailing bytes, out-of-range counts, kinds, units, comparisons and type
 * masks, over-long and NUL-carrying patterns, and seeded random mutations (which must never
 * crash and, when accepted, must decode to a predicate that re-encodes to the same bytes) —
 * both on its own and inside a WOP_FIND request (wire_decode_req).
 */
#include "check.h"
#include "findpred.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct findpred *P, *Q;
static struct wire_req req;

static int newer_fixed(void *arg, const char *file, int64_t *ns)
{
	(void)arg;
	if (strcmp(file, "ref"))
		return -ENOENT;
	*ns = 1000000000LL * 100 + 5;
	return 0;
}

static int parse(const char *expr)
{
	char buf[512], *argv[32];
	int argc = 0;
	snprintf(buf, sizeof buf, "%s", expr);
	for (char *t = strtok(buf, " "); t && argc < 32; t = strtok(NULL, " "))
		argv[argc++] = t;
	const char *bad;
	return findpred_parse(argc, argv, newer_fixed, NULL, P, &bad);
}

/* Does a regular file named n of this size and mtime match expr? */
static int file_matches(const char *expr, const char *n, uint64_t size, int64_t mtime)
{
	if (parse(expr) != 0)
		return -1;
	return findpred_match(P, n, S_IFREG | 0644, size, mtime);
}

static void test_size_semantics(void)
{
	/* find rounds the size up to whole units: 1 byte is 1 block, -1M matches only 0. */
	CHECK_EQ(file_matches("-size 1", "f", 1, 0), 1);
	CHECK_EQ(file_matches("-size 1", "f", 512, 0), 1);
	CHECK_EQ(file_matches("-size 1", "f", 513, 0), 0);
	CHECK_EQ(file_matches("-size 0", "f", 0, 0), 1);
	CHECK_EQ(file_matches("-size -1M", "f", 0, 0), 1);
	CHECK_EQ(file_matches("-size -1M", "f", 1, 0), 0);
	CHECK_EQ(file_matches("-size -2M", "f", 1048576, 0), 1);
	CHECK_EQ(file_matches("-size -2M", "f", 1048577, 0), 0);
	CHECK_EQ(file_matches("-size +1k", "f", 1024, 0), 0);
	CHECK_EQ(file_matches("-size +1k", "f", 1025, 0), 1);
	CHECK_EQ(file_matches("-size 3k", "f", 2049, 0), 1);
	CHECK_EQ(file_matches("-size 3k", "f", 3072, 0), 1);
	CHECK_EQ(file_matches("-size 3k", "f", 3073, 0), 0);
	CHECK_EQ(file_matches("-size 100c", "f", 100, 0), 1);
	CHECK_EQ(file_matches("-size -100c", "f", 99, 0), 1);
	CHECK_EQ(file_matches("-size -100c", "f", 100, 0), 0);
	CHECK_EQ(file_matches("-size 2w", "f", 3, 0), 1);
	CHECK_EQ(file_matches("-size +0G", "f", 1, 0), 1);
	CHECK_EQ(file_matches("-size 1G", "f", 1, 0), 1);
	/* a range is two terms, both must hold */
	CHECK_EQ(file_matches("-size +1k -size -4k", "f", 2048, 0), 1);
	CHECK_EQ(file_matches("-size +1k -a -size -4k", "f", 4096, 0), 0);
}

static void test_other_terms(void)
{
	CHECK_EQ(file_matches("-name *.txt", "a.txt", 0, 0), 1);
	CHECK_EQ(file_matches("-name *.txt", "a.txtx", 0, 0), 0);
	CHECK_EQ(file_matches("-name *", ".hidden", 0, 0), 1); /* find: '*' matches a leading dot */
	CHECK_EQ(file_matches("-name f[0-3]?", "f2x", 0, 0), 1);
	CHECK_EQ(file_matches("-newer ref", "f", 0, 100000000005LL), 0); /* same time: not newer */
	CHECK_EQ(file_matches("-newer ref", "f", 0, 100000000006LL), 1);
	CHECK_EQ(parse("-type d"), 0);
	CHECK_EQ(findpred_match(P, "d", S_IFDIR | 0755, 4096, 0), 1);
	CHECK_EQ(findpred_match(P, "d", S_IFREG | 0644, 0, 0), 0);
	CHECK_EQ(parse("-type f,l"), 0);
	CHECK_EQ(findpred_match(P, "s", S_IFLNK | 0777, 0, 0), 1);
	CHECK_EQ(findpred_match(P, "d", S_IFDIR | 0755, 0, 0), 0);
	CHECK_EQ(parse(""), 0); /* no test: everything */
	CHECK_EQ(findpred_match(P, "x", S_IFDIR, 0, 0), 1);
}

static void test_parse_errors(void)
{
	const char *bad[] = {"-size",
	                     "-size 1x",
	                     "-size k",
	                     "-size +-1",
	                     "-size 99999999999999999999",
	                     "-type x",
	                     "-type f,",
	                     "-type ,f",
	                     "-type fd",
	                     "-name",
	                     "-o",
	                     "!",
	                     "-print",
	                     "-newer nosuch",
	                     "( -name a )",
	                     "-size 1kk",
	                     "-size 1 -type"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int rc = parse(bad[i]);
		if (rc == 0)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK(rc < 0);
	}
	char *argv[40];
	for (int i = 0; i < 40; i += 2)
		argv[i] = "-type", argv[i + 1] = "f";
	const char *b;
	CHECK_EQ(findpred_parse(2 * FINDPRED_TERMS, argv, NULL, NULL, P, &b), 0);
	CHECK_EQ(findpred_parse(2 * FINDPRED_TERMS + 2, argv, NULL, NULL, P, &b), -E2BIG);
	char *longpat = malloc(FINDPRED_PATTERN_MAX + 2);
	memset(longpat, 'a', FINDPRED_PATTERN_MAX + 1);
	longpat[FINDPRED_PATTERN_MAX + 1] = '\0';
	char *la[] = {"-name", longpat};
	CHECK_EQ(findpred_parse(2, la, NULL, NULL, P, &b), -ENAMETOOLONG);
	longpat[FINDPRED_PATTERN_MAX] = '\0';
	CHECK_EQ(findpred_parse(2, la, NULL, NULL, P, &b), 0);
	free(longpat);
}

static uint8_t enc[FINDPRED_WIRE_MAX], enc2[FINDPRED_WIRE_MAX];

static void test_roundtrip_and_truncation(void)
{
	CHECK_EQ(parse("-name *.c -size +3M -size -9k -newer ref -type f,d -type l"), 0);
	int len = findpred_encode(P, enc, sizeof enc);
	CHECK(len > 0);
	CHECK_EQ(findpred_decode(enc, (size_t)len, Q), 0);
	CHECK_EQ(findpred_encode(Q, enc2, sizeof enc2), len);
	CHECK(memcmp(enc, enc2, (size_t)len) == 0);
	CHECK_EQ(findpred_match(Q, "a.c", S_IFREG, 4u << 20, 200000000000LL), 0); /* -size -9k fails */
	for (int k = 0; k < len; k++)
		CHECK(findpred_decode(enc, (size_t)k, Q) < 0);
	uint8_t *longer = malloc((size_t)len + 1);
	memcpy(longer, enc, (size_t)len);
	longer[len] = 0;
	CHECK_EQ(findpred_decode(longer, (size_t)len + 1, Q), -EBADMSG);
	free(longer);
	CHECK_EQ(findpred_encode(P, enc2, 10), -EMSGSIZE);
}

/* One hand-made predicate body. */
static size_t body(uint8_t *buf, uint32_t nterms, uint32_t kind, uint32_t a, uint64_t b, uint64_t c)
{
	struct wenc e;
	wenc_init(&e, buf, FINDPRED_WIRE_MAX);
	wenc_u32(&e, nterms);
	wenc_u32(&e, kind);
	if (kind == FP_SIZE) {
		wenc_u32(&e, a);
		wenc_u64(&e, b);
		wenc_u64(&e, c);
	} else if (kind == FP_TYPE) {
		wenc_u32(&e, a);
	} else if (kind == FP_NEWER) {
		wenc_i64(&e, (int64_t)b);
	}
	return e.len;
}

static void test_malformed_fields(void)
{
	CHECK_EQ(findpred_decode(enc, body(enc, 1, FP_SIZE, FP_GT, 3, 1024), Q), 0);
	CHECK_EQ(findpred_decode(enc, body(enc, 1, FP_SIZE, 3, 3, 1024), Q), -EINVAL);     /* cmp */
	CHECK_EQ(findpred_decode(enc, body(enc, 1, FP_SIZE, FP_EQ, 3, 0), Q), -EINVAL);    /* unit 0 */
	CHECK_EQ(findpred_decode(enc, body(enc, 1, FP_SIZE, FP_EQ, 3, 1000), Q), -EINVAL); /* unit */
	CHECK_EQ(findpred_decode(enc, body(enc, 1, FP_TYPE, 0, 0, 0), Q), -EINVAL);        /* no type */
	CHECK_EQ(findpred_decode(enc, body(enc, 1, FP_TYPE, 8, 0, 0), Q), -EINVAL);        /* unknown */
	CHECK_EQ(findpred_decode(enc, body(enc, 1, FP_TYPE, FP_T_DIR, 0, 0), Q), 0);
	CHECK_EQ(findpred_decode(enc, body(enc, 1, 0, 0, 0, 0), Q), -EINVAL); /* kind 0 */
	CHECK_EQ(findpred_decode(enc, body(enc, 1, 99, 0, 0, 0), Q), -EINVAL);
	CHECK_EQ(findpred_decode(enc, body(enc, FINDPRED_TERMS + 1, FP_TYPE, 1, 0, 0), Q), -EINVAL);
	CHECK_EQ(findpred_decode(enc, body(enc, 0xffffffffu, FP_TYPE, 1, 0, 0), Q), -EINVAL);
	CHECK(findpred_decode(enc, body(enc, 2, FP_TYPE, 1, 0, 0), Q) < 0); /* second term missing */
	CHECK(findpred_decode(enc, 0, Q) < 0);
	/* patterns: embedded NUL, longer than the limit, length beyond the message */
	struct wenc e;
	wenc_init(&e, enc, sizeof enc);
	wenc_u32(&e, 1);
	wenc_u32(&e, FP_NAME);
	wenc_bytes(&e, "a\0b", 3);
	CHECK(findpred_decode(enc, e.len, Q) < 0);
	static char pat[FINDPRED_PATTERN_MAX + 2];
	memset(pat, '*', sizeof pat - 1);
	wenc_init(&e, enc, sizeof enc);
	wenc_u32(&e, 1);
	wenc_u32(&e, FP_NAME);
	wenc_str(&e, pat);
	CHECK(findpred_decode(enc, e.len, Q) < 0);
	wenc_init(&e, enc, sizeof enc);
	wenc_u32(&e, 1);
	wenc_u32(&e, FP_NAME);
	wenc_u32(&e, 0x7fffffff);
	CHECK(findpred_decode(enc, e.len, Q) < 0);
}

static void test_random_mutations(void)
{
	CHECK_EQ(parse("-name x*y -size -7M -newer ref -type d"), 0);
	int len = findpred_encode(P, enc, sizeof enc);
	unsigned seed = 12345, accepted = 0;
	for (int round = 0; round < 200000; round++) {
		uint8_t m[256];
		size_t n = (size_t)len;
		memcpy(m, enc, n);
		for (int k = 0; k < 1 + (int)(rand_r(&seed) % 4); k++)
			m[rand_r(&seed) % n] = (uint8_t)rand_r(&seed);
		if (rand_r(&seed) % 8 == 0)
			n = rand_r(&seed) % (n + 1);
		if (findpred_decode(m, n, Q) == 0) {
			accepted++;
			int l2 = findpred_encode(Q, enc2, sizeof enc2);
			CHECK(l2 == (int)n && memcmp(m, enc2, n) == 0);
			(void)findpred_match(Q, "xay", S_IFDIR, 5, 7);
		}
	}
	CHECK(accepted > 0); /* some mutations (values of n, newer) stay valid */
}

/* A complete WOP_FIND request: start, session, cursor, predicate. */
static size_t find_req(uint8_t *buf, size_t cap, const char *start, const char *cursor, const void *pred,
                       size_t predlen)
{
	struct wenc e;
	wenc_init(&e, buf, cap);
	wenc_reserve(&e, WIRE_HDR_LEN);
	wenc_str(&e, start);
	wenc_u64(&e, 42);
	wenc_str(&e, cursor);
	wenc_bytes(&e, pred, predlen);
	struct wire_hdr h = {.magic = WIRE_MAGIC,
	                     .version = WIRE_VERSION,
	                     .op = WOP_FIND,
	                     .reqid = 1,
	                     .body_len = (uint32_t)(e.len - WIRE_HDR_LEN)};
	wire_hdr_put(buf, &h);
	return e.err ? 0 : e.len;
}

static void test_find_request(void)
{
	static uint8_t msg[FINDPRED_WIRE_MAX + 3 * 4096];
	CHECK_EQ(parse("-name *.h -type f"), 0);
	int plen = findpred_encode(P, enc, sizeof enc);
	size_t n = find_req(msg, sizeof msg, "a/b", "c/d", enc, (size_t)plen);
	CHECK_EQ(wire_decode_req(msg, n, &req), 0);
	CHECK(!strcmp(req.path, "a/b") && !strcmp(req.path2, "c/d") && req.fileid == 42);
	CHECK(req.data_len == (uint64_t)plen && memcmp(req.data, enc, (size_t)plen) == 0);
	CHECK_EQ(wire_decode_req(msg, find_req(msg, sizeof msg, "", "", enc, (size_t)plen), &req), 0);
	for (size_t k = WIRE_HDR_LEN; k < n; k++) { /* every truncation (header says the full length) */
		n = find_req(msg, sizeof msg, "a/b", "c/d", enc, (size_t)plen);
		CHECK(wire_decode_req(msg, k, &req) < 0);
	}
	const char *badpaths[] = {"/a", "a/", "a//b", "../a", "a/./b", "a/.."};
	for (size_t i = 0; i < sizeof badpaths / sizeof *badpaths; i++) {
		CHECK(wire_decode_req(msg, find_req(msg, sizeof msg, badpaths[i], "", enc, (size_t)plen),
		                      &req) < 0);
		CHECK(wire_decode_req(msg, find_req(msg, sizeof msg, "a", badpaths[i], enc, (size_t)plen),
		                      &req) < 0);
	}
	size_t bl = body(enc2, 1, FP_SIZE, FP_EQ, 1, 1000); /* a bad predicate inside */
	CHECK_EQ(wire_decode_req(msg, find_req(msg, sizeof msg, "a", "", enc2, bl), &req), -EINVAL);
	bl = body(enc2, 2, FP_TYPE, 1, 0, 0); /* a truncated predicate inside */
	CHECK(wire_decode_req(msg, find_req(msg, sizeof msg, "a", "", enc2, bl), &req) < 0);
}

int main(void)
{
	P = malloc(sizeof *P);
	Q = malloc(sizeof *Q);
	test_size_semantics();
	test_other_terms();
	test_parse_errors();
	test_roundtrip_and_truncation();
	test_malformed_fields();
	test_random_mutations();
	test_find_request();
	free(P);
	free(Q);
	return check_result("test_findpred");
}
