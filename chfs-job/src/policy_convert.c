/* policy_convert.c — `chfs-job convert-policy OLD`: the published policy format to YAML.
 *
 * The published format has four sections, each a header line ending in ':' followed by entries:
 *   type:       one line, "N(name)" or "name": ptrace -> ptrace; mod_janus/kernel -> seccomp (its
 *               modern equivalent); dyninst/rewrite -> rewrite; 1 alone means ptrace
 *   file_path:  "FROM TO FLAG" — FROM is shown as TO; FLAG 0 is the only value the published
 *               example uses and the only one accepted (any other is refused, not guessed); TO
 *               "deny" or "chfs:/DIR" use this project's extensions
 *   io_limit:   "disk N" / "net N" — N in MB/s
 *   etc:        "trace_fork 0|1"
 * The result is parsed back with the YAML parser before it is printed, so a conversion never
 * emits a policy chfs-job would refuse. */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int cfail(char *err, size_t errlen, const char *file, int line, const char *key, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s:%d: %s: %s", file, line, key, msg);
	return -EINVAL;
}

static const char *type_to_method(const char *t)
{
	char name[64] = "";
	const char *open = strchr(t, '(');
	if (open) {
		const char *close = strchr(open, ')');
		if (!close || close[1] || (size_t)(close - open - 1) >= sizeof(name))
			return NULL;
		memcpy(name, open + 1, (size_t)(close - open - 1));
		name[close - open - 1] = '\0';
	} else if (isdigit((unsigned char)t[0])) {
		return strcmp(t, "1") == 0 ? "ptrace" : NULL;
	} else {
		snprintf(name, sizeof(name), "%.63s", t);
	}
	for (char *c = name; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (strcmp(name, "ptrace") == 0)
		return "ptrace";
	if (strcmp(name, "mod_janus") == 0 || strcmp(name, "janus") == 0 || strcmp(name, "kernel") == 0 ||
	    strcmp(name, "seccomp") == 0)
		return "seccomp";
	if (strcmp(name, "dyninst") == 0 || strcmp(name, "dyninstapi") == 0 || strcmp(name, "rewrite") == 0)
		return "rewrite";
	if (strcmp(name, "fuse") == 0 || strcmp(name, "none") == 0 || strcmp(name, "auto") == 0)
		return open ? NULL : (name[0] == 'f' ? "fuse" : name[0] == 'n' ? "none" : "auto");
	return NULL;
}

int cj_policy_convert(const char *file, FILE *out, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", file, strerror(e));
		return -e;
	}
	char *yaml = NULL;
	size_t ylen = 0;
	FILE *y = open_memstream(&yaml, &ylen);
	char *paths = NULL;
	size_t plen = 0;
	FILE *pm = open_memstream(&paths, &plen);
	char line[4096], section[32] = "";
	int lineno = 0, rc = 0, have_type = 0;
	char disk[32] = "unlimited", net[32] = "unlimited";
	const char *trace_fork = "true";
	while (y && pm && fgets(line, sizeof(line), f)) {
		lineno++;
		char *s = line;
		s[strcspn(s, "\r\n")] = '\0';
		while (isspace((unsigned char)*s))
			s++;
		size_t n = strlen(s);
		while (n && isspace((unsigned char)s[n - 1]))
			s[--n] = '\0';
		if (!n || s[0] == '#')
			continue;
		if (s[n - 1] == ':' && !strchr(s, ' ')) {
			s[n - 1] = '\0';
			if (strcmp(s, "type") && strcmp(s, "file_path") && strcmp(s, "io_limit") &&
			    strcmp(s, "etc")) {
				rc = cfail(err, errlen, file, lineno, s,
				           "unknown section (expected type, file_path, io_limit, etc)");
				break;
			}
			snprintf(section, sizeof(section), "%s", s);
			continue;
		}
		char a[2048], b[2048], c[64], extra[8];
		int k = sscanf(s, "%2047s %2047s %63s %7s", a, b, c, extra);
		if (!section[0]) {
			rc = cfail(err, errlen, file, lineno, "(section)", "entry before any section header");
			break;
		}
		if (strcmp(section, "type") == 0) {
			const char *m = k == 1 ? type_to_method(a) : NULL;
			if (!m || have_type) {
				rc = cfail(
				        err, errlen, file, lineno, "type",
				        have_type
				                ? "given twice"
				                : "'%s' is not a known method (1(ptrace), mod_janus, dyninst, ...)",
				        s);
				break;
			}
			fprintf(y, "method: %s\n", m);
			have_type = 1;
		} else if (strcmp(section, "file_path") == 0) {
			if (k != 3 || strcmp(c, "0") != 0) {
				rc = cfail(err, errlen, file, lineno, "file_path",
				           k != 3 ? "'%s' is not 'FROM TO FLAG'"
				                  : "flag '%s' is unknown (only 0, a mapping, is defined)",
				           k != 3 ? s : c);
				break;
			}
			fprintf(pm, "  \"%s\": \"%s\"\n", a, b);
		} else if (strcmp(section, "io_limit") == 0) {
			char *end;
			double v = k == 2 ? strtod(b, &end) : 0;
			if (k != 2 || *end || v < 0 || (strcmp(a, "disk") && strcmp(a, "net"))) {
				rc = cfail(err, errlen, file, lineno, "io_limit",
				           "'%s' is not 'disk|net MB_PER_SEC'", s);
				break;
			}
			snprintf(a[0] == 'd' ? disk : net, sizeof(disk), v == 0 ? "unlimited" : "%gMB/s", v);
		} else {
			if (k != 2 || strcmp(a, "trace_fork") || (strcmp(b, "0") && strcmp(b, "1"))) {
				rc = cfail(err, errlen, file, lineno, "etc", "'%s' is not 'trace_fork 0|1'",
				           s);
				break;
			}
			trace_fork = b[0] == '1' ? "true" : "false";
		}
	}
	fclose(f);
	if (!y || !pm) {
		rc = -ENOMEM;
	} else {
		fflush(pm);
		if (plen)
			fprintf(y, "paths:\n%s", paths);
		fprintf(y, "io_limit:\n  disk: %s\n  net: %s\ntrace_fork: %s\n", disk, net, trace_fork);
	}
	if (y)
		fclose(y);
	if (pm)
		fclose(pm);
	if (rc == 0) {
		struct cj_policy p;
		/* line numbers then refer to the YAML written, not to FILE: say so */
		char name[4200];
		snprintf(name, sizeof(name), "%s (converted)", file);
		rc = cj_policy_parse(name, yaml, &p, err, errlen);
		if (rc == 0) {
			fputs(yaml, out);
			cj_policy_free(&p);
		}
	}
	free(yaml);
	free(paths);
	return rc;
}
