/*
 * coop_cache_auth.h - keyed MACs of the cooperative cache's peer protocol
 * (chfs-stack; see coop_cache_auth.c).  Shared by libgfarm and gfccd.
 */
#include <stddef.h>
#include <stdint.h>

#define COOP_MAC_LEN	32	/* HMAC-SHA256 */
#define COOP_NONCE_LEN	32

/* HMAC-SHA256 of the concatenation of n (pointer, length) parts; 0/-errno */
int coop_mac(const unsigned char *key, size_t keylen, int n,
	const void *const *part, const size_t *len, unsigned char *out);
/* fresh random bytes (OpenSSL's CSPRNG); 0 or -EIO */
int coop_random(unsigned char *buf, size_t len);
/* constant-time comparison of two MACs; 1 if equal */
int coop_mac_equal(const unsigned char *a, const unsigned char *b);

/*
 * Peer handshake (nonce_s from the server, nonce_c from the client):
 *   client proof  = MAC(secret, "GFCC-client" nonce_s nonce_c)
 *   server proof  = MAC(secret, "GFCC-server" nonce_s nonce_c)
 *   session key   = MAC(secret, "GFCC-session" nonce_s nonce_c)
 * The secret itself never travels.
 */
int coop_handshake_mac(const unsigned char *secret, const char *label,
	const unsigned char *nonce_s, const unsigned char *nonce_c,
	unsigned char *out);
/* MAC over one GET reply: MAC(session, seq req-fields status len data);
 * the request's fields are its whole key (fs, inc, ino, gen), off, len */
int coop_reply_mac(const unsigned char *session, uint64_t seq,
	uint64_t fs, uint64_t inc, uint64_t ino, uint64_t gen, uint64_t off,
	uint32_t reqlen,
	int32_t status, const void *data, uint32_t len, unsigned char *out);
