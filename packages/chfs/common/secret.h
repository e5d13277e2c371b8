/*
 * secret.h — the pool secret: 32 random bytes stored as 64 hex digits in a file readable only by
 * its owner. chfsctl creates it; chfsd and clients read it; every request carries it and the
 * server compares it in constant time.
 */
#ifndef CHFS_SECRET_H
#define CHFS_SECRET_H

#include <stddef.h>
#include <stdint.h>

#define CHFS_SECRET_LEN 32

/* Read the secret. -ENOENT if missing, -EACCES if unreadable or readable by group/others,
 * -EINVAL if malformed. */
int secret_load(const char *path, uint8_t out[CHFS_SECRET_LEN]);
/* The same from an open descriptor of the secret file (read at offset 0; fd stays open). */
int secret_load_fd(int fd, uint8_t out[CHFS_SECRET_LEN]);
/* Create a new random secret file (mode 0600, parent dir created 0700). */
int secret_create(const char *path);
/* Constant-time equality. */
int secret_equal(const uint8_t *a, const uint8_t *b);

#endif
