/* policy.c — the strict YAML subset chfs-job reads as its policy file.
 *
 * Accepted: comments (#), top-level "key: scalar" and "key:" followed by a block mapping indented
 * by spaces (one level), or "key: {a: b, c: d}" (flow mapping); scalars plain, "double" or
 * 'single' quoted. Everything else — tabs in indentation, sequences, anchors, a second level of
 * nesting, unknown or repeated keys, a value of the wrong type — is an error reported as one line
 * "FILE:LINE: KEY: what is wrong", so a typo never silently weakens a policy.
 *
 * Keys: method, paths (FROM: TO | deny | chfs:DIR), io_limit {disk, net}, trace_fork,
 * require {complete, root}. Path prefixes are stored lexically normal and matched at component
 * boundaries, the longest first (cj_policy_match). */
#include "policy.h"
#include "paths.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const method_names[CJ_NMETHODS] = {"auto", "rewrite", "seccomp", "ptrace", "fuse", "none"};

const char *cj_method_name(enum cj_method m) { return m < CJ_NMETHODS ? method_names[m] : "?"; }

int cj_method_parse(const char *s)
{
	for (int i = 0; i < CJ_NMETHODS; i++)
		if (strcmp(s, method_names[i]) == 0)
			return i;
	return -EINVAL;
}

int cj_rate_parse(const char *s, uint64_t *bps)
{
	if (strcmp(s, "unlimited") == 0 || strcmp(s, "0") == 0) {
		*bps = 0;
		return 0;
	}
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !(v > 0) || !isfinite(v))
		return -EINVAL;
	double mul = 1;
	switch (*end) {
	case 'K':
		mul = 1e3;
		end++;
		break;
	case 'M':
		mul = 1e6;
		end++;
		break;
	case 'G':
		mul = 1e9;
		end++;
		break;
	default: break;
	}
	if (strcmp(end, "B/s") != 0)
		return -EINVAL;
	v *= mul;
	if (v < 1 || v > 1e15)
		return -EINVAL;
	*bps = (uint64_t)v;
	return 0;
}

struct parser {
	const char *name;
	int line;
	char *err;
	size_t errlen;
	struct cj_policy *p;
	unsigned seen; /* top-level keys already given */
};

static int fail(struct parser *ps, const char *key, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(ps->err, ps->errlen, "%s:%d: %s: %s", ps->name, ps->line, key, msg);
	return -EINVAL;
}

/* Unquote a scalar in place; -EINVAL if a quote is unterminated or followed by text. */
static int unquote(char *s)
{
	size_t n = strlen(s);
	if (n == 0 || (s[0] != '"' && s[0] != '\''))
		return 0;
	char q = s[0];
	if (n < 2 || s[n - 1] != q)
		return -EINVAL;
	size_t o = 0;
	for (size_t i = 1; i < n - 1; i++) {
		if (q == '"' && s[i] == '\\' && i + 1 < n - 1)
			i++;
		else if (s[i] == q)
			return -EINVAL;
		s[o++] = s[i];
	}
	s[o] = '\0';
	return 0;
}

static char *trim(char *s)
{
	while (*s == ' ')
		s++;
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

/* Split "key: value" (the first ": " or a trailing ':' outside quotes); *val = "" if none. */
static int split_kv(char *s, char **key, char **val)
{
	char q = 0;
	for (char *c = s; *c; c++) {
		if (q) {
			if (*c == q)
				q = 0;
			continue;
		}
		if (*c == '"' || *c == '\'') {
			q = *c;
			continue;
		}
		if (*c == ':' && (c[1] == ' ' || c[1] == '\0')) {
			*c = '\0';
			*key = trim(s);
			*val = trim(c + 1);
			return unquote(*key);
		}
	}
	return -EINVAL;
}

static int parse_bool(struct parser *ps, const char *key, const char *v, bool *out)
{
	if (strcmp(v, "true") == 0)
		*out = true;
	else if (strcmp(v, "false") == 0)
		*out = false;
	else
		return fail(ps, key, "'%s' is not true or false", v);
	return 0;
}

static int add_rule(struct parser *ps, const char *from, const char *to)
{
	struct cj_policy *p = ps->p;
	char norm[PATH_MAX], key[PATH_MAX + 8];
	snprintf(key, sizeof(key), "paths.%s", from);
	if (cj_path_normalize(from, norm, sizeof(norm)) < 0)
		return fail(ps, key, "'%s' is not an absolute path", from);
	for (int i = 0; i < p->nrules; i++)
		if (strcmp(p->rules[i].from, norm) == 0)
			return fail(ps, key, "given twice");
	struct cj_rule r = {.action = CJ_MAP};
	char tonorm[PATH_MAX];
	if (strcmp(to, "deny") == 0) {
		r.action = CJ_DENY;
	} else if (strncmp(to, "chfs:", 5) == 0) {
		r.action = CJ_CHFS;
		const char *d = to[5] ? to + 5 : "/";
		if (cj_path_normalize(d, tonorm, sizeof(tonorm)) < 0)
			return fail(ps, key, "'%s' is not chfs:/ABSOLUTE/PATH", to);
		r.to = strdup(tonorm);
	} else if (cj_path_normalize(to, tonorm, sizeof(tonorm)) == 0) {
		r.to = strdup(tonorm);
	} else {
		return fail(ps, key, "'%s' is not an absolute path, deny or chfs:/DIR", to);
	}
	struct cj_rule *nr = realloc(p->rules, (size_t)(p->nrules + 1) * sizeof(*nr));
	if (!nr) {
		free(r.to);
		return -ENOMEM;
	}
	p->rules = nr;
	r.from = strdup(norm);
	r.from_len = strlen(norm);
	p->rules[p->nrules++] = r;
	return 0;
}

/* One entry "key: value" of the mapping under section. */
static int section_entry(struct parser *ps, const char *section, char *k, char *v, unsigned *seen)
{
	char key[300];
	snprintf(key, sizeof(key), "%s.%s", section, k);
	if (unquote(v) < 0)
		return fail(ps, key, "unterminated quote");
	if (strcmp(section, "paths") == 0) {
		if (!*v)
			return fail(ps, key, "needs a value (a path, deny or chfs:/DIR)");
		return add_rule(ps, k, v);
	}
	static const char *const io_keys[] = {"disk", "net", NULL};
	static const char *const req_keys[] = {"complete", "root", NULL};
	const char *const *keys = strcmp(section, "io_limit") == 0 ? io_keys : req_keys;
	int i = 0;
	while (keys[i] && strcmp(keys[i], k) != 0)
		i++;
	if (!keys[i])
		return fail(ps, key, "unknown key (expected %s or %s)", keys[0], keys[1]);
	if (*seen & (1u << i))
		return fail(ps, key, "given twice");
	*seen |= 1u << i;
	if (keys == io_keys) {
		if (cj_rate_parse(v, &ps->p->limit[i]) < 0)
			return fail(ps, key, "'%s' is not a rate (e.g. 30MB/s, 500KB/s, 1GB/s, unlimited)",
			            v);
		return 0;
	}
	return parse_bool(ps, key, v, i == 0 ? &ps->p->require_complete : &ps->p->require_root);
}

/* "{a: b, c: d}" */
static int flow_mapping(struct parser *ps, const char *section, char *v, unsigned *seen)
{
	size_t n = strlen(v);
	if (v[n - 1] != '}')
		return fail(ps, section, "flow mapping not closed with '}'");
	v[n - 1] = '\0';
	char *s = v + 1;
	while (*trim(s)) {
		char *c = s, q = 0;
		for (; *c && (q || *c != ','); c++)
			if (q ? *c == q : (*c == '"' || *c == '\''))
				q = q ? 0 : *c;
		char *next = *c ? c + 1 : c;
		*c = '\0';
		char *k, *val;
		if (split_kv(trim(s), &k, &val) < 0)
			return fail(ps, section, "'%s' is not 'key: value'", trim(s));
		int rc = section_entry(ps, section, k, val, seen);
		if (rc < 0)
			return rc;
		s = next;
	}
	return 0;
}

static int top_entry(struct parser *ps, char *k, char *v, const char **section)
{
	static const char *const keys[] = {"method", "paths", "io_limit", "trace_fork", "require", NULL};
	int i = 0;
	while (keys[i] && strcmp(keys[i], k) != 0)
		i++;
	if (!keys[i])
		return fail(ps, k, "unknown key (expected method, paths, io_limit, trace_fork or require)");
	if (ps->seen & (1u << i))
		return fail(ps, k, "given twice");
	ps->seen |= 1u << i;
	*section = NULL;
	if (i == 1 || i == 2 || i == 4) {
		unsigned sub_seen = 0;
		if (!*v) {
			*section = keys[i];
			return 0;
		}
		if (v[0] == '{')
			return flow_mapping(ps, keys[i], v, &sub_seen);
		return fail(ps, k, "expected a mapping (indented lines or {key: value, ...})");
	}
	if (unquote(v) < 0)
		return fail(ps, k, "unterminated quote");
	if (!*v)
		return fail(ps, k, "needs a value");
	if (i == 0) {
		int m = cj_method_parse(v);
		if (m < 0)
			return fail(ps, k, "'%s' is not one of auto, rewrite, seccomp, ptrace, fuse, none",
			            v);
		ps->p->method = (enum cj_method)m;
		return 0;
	}
	return parse_bool(ps, k, v, &ps->p->trace_fork);
}

/* Cut a comment: '#' at the start or after a space, outside quotes. */
static void strip_comment(char *s)
{
	char q = 0;
	for (char *c = s; *c; c++) {
		if (q) {
			if (*c == q)
				q = 0;
		} else if (*c == '"' || *c == '\'') {
			q = *c;
		} else if (*c == '#' && (c == s || c[-1] == ' ')) {
			*c = '\0';
			return;
		}
	}
}

int cj_policy_parse(const char *name, const char *text, struct cj_policy *p, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->trace_fork = true;
	p->file = strdup(name);
	struct parser ps = {.name = name, .err = err, .errlen = errlen, .p = p};
	const char *section = NULL;
	int sec_indent = -1, sec_line = 0, trace_fork_line = 0, method_line = 0;
	unsigned sub_seen = 0;
	char *buf = strdup(text), *save = NULL;
	int rc = 0;
	if (!buf || !p->file) {
		rc = -ENOMEM;
		goto out;
	}
	/* strtok_r would merge blank lines and break line numbers: split by hand */
	for (char *line = buf; line; line = save) {
		ps.line++;
		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		strip_comment(line);
		int indent = 0;
		while (line[indent] == ' ')
			indent++;
		if (line[indent] == '\t') {
			rc = fail(&ps, section ? section : "(indentation)",
			          "tab in indentation (use spaces)");
			goto out;
		}
		char *body = trim(line);
		if (!*body)
			continue;
		if (body[0] == '-' || body[0] == '&' || body[0] == '*' || body[0] == '!' || body[0] == '%') {
			rc = fail(&ps, section ? section : body,
			          "sequences, anchors, tags and directives are not accepted");
			goto out;
		}
		char *k, *v;
		if (split_kv(body, &k, &v) < 0) {
			rc = fail(&ps, section ? section : body, "'%s' is not 'key: value'", body);
			goto out;
		}
		if (indent == 0) {
			if (section && sec_indent < 0) {
				int l = ps.line;
				ps.line = sec_line;
				rc = fail(&ps, section, "empty mapping");
				ps.line = l;
				goto out;
			}
			section = NULL;
			sec_indent = -1;
			if (strcmp(k, "trace_fork") == 0)
				trace_fork_line = ps.line;
			if (strcmp(k, "method") == 0)
				method_line = ps.line;
			rc = top_entry(&ps, k, v, &section);
			if (rc < 0)
				goto out;
			sub_seen = 0;
			sec_line = ps.line;
			continue;
		}
		if (!section) {
			rc = fail(&ps, k, "indented line outside a mapping");
			goto out;
		}
		if (sec_indent < 0)
			sec_indent = indent;
		if (indent != sec_indent) {
			rc = fail(
			        &ps, k,
			        "inconsistent indentation (%d spaces, expected %d; one level of nesting only)",
			        indent, sec_indent);
			goto out;
		}
		rc = section_entry(&ps, section, k, v, &sub_seen);
		if (rc < 0)
			goto out;
	}
	if (section && sec_indent < 0) {
		ps.line = sec_line;
		rc = fail(&ps, section, "empty mapping");
		goto out;
	}
	if (p->require_complete && !p->trace_fork) {
		ps.line = trace_fork_line;
		rc = fail(&ps, "trace_fork",
		          "false contradicts require.complete: true (children would escape the policy)");
		goto out;
	}
	if (p->require_complete && p->method == CJ_REWRITE) {
		ps.line = method_line;
		rc = fail(
		        &ps, "method",
		        "rewrite is bypassable (code generated at run time) and cannot satisfy require.complete: true");
	}
out:
	free(buf);
	if (rc < 0)
		cj_policy_free(p);
	return rc;
}

int cj_policy_load(const char *file, struct cj_policy *p, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", file, strerror(e));
		return -e;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	char chunk[4096];
	size_t n;
	while (m && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, n, m);
	fclose(f);
	if (!m)
		return -ENOMEM;
	fclose(m);
	if (strlen(text) != len) {
		snprintf(err, errlen, "%s: contains a NUL byte (not a text file)", file);
		free(text);
		return -EINVAL;
	}
	int rc = cj_policy_parse(file, text, p, err, errlen);
	free(text);
	return rc;
}

void cj_policy_free(struct cj_policy *p)
{
	for (int i = 0; i < p->nrules; i++) {
		free(p->rules[i].from);
		free(p->rules[i].to);
	}
	free(p->rules);
	free(p->file);
	memset(p, 0, sizeof(*p));
}

static void write_rate(FILE *out, const char *k, uint64_t v)
{
	if (v == 0)
		fprintf(out, "  %s: unlimited\n", k);
	else if (v % 1000000 == 0)
		fprintf(out, "  %s: %lluMB/s\n", k, (unsigned long long)(v / 1000000));
	else
		fprintf(out, "  %s: %lluB/s\n", k, (unsigned long long)v);
}

void cj_policy_write(FILE *out, const struct cj_policy *p)
{
	fprintf(out, "method: %s\n", cj_method_name(p->method));
	if (p->nrules) {
		fprintf(out, "paths:\n");
		for (int i = 0; i < p->nrules; i++) {
			const struct cj_rule *r = &p->rules[i];
			if (r->action == CJ_DENY)
				fprintf(out, "  \"%s\": deny\n", r->from);
			else
				fprintf(out, "  \"%s\": \"%s%s\"\n", r->from,
				        r->action == CJ_CHFS ? "chfs:" : "", r->to);
		}
	}
	fprintf(out, "io_limit:\n");
	write_rate(out, "disk", p->limit[CJ_DISK]);
	write_rate(out, "net", p->limit[CJ_NET]);
	fprintf(out, "trace_fork: %s\n", p->trace_fork ? "true" : "false");
	fprintf(out, "require:\n  complete: %s\n  root: %s\n", p->require_complete ? "true" : "false",
	        p->require_root ? "true" : "false");
}

const struct cj_rule *cj_policy_match(const struct cj_policy *p, const char *path)
{
	const struct cj_rule *best = NULL;
	for (int i = 0; i < p->nrules; i++) {
		const struct cj_rule *r = &p->rules[i];
		if ((!best || r->from_len > best->from_len) && cj_path_under(path, r->from, r->from_len))
			best = r;
	}
	return best;
}

bool cj_policy_has(const struct cj_policy *p, enum cj_action a)
{
	for (int i = 0; i < p->nrules; i++)
		if (p->rules[i].action == a)
			return true;
	return false;
}

bool cj_policy_has_limits(const struct cj_policy *p) { return p->limit[CJ_DISK] || p->limit[CJ_NET]; }
