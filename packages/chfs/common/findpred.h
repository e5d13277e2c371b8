/*
 * findpred.h — a find(1) predicate as chfind sends it to the servers: parsed from find-style
 * arguments by the client, encoded into a byte string carried by WOP_FIND, decoded and
 * evaluated by every server against the entries it owns. One module on both sides, so the
 * client and the servers cannot disagree on what a predicate means.
 *
 * A predicate is the AND of up to FINDPRED_TERMS terms:
 *   -name GLOB       fnmatch(GLOB, basename, 0) (as find: '*' matches a leading '.')
 *   -size [+-]N[cwbkMG]  the size rounded UP to whole units (default 512-byte blocks) is
 *                    greater than (+), less than (-) or equal to N — find's rounding, so
 *                    -size -1M matches only empty files
 *   -newer FILE      mtime strictly later than FILE's (the caller resolves FILE's mtime)
 *   -type f|d|l[,…]  regular file, directory, symlink (a comma list is any of them)
 * "-a"/"-and" and "-true" are accepted and ignored; anything else (-o, !, parentheses, other
 * tests) is refused with a message naming it.
 *
 * Encoding (little endian, wire.h's field encoder): u32 nterms, then per term u32 kind and
 * NAME: str pattern | SIZE: u32 cmp (0 equal, 1 greater, 2 less), u64 n, u64 unit |
 * NEWER: i64 mtime ns | TYPE: u32 mask. Decoding trusts nothing: counts, kinds, units, masks
 * and pattern lengths are range-checked and trailing bytes are an error (-EBADMSG or -EINVAL).
 */
#ifndef CHFS_FINDPRED_H
#define CHFS_FINDPRED_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define FINDPRED_TERMS 16
#define FINDPRED_PATTERN_MAX 1023 /* bytes of one -name pattern */
#define FINDPRED_WIRE_MAX (4 + FINDPRED_TERMS * (8 + 4 + FINDPRED_PATTERN_MAX))

enum { FP_NAME = 1, FP_SIZE, FP_NEWER, FP_TYPE };
enum { FP_EQ = 0, FP_GT = 1, FP_LT = 2 };
enum { FP_T_REG = 1, FP_T_DIR = 2, FP_T_LNK = 4 };

struct findpred_term {
	uint32_t kind, cmp, types;
	uint64_t n, unit;
	int64_t newer_ns;
	char *pattern; /* FP_NAME: points into findpred.patterns */
};

/* ~17 KiB: keep it on the heap. */
struct findpred {
	uint32_t nterms;
	struct findpred_term t[FINDPRED_TERMS];
	char patterns[FINDPRED_TERMS][FINDPRED_PATTERN_MAX + 1];
};

/* Resolves -newer FILE to FILE's mtime in ns; 0 or -errno. */
typedef int (*findpred_newer_fn)(void *arg, const char *file, int64_t *mtime_ns);

/* Parse argv[0..argc) (find-style expression). On error returns -EINVAL (or the resolver's
 * -errno) and sets *bad to the offending argument (or "" for a missing operand). */
int findpred_parse(int argc, char *const argv[], findpred_newer_fn newer, void *arg, struct findpred *p,
                   const char **bad);
/* Encode p into buf (capacity cap): the length, or -EMSGSIZE. */
int findpred_encode(const struct findpred *p, void *buf, size_t cap);
/* Decode and validate; 0, -EBADMSG (truncated, trailing bytes) or -EINVAL (bad value). */
int findpred_decode(const void *buf, size_t len, struct findpred *p);
/* 1 if an entry with basename `name` (the last path component) matches every term. */
int findpred_match(const struct findpred *p, const char *name, uint32_t mode, uint64_t size,
                   int64_t mtime_ns);

#endif
