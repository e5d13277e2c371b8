/*
 * coop_cache_auth.c - keyed MACs of the cooperative cache's peer protocol
 * (chfs-stack patch against Gfarm 2.7.20).
 *
 * Peers share the cluster's 32-byte cache secret but never send it.  A
 * connection starts with a challenge-response in both directions (see
 * coop_cache_auth.h): the server sends a fresh nonce, the client answers
 * with its own nonce and an HMAC-SHA256 over both keyed by the secret, the
 * server answers with a differently labelled HMAC.  Each side thus proves
 * it knows the secret to the other without revealing it, and a recorded
 * exchange is useless later (fresh nonces).  Every GET reply then carries
 * an HMAC keyed by a per-connection session key over the request it
 * answers (its whole cache key: fs, incarnation, inode, generation), a sequence number and the data, so a reader accepts no byte
 * that a holder of the secret did not send for exactly that request.
 * HMAC and the random numbers come from OpenSSL (already a Gfarm
 * dependency); the same file is compiled into libgfarm and gfccd.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "coop_cache_auth.h"

int
coop_mac(const unsigned char *key, size_t keylen, int n,
	const void *const *part, const size_t *len, unsigned char *out)
{
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
	OSSL_PARAM params[2];
	size_t outlen = 0;
	int i, ok;

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    "SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	ok = ctx != NULL && EVP_MAC_init(ctx, key, keylen, params);
	for (i = 0; ok && i < n; i++)
		ok = EVP_MAC_update(ctx, part[i], len[i]);
	ok = ok && EVP_MAC_final(ctx, out, &outlen, COOP_MAC_LEN) &&
	    outlen == COOP_MAC_LEN;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return (ok ? 0 : -EIO);
}

int
coop_random(unsigned char *buf, size_t len)
{
	return (RAND_bytes(buf, (int)len) == 1 ? 0 : -EIO);
}

int
coop_mac_equal(const unsigned char *a, const unsigned char *b)
{
	return (CRYPTO_memcmp(a, b, COOP_MAC_LEN) == 0);
}

int
coop_handshake_mac(const unsigned char *secret, const char *label,
	const unsigned char *nonce_s, const unsigned char *nonce_c,
	unsigned char *out)
{
	const void *part[3] = { label, nonce_s, nonce_c };
	size_t len[3] = { strlen(label), COOP_NONCE_LEN, COOP_NONCE_LEN };

	return (coop_mac(secret, COOP_MAC_LEN, 3, part, len, out));
}

int
coop_reply_mac(const unsigned char *session, uint64_t seq,
	uint64_t fs, uint64_t inc, uint64_t ino, uint64_t gen, uint64_t off,
	uint32_t reqlen,
	int32_t status, const void *data, uint32_t len, unsigned char *out)
{
	struct {
		uint64_t seq, fs, inc, ino, gen, off;
		uint32_t reqlen, status, len;
	} __attribute__((packed)) h;
	const void *part[3] = { "GFCC-data", &h, data };
	size_t plen[3] = { 9, sizeof(h), len };

	h.seq = htobe64(seq);
	h.fs = htobe64(fs);
	h.inc = htobe64(inc);
	h.ino = htobe64(ino);
	h.gen = htobe64(gen);
	h.off = htobe64(off);
	h.reqlen = htobe32(reqlen);
	h.status = htobe32((uint32_t)status);
	h.len = htobe32(len);
	return (coop_mac(session, COOP_MAC_LEN, len > 0 ? 3 : 2, part, plen,
	    out));
}
