/*
 * findpred.c — see findpred.h. Parsing is the only place that reads user text; decoding is the
 * only place that reads server input, and it validates every field the same way parsing does,
 * so a decoded predicate is always one that parsing could have produced.
 */
#define _GNU_SOURCE
#include "findpred.h"

#include <errno.h>
#include <fnmatch.h>
#include <string.h>
#include <sys/stat.h>

static int unit_ok(uint64_t u)
{
	return u == 1 || u == 2 || u == 512 || u == 1024 || u == 1024 * 1024 || u == 1024 * 1024 * 1024;
}

/* "[+-]N[cwbkMG]" -> cmp, n, unit; -EINVAL if malformed or N does not fit. */
static int parse_size(const char *s, struct findpred_term *t)
{
	t->cmp = FP_EQ;
	if (*s == '+' || *s == '-')
		t->cmp = *s++ == '+' ? FP_GT : FP_LT;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	uint64_t n = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (n > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*s - '0');
	}
	t->unit = 512;
	if (*s) {
		switch (*s++) {
		case 'c': t->unit = 1; break;
		case 'w': t->unit = 2; break;
		case 'b': t->unit = 512; break;
		case 'k': t->unit = 1024; break;
		case 'M': t->unit = 1024 * 1024; break;
		case 'G': t->unit = 1024 * 1024 * 1024; break;
		default: return -EINVAL;
		}
		if (*s)
			return -EINVAL;
	}
	t->n = n;
	return 0;
}

/* "f", "d", "l" or a comma list of them -> mask. */
static int parse_type(const char *s, uint32_t *mask)
{
	*mask = 0;
	for (;;) {
		switch (*s++) {
		case 'f': *mask |= FP_T_REG; break;
		case 'd': *mask |= FP_T_DIR; break;
		case 'l': *mask |= FP_T_LNK; break;
		default: return -EINVAL;
		}
		if (*s == '\0')
			return 0;
		if (*s++ != ',')
			return -EINVAL;
	}
}

int findpred_parse(int argc, char *const argv[], findpred_newer_fn newer, void *arg, struct findpred *p,
                   const char **bad)
{
	memset(p, 0, sizeof *p);
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		*bad = a;
		if (!strcmp(a, "-a") || !strcmp(a, "-and") || !strcmp(a, "-true"))
			continue;
		int kind = !strcmp(a, "-name")    ? FP_NAME
		           : !strcmp(a, "-size")  ? FP_SIZE
		           : !strcmp(a, "-newer") ? FP_NEWER
		           : !strcmp(a, "-type")  ? FP_TYPE
		                                  : 0;
		if (!kind)
			return -EINVAL;
		if (i + 1 >= argc) {
			*bad = "";
			return -EINVAL;
		}
		if (p->nterms == FINDPRED_TERMS)
			return -E2BIG;
		const char *v = argv[++i];
		struct findpred_term *t = &p->t[p->nterms];
		*bad = v;
		int rc = 0;
		t->kind = (uint32_t)kind;
		switch (kind) {
		case FP_NAME:
			if (strlen(v) > FINDPRED_PATTERN_MAX)
				return -ENAMETOOLONG;
			t->pattern = p->patterns[p->nterms];
			strcpy(t->pattern, v);
			break;
		case FP_SIZE: rc = parse_size(v, t); break;
		case FP_NEWER: rc = newer ? newer(arg, v, &t->newer_ns) : -EINVAL; break;
		case FP_TYPE: rc = parse_type(v, &t->types); break;
		}
		if (rc)
			return rc;
		p->nterms++;
	}
	*bad = NULL;
	return 0;
}

int findpred_encode(const struct findpred *p, void *buf, size_t cap)
{
	struct wenc e;
	wenc_init(&e, buf, cap);
	wenc_u32(&e, p->nterms);
	for (uint32_t i = 0; i < p->nterms; i++) {
		const struct findpred_term *t = &p->t[i];
		wenc_u32(&e, t->kind);
		switch (t->kind) {
		case FP_NAME: wenc_str(&e, t->pattern); break;
		case FP_SIZE:
			wenc_u32(&e, t->cmp);
			wenc_u64(&e, t->n);
			wenc_u64(&e, t->unit);
			break;
		case FP_NEWER: wenc_i64(&e, t->newer_ns); break;
		case FP_TYPE: wenc_u32(&e, t->types); break;
		}
	}
	return e.err ? -EMSGSIZE : (int)e.len;
}

int findpred_decode(const void *buf, size_t len, struct findpred *p)
{
	struct wdec d;
	int bad = 0;
	wdec_init(&d, buf, len);
	p->nterms = wdec_u32(&d);
	if (!d.err && p->nterms > FINDPRED_TERMS)
		return -EINVAL;
	for (uint32_t i = 0; i < p->nterms && !d.err && !bad; i++) {
		struct findpred_term *t = &p->t[i];
		memset(t, 0, sizeof *t);
		t->kind = wdec_u32(&d);
		switch (t->kind) {
		case FP_NAME:
			t->pattern = p->patterns[i];
			wdec_str(&d, t->pattern, FINDPRED_PATTERN_MAX + 1);
			break;
		case FP_SIZE:
			t->cmp = wdec_u32(&d);
			t->n = wdec_u64(&d);
			t->unit = wdec_u64(&d);
			if (!d.err && (t->cmp > FP_LT || !unit_ok(t->unit)))
				bad = -EINVAL;
			break;
		case FP_NEWER: t->newer_ns = wdec_i64(&d); break;
		case FP_TYPE:
			t->types = wdec_u32(&d);
			if (!d.err &&
			    (t->types == 0 || t->types & ~(uint32_t)(FP_T_REG | FP_T_DIR | FP_T_LNK)))
				bad = -EINVAL;
			break;
		default:
			if (!d.err)
				bad = -EINVAL;
		}
	}
	if (bad && !d.err)
		return bad;
	return wdec_finish(&d);
}

static int term_match(const struct findpred_term *t, const char *name, uint32_t mode, uint64_t size,
                      int64_t mtime_ns)
{
	switch (t->kind) {
	case FP_NAME: return fnmatch(t->pattern, name, 0) == 0;
	case FP_SIZE: {
		uint64_t units = size / t->unit + (size % t->unit != 0); /* find rounds up */
		return t->cmp == FP_GT ? units > t->n : t->cmp == FP_LT ? units < t->n : units == t->n;
	}
	case FP_NEWER: return mtime_ns > t->newer_ns;
	case FP_TYPE: {
		uint32_t m = S_ISREG(mode)   ? FP_T_REG
		             : S_ISDIR(mode) ? FP_T_DIR
		             : S_ISLNK(mode) ? FP_T_LNK
		                             : 0;
		return (t->types & m) != 0;
	}
	}
	return 0;
}

int findpred_match(const struct findpred *p, const char *name, uint32_t mode, uint64_t size, int64_t mtime_ns)
{
	for (uint32_t i = 0; i < p->nterms; i++)
		if (!term_match(&p->t[i], name, mode, size, mtime_ns))
			return 0;
	return 1;
}
