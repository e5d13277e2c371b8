/*
 * coop_auth_test.c - unit test of coop_cache_auth.c (run by test_coop_auth.py): HMAC-SHA256
 * against RFC 4231 test cases 1 and 2, split input equal to whole input, and a reply MAC
 * that changes with every field it covers.  Prints "ok" or the first failure.
 */
#include <stdio.h>
#include <string.h>

#include "coop_cache_auth.h"

static int
hex_eq(const unsigned char *mac, const char *hex)
{
	char buf[2 * COOP_MAC_LEN + 1];
	int i;

	for (i = 0; i < COOP_MAC_LEN; i++)
		sprintf(buf + 2 * i, "%02x", mac[i]);
	return (strcmp(buf, hex) == 0);
}

static int
fail(const char *what)
{
	printf("FAIL: %s\n", what);
	return (1);
}

int
main(void)
{
	static const unsigned char key1[20] = {
		0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
		0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b };
	const char *msg2 = "what do ya want for nothing?";
	const void *part[3];
	size_t len[3];
	unsigned char mac[COOP_MAC_LEN], mac2[COOP_MAC_LEN];
	unsigned char secret[COOP_MAC_LEN], session[COOP_MAC_LEN];
	unsigned char ns[COOP_NONCE_LEN], nc[COOP_NONCE_LEN];
	char data[100];
	int i;

	part[0] = "Hi There";
	len[0] = 8;
	if (coop_mac(key1, sizeof(key1), 1, part, len, mac) < 0 || !hex_eq(mac,
	    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
		return (fail("RFC 4231 case 1"));
	part[0] = msg2;
	len[0] = strlen(msg2);
	if (coop_mac((const unsigned char *)"Jefe", 4, 1, part, len, mac) < 0 ||
	    !hex_eq(mac, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
		return (fail("RFC 4231 case 2"));
	part[0] = msg2;
	len[0] = 5;
	part[1] = msg2 + 5;
	len[1] = 10;
	part[2] = msg2 + 15;
	len[2] = strlen(msg2) - 15;
	if (coop_mac((const unsigned char *)"Jefe", 4, 3, part, len, mac2) < 0 ||
	    !coop_mac_equal(mac, mac2))
		return (fail("split input"));

	memset(secret, 0x5a, sizeof(secret));	/* the cache secret: 32 bytes */
	if (coop_random(ns, sizeof(ns)) < 0 || coop_random(nc, sizeof(nc)) < 0 ||
	    memcmp(ns, nc, sizeof(ns)) == 0)
		return (fail("random nonces"));
	if (coop_handshake_mac(secret, "GFCC-client", ns, nc, mac) < 0 ||
	    coop_handshake_mac(secret, "GFCC-server", ns, nc, mac2) < 0 ||
	    coop_mac_equal(mac, mac2))
		return (fail("client and server proofs must differ"));
	if (coop_handshake_mac(secret, "GFCC-session", ns, nc, session) < 0)
		return (fail("session key"));
	memset(data, 'x', sizeof(data));
	/* fields: seq, fs, inc, ino, gen, off, reqlen, status; then len */
	if (coop_reply_mac(session, 7, 11, 12, 1, 2, 3, 100, 0, data, 100,
	    mac) < 0)
		return (fail("reply mac"));
	for (i = 0; i < 10; i++) {
		uint64_t f[9] = { 7, 11, 12, 1, 2, 3, 100, 0, 100 };

		if (i == 9)
			data[50] ^= 1;	/* one bit of the data */
		else if (i != 8)
			f[i] ^= 1;	/* i == 8: one byte shorter, below */
		if (coop_reply_mac(session, f[0], f[1], f[2], f[3], f[4], f[5],
		    (uint32_t)f[6], (int32_t)f[7], data,
		    (uint32_t)f[8] - (i == 8 ? 1 : 0), mac2) < 0)
			return (fail("reply mac"));
		if (coop_mac_equal(mac, mac2)) {
			printf("FAIL: reply MAC ignores field %d\n", i);
			return (1);
		}
		data[50] = 'x';
	}
	puts("ok");
	return (0);
}
