/* policy_test.c — unit tests of the policy parser, the converter's output, path normalisation
 * and rule matching: every accepted form parses to the expected values, and every rejected
 * form gives one line naming the file, line and key. */
#include "paths.h"
#include "policy.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c)                                                                              \
	do {                                                                                  \
		if (!(c)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                                           \
		}                                                                             \
	} while (0)

static void check_bad(const char *text, const char *expect)
{
	struct cj_policy p;
	char err[512] = "";
	int rc = cj_policy_parse("t.yaml", text, &p, err, sizeof(err));
	if (rc == 0 || !strstr(err, expect) || strchr(err, '\n')) {
		fprintf(stderr, "bad policy not refused as expected:\n%s\n-> rc %d, '%s' (want '%s')\n", text,
		        rc, err, expect);
		failures++;
	}
	if (rc == 0)
		cj_policy_free(&p);
}

static void test_good(void)
{
	struct cj_policy p;
	char err[512];
	const char *text = "# a policy\n"
	                   "method: seccomp   # trailing comment\n"
	                   "paths:\n"
	                   "  /etc/passwd: /etc/hosts\n"
	                   "  /secret: deny\n"
	                   "  \"/chfs\": \"chfs:/\"\n"
	                   "  /data/./x/..//y: chfs:/proj\n"
	                   "\n"
	                   "io_limit: {disk: 30MB/s, net: 1.5GB/s}\n"
	                   "trace_fork: false\n"
	                   "require:\n"
	                   "    complete: false\n"
	                   "    root: true\n";
	int rc = cj_policy_parse("t.yaml", text, &p, err, sizeof(err));
	CHECK(rc == 0);
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	CHECK(p.method == CJ_SECCOMP);
	CHECK(p.nrules == 4);
	CHECK(p.limit[CJ_DISK] == 30000000ULL && p.limit[CJ_NET] == 1500000000ULL);
	CHECK(!p.trace_fork && !p.require_complete && p.require_root);
	const struct cj_rule *r = cj_policy_match(&p, "/secret/a/b");
	CHECK(r && r->action == CJ_DENY);
	CHECK(cj_policy_match(&p, "/secretary") == NULL);
	r = cj_policy_match(&p, "/data/y/z");
	CHECK(r && r->action == CJ_CHFS && strcmp(r->from, "/data/y") == 0 && strcmp(r->to, "/proj") == 0);
	r = cj_policy_match(&p, "/chfs");
	CHECK(r && r->action == CJ_CHFS && strcmp(r->to, "/") == 0);
	r = cj_policy_match(&p, "/etc/passwd");
	CHECK(r && r->action == CJ_MAP && strcmp(r->to, "/etc/hosts") == 0);
	CHECK(cj_policy_match(&p, "/etc/passwd-") == NULL);
	cj_policy_free(&p);

	/* defaults, and an exception under a denial (longest prefix wins) */
	rc = cj_policy_parse("t.yaml", "paths:\n  /s: deny\n  /s/pub: /s/pub\n", &p, err, sizeof(err));
	CHECK(rc == 0);
	if (rc == 0) {
		CHECK(p.method == CJ_AUTO && p.trace_fork && !p.require_complete && !p.require_root);
		CHECK(cj_policy_match(&p, "/s/pub/x")->action == CJ_MAP);
		CHECK(cj_policy_match(&p, "/s/priv")->action == CJ_DENY);
		cj_policy_free(&p);
	}
	CHECK(cj_policy_parse("t.yaml", "", &p, err, sizeof(err)) == 0);
	cj_policy_free(&p);
}

static void test_bad(void)
{
	check_bad("metod: ptrace\n", "t.yaml:1: metod: unknown key");
	check_bad("method: ptrace\nmethod: seccomp\n", "t.yaml:2: method: given twice");
	check_bad("method: strace\n", "t.yaml:1: method: 'strace' is not one of");
	check_bad("io_limit:\n  disk: 30XB/s\n", "t.yaml:2: io_limit.disk: '30XB/s' is not a rate");
	check_bad("io_limit:\n  disk: -3MB/s\n", "t.yaml:2: io_limit.disk:");
	check_bad("io_limit:\n  cpu: 3MB/s\n", "t.yaml:2: io_limit.cpu: unknown key");
	check_bad("paths:\n  relative: /x\n", "t.yaml:2: paths.relative: 'relative' is not an absolute path");
	check_bad("paths:\n  /x: maybe\n",
	          "t.yaml:2: paths./x: 'maybe' is not an absolute path, deny or chfs:/DIR");
	check_bad("paths:\n  /x: deny\n  /x/: deny\n", "t.yaml:3: paths./x/: given twice");
	check_bad("paths:\n\t/x: deny\n", "t.yaml:2: paths: tab in indentation");
	check_bad("paths:\n  /x: deny\n   /y: deny\n", "t.yaml:3: /y: inconsistent indentation");
	check_bad("paths:\n  - /x\n", "t.yaml:2: paths: sequences");
	check_bad("trace_fork: yes\n", "t.yaml:1: trace_fork: 'yes' is not true or false");
	check_bad("require: {complete: true, root: maybe}\n",
	          "t.yaml:1: require.root: 'maybe' is not true or false");
	check_bad("require: {complete: true}\ntrace_fork: false\n",
	          "t.yaml:2: trace_fork: false contradicts");
	check_bad("method: rewrite\nrequire:\n  complete: true\n", "t.yaml:1: method: rewrite is bypassable");
	check_bad("paths:\nmethod: none\n", "t.yaml:1: paths: empty mapping");
	check_bad("io_limit: {disk: 1MB/s\n", "t.yaml:1: io_limit: flow mapping not closed");
	check_bad("method ptrace\n", "t.yaml:1: method ptrace: 'method ptrace' is not 'key: value'");
	check_bad("paths:\n  \"/x: deny\n", "t.yaml:2:");
}

static void test_paths(void)
{
	char out[PATH_MAX];
	CHECK(cj_path_normalize("/a/./b//c/../d/", out, sizeof(out)) == 0 && strcmp(out, "/a/b/d") == 0);
	CHECK(cj_path_normalize("/../..", out, sizeof(out)) == 0 && strcmp(out, "/") == 0);
	CHECK(cj_path_normalize("rel", out, sizeof(out)) < 0);
	CHECK(cj_path_join("/w/d", "../x/./y", out, sizeof(out)) == 0 && strcmp(out, "/w/x/y") == 0);
	CHECK(cj_path_join("/w", "/abs", out, sizeof(out)) == 0 && strcmp(out, "/abs") == 0);
	strcpy(out, "/base");
	CHECK(cj_path_join(out, "sub/..", out, sizeof(out)) == 0 && strcmp(out, "/base") == 0);
	CHECK(cj_path_under("/a/b", "/a", 2) && !cj_path_under("/ab", "/a", 2) &&
	      cj_path_under("/x", "/", 1));
	uint64_t v;
	CHECK(cj_rate_parse("10MB/s", &v) == 0 && v == 10000000);
	CHECK(cj_rate_parse("512KB/s", &v) == 0 && v == 512000);
	CHECK(cj_rate_parse("unlimited", &v) == 0 && v == 0);
	CHECK(cj_rate_parse("10MB", &v) < 0 && cj_rate_parse("MB/s", &v) < 0);
}

int main(void)
{
	test_good();
	test_bad();
	test_paths();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
