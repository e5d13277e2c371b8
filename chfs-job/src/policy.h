/* policy.h — the job policy: what `chfs-job` enforces, parsed once from a YAML file and then only
 * read. Every method applies the same struct cj_policy (path rules, bandwidth limits, fork
 * tracing); the parser (policy.c) accepts a strict subset of YAML, the converter
 * (policy_convert.c) turns the published format into it. */
#ifndef CHFS_JOB_POLICY_H
#define CHFS_JOB_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cj_method { CJ_AUTO, CJ_REWRITE, CJ_SECCOMP, CJ_PTRACE, CJ_FUSE, CJ_NONE, CJ_NMETHODS };

/* What a path rule does with the paths at or below its prefix. */
enum cj_action {
	CJ_MAP,  /* replace the prefix with another local path (identity = allow, an exception) */
	CJ_DENY, /* the path does not exist for the job (ENOENT) */
	CJ_CHFS, /* the prefix shows a CHFS directory (to = the CHFS path after "chfs:") */
};

enum cj_class { CJ_DISK, CJ_NET, CJ_NCLASSES };

struct cj_rule {
	char *from; /* absolute, lexically normal, no trailing slash (except "/") */
	size_t from_len;
	enum cj_action action;
	char *to; /* CJ_MAP: absolute local path; CJ_CHFS: CHFS path; CJ_DENY: NULL */
};

struct cj_policy {
	char *file; /* where it came from, for messages */
	enum cj_method method;
	struct cj_rule *rules;
	int nrules;
	uint64_t limit[CJ_NCLASSES]; /* bytes per second, 0 = unlimited */
	bool trace_fork;
	bool require_complete; /* a process must not be able to bypass the policy */
	bool require_root;     /* false: methods that need root (fuse) are not allowed */
};

/* Parse FILE into *p (zeroed first). On error: -EINVAL (or -errno), and one line
 * "FILE:LINE: KEY: what is wrong" in err. */
int cj_policy_load(const char *file, struct cj_policy *p, char *err, size_t errlen);
/* The same from a string (name used in messages). */
int cj_policy_parse(const char *name, const char *text, struct cj_policy *p, char *err, size_t errlen);
void cj_policy_free(struct cj_policy *p);
/* Write p as YAML (the format cj_policy_parse reads). */
void cj_policy_write(FILE *out, const struct cj_policy *p);

/* Convert the published format (type:/file_path:/io_limit:/etc:) in FILE to YAML on out. */
int cj_policy_convert(const char *file, FILE *out, char *err, size_t errlen);

const char *cj_method_name(enum cj_method m);
int cj_method_parse(const char *s); /* -EINVAL if unknown */
/* "30MB/s", "1.5GB/s", "512KB/s", "100B/s", "unlimited", "0"; returns -EINVAL if malformed. */
int cj_rate_parse(const char *s, uint64_t *bytes_per_sec);

/* The rule governing absolute normal path: the longest prefix at a component boundary, or NULL. */
const struct cj_rule *cj_policy_match(const struct cj_policy *p, const char *path);
bool cj_policy_has(const struct cj_policy *p, enum cj_action a);
bool cj_policy_has_limits(const struct cj_policy *p);

#endif
