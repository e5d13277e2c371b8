/*
 * xprt_wire_test.c — the transport's message-header decoder against malformed input.
 *
 * Every message a server receives is untrusted: xprt_get_hdr() must accept exactly the
 * well-formed headers (lengths consistent with the received size, known kind, bounded address
 * and body) and reject everything else. Checks hand-made cases, then 200,000 deterministic
 * random mutations of valid messages (a bounded fuzz run) and that whatever is accepted is
 * self-consistent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xprt_internal.h"

static int failures;
#define CHECK(c, ...)                                                \
	do {                                                         \
		if (!(c)) {                                          \
			fprintf(stderr, "FAIL line %d: ", __LINE__); \
			fprintf(stderr, __VA_ARGS__);                \
			fputc('\n', stderr);                         \
			failures++;                                  \
		}                                                    \
	} while (0)

static unsigned char msg[XPRT_HDR_SIZE + XPRT_ADDR_MAX + 256];

static size_t make(int kind, uint16_t addrlen, uint32_t bodylen, uint64_t id)
{
	struct xprt_hdr h = {kind, addrlen, bodylen, id};
	xprt_put_hdr(msg, &h);
	memset(msg + XPRT_HDR_SIZE, 'a', addrlen);
	memset(msg + XPRT_HDR_SIZE + addrlen, 'b', bodylen);
	return XPRT_HDR_SIZE + addrlen + bodylen;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(void)
{
	struct xprt_hdr h;
	/* well-formed */
	size_t n = make(XPRT_MSG_REQUEST, 16, 100, 0x1122334455667788ULL);
	CHECK(xprt_get_hdr(msg, n, &h) == 0 && h.kind == XPRT_MSG_REQUEST && h.addrlen == 16 &&
	              h.bodylen == 100 && h.id == 0x1122334455667788ULL,
	      "valid request rejected or misdecoded");
	n = make(XPRT_MSG_REPLY, 0, 0, 1);
	CHECK(xprt_get_hdr(msg, n, &h) == 0 && h.bodylen == 0, "valid empty reply rejected");
	/* malformed */
	n = make(XPRT_MSG_REQUEST, 16, 100, 1);
	for (size_t k = 0; k < n; k++)
		CHECK(xprt_get_hdr(msg, k, &h) < 0, "truncated message (%zu of %zu) accepted", k, n);
	CHECK(xprt_get_hdr(msg, n + 1, &h) < 0, "message with trailing bytes accepted");
	n = make(XPRT_MSG_REPLY, 8, 0, 1);
	CHECK(xprt_get_hdr(msg, n, &h) < 0, "reply carrying an address accepted");
	n = make(XPRT_MSG_REQUEST, 0, 8, 1);
	CHECK(xprt_get_hdr(msg, n, &h) < 0, "request without a sender address accepted");
	n = make(XPRT_MSG_REQUEST, 16, 8, 1);
	msg[5] = 7;
	CHECK(xprt_get_hdr(msg, n, &h) < 0, "unknown kind accepted");
	n = make(XPRT_MSG_REQUEST, 16, 8, 1);
	msg[0] ^= 1;
	CHECK(xprt_get_hdr(msg, n, &h) < 0, "bad magic accepted");
	n = make(XPRT_MSG_REQUEST, 16, 8, 1);
	msg[4] = XPRT_WIRE_VERSION + 1;
	CHECK(xprt_get_hdr(msg, n, &h) < 0, "unknown version accepted");
	n = make(XPRT_MSG_REQUEST, 16, 8, 1);
	msg[6] = 0xff; /* addrlen 0x..ff > XPRT_ADDR_MAX */
	msg[7] = 0xff;
	CHECK(xprt_get_hdr(msg, n, &h) < 0, "huge address length accepted");
	n = make(XPRT_MSG_REQUEST, 16, 8, 1);
	msg[11] = 0xff; /* bodylen near 4 GiB: must not overflow the length check */
	CHECK(xprt_get_hdr(msg, n, &h) < 0, "huge body length accepted");

	/* bounded fuzz: mutate valid messages, every accepted one must be consistent */
	long accepted = 0;
	for (int it = 0; it < 200000; it++) {
		int kind = (next() & 1) ? XPRT_MSG_REQUEST : XPRT_MSG_REPLY;
		uint16_t al = kind == XPRT_MSG_REQUEST ? (uint16_t)(1 + next() % XPRT_ADDR_MAX) : 0;
		size_t len = make(kind, al, (uint32_t)(next() % 200), next());
		int flips = (int)(next() % 4);
		for (int f = 0; f < flips; f++)
			msg[(next() & 1) ? next() % XPRT_HDR_SIZE
			                 : next() % (len + 8 < sizeof msg ? len + 8 : sizeof msg)] ^=
			        (unsigned char)(1u << (next() % 8));
		size_t rlen = (next() % 8 == 0) ? (size_t)(next() % sizeof msg) : len;
		if (xprt_get_hdr(msg, rlen, &h) == 0) {
			accepted++;
			CHECK((size_t)XPRT_HDR_SIZE + h.addrlen + h.bodylen == rlen &&
			              h.addrlen <= XPRT_ADDR_MAX && h.bodylen <= XPRT_MAX_BODY &&
			              (h.kind == XPRT_MSG_REQUEST) == (h.addrlen > 0),
			      "inconsistent header accepted at iteration %d", it);
			if (failures > 10)
				break;
		}
	}
	printf("xprt wire: %ld of 200000 mutated messages well-formed and consistent; %s\n", accepted,
	       failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
