/*
 * record_codec.h — the on-disk format of a namespace record (one struct chfs_md), independent
 * of the RPC wire format in common/wire.h: the two evolve separately, and a change to the
 * protocol never silently changes what a server has stored (or the other way round).
 *
 * This module only turns a struct chfs_md into bytes and back; where records live and how they
 * are replaced atomically is ns_store.c's business. The layout is in record_codec.c's top
 * comment.
 */
#ifndef CHFSD_RECORD_CODEC_H
#define CHFSD_RECORD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h" /* struct chfs_md and its field limits only; not the wire encoder */

#define RECORD_MAGIC 0x52534643u /* bytes "CFSR" */
#define RECORD_VERSION 1
#define RECORD_FIXED_LEN 76 /* everything before the two strings */
/* Largest encoded record: both strings at their longest (limits exclude the NUL). */
#define RECORD_MAX_LEN (RECORD_FIXED_LEN + (CHFS_LINK_MAX - 1) + (WIRE_ADDR_MAX - 1))

/* Encode md into buf (capacity cap); *len gets the record's length. 0, or -EMSGSIZE if buf is
 * too small, -ENAMETOOLONG if a string exceeds its limit (not NUL-terminated within it), -EINVAL
 * for an nlink above 65535 or without MD_LINKED. */
int record_encode(const struct chfs_md *md, uint8_t *buf, size_t cap, size_t *len);

/* Decode exactly n bytes into md. 0, or -EBADMSG for a truncated record, a bad magic, another
 * version, an nlink on a record without MD_LINKED, an oversized or NUL-holding string, or trailing bytes. */
int record_decode(const uint8_t *buf, size_t n, struct chfs_md *md);

/* The mode field of an encoded record (at least RECORD_FIXED_LEN bytes, already decoded once). */
uint32_t record_mode(const uint8_t *buf);

#endif
