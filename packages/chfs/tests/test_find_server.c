/*
 * test_find_server.c — the server side of chfind (server/find.c, find_session.c) on a real
 * storage directory, built with FIND_KEEP = 8 so that every path of the paging logic runs:
 * results spread over many small pages, collections cut to the smallest matches and walked
 * again after their last path, sessions evicted (more concurrent finds than FIND_SESSIONS) and
 * resumed from the cursor alone, a session id presented with another predicate. Each time the
 * pages together must be exactly the expected matches, in path order, each once; entries
 * outside the start (including a sibling whose name extends the start's, "a" vs "ab") never
 * appear, and the examined count covers every entry below the start.
 */
#define _GNU_SOURCE
#include "check.h"
#include "find.h"
#include "find_session.h"
#include "findpred.h"
#include "storage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NFILES 150
#define NCONC (FIND_SESSIONS + 8)

static struct storage *st;
static struct wire_req *req;
static uint8_t pred[FINDPRED_WIRE_MAX];
static size_t predlen;
static struct findpred *fp;

struct result {
	char **paths;
	size_t n;
	uint64_t visited;
	uint64_t session;
	char cursor[CHFS_PATH_MAX];
	int eof, pages;
};

static void set_pred(const char *a0, const char *a1, const char *a2, const char *a3)
{
	char *argv[4] = {(char *)a0, (char *)a1, (char *)a2, (char *)a3};
	int argc = a0 ? (a2 ? 4 : 2) : 0;
	const char *bad;
	CHECK_EQ(findpred_parse(argc, argv, NULL, NULL, fp, &bad), 0);
	int n = findpred_encode(fp, pred, sizeof pred);
	CHECK(n > 0);
	predlen = (size_t)n;
}

/* One page of `start` for r; cap: reply capacity (small: many pages). */
static int page(const char *start, struct result *r, size_t cap)
{
	static uint8_t rep[WIRE_HDR_LEN + WIRE_FIND_MAX];
	strcpy(req->path, start);
	strcpy(req->path2, r->cursor);
	req->fileid = r->session;
	req->data = pred;
	req->data_len = predlen;
	struct wenc e;
	wenc_init(&e, rep, cap);
	wenc_reserve(&e, WIRE_HDR_LEN);
	int rc = find_handle(st, req, &e);
	if (rc)
		return rc;
	CHECK_EQ(e.err, 0);
	struct wdec d;
	wdec_init(&d, rep + WIRE_HDR_LEN, e.len - WIRE_HDR_LEN);
	r->session = wdec_u64(&d);
	uint32_t n = wdec_u32(&d);
	r->eof = (int)wdec_u32(&d);
	uint64_t v = wdec_u64(&d);
	if (r->pages++ == 0)
		r->visited = v;
	else
		CHECK_EQ(v, 0); /* counted on the first page only */
	for (uint32_t i = 0; i < n; i++) {
		char p[CHFS_PATH_MAX];
		wdec_str(&d, p, sizeof p);
		(void)wdec_u32(&d), (void)wdec_u64(&d), (void)wdec_i64(&d);
		CHECK(strcmp(p, r->cursor) > 0); /* path order, never repeated */
		strcpy(r->cursor, p);
		r->paths = realloc(r->paths, (r->n + 1) * sizeof *r->paths);
		r->paths[r->n++] = strdup(p);
	}
	CHECK_EQ(wdec_finish(&d), 0);
	CHECK(n > 0 || r->eof);
	return 0;
}

static void run(const char *start, struct result *r, size_t cap)
{
	memset(r, 0, sizeof *r);
	while (!r->eof && r->pages < 100000)
		if (page(start, r, cap))
			break;
}

static void free_result(struct result *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->paths[i]);
	free(r->paths);
}

/* Expected: files f%03d below "a" with i % m == 0 (NFILES of them, half in a/sub). */
static int expect(const struct result *r, int m, int with_dirs)
{
	size_t want = 0;
	for (int i = 0; i < NFILES; i++)
		want += i % m == 0;
	want += (size_t)with_dirs;
	if (r->n != want)
		fprintf(stderr, "got %zu paths, want %zu\n", r->n, want);
	return r->n == want;
}

static void make_tree(void)
{
	struct chfs_md md, out;
	memset(&md, 0, sizeof md);
	md.chunk_size = 65536;
	md.mode = S_IFDIR | 0755;
	CHECK_EQ(st_mkdir(st, "a", &md), 0);
	CHECK_EQ(st_mkdir(st, "a/sub", &md), 0);
	CHECK_EQ(st_mkdir(st, "ab", &md), 0);
	md.mode = S_IFREG | 0644;
	int existed;
	for (int i = 0; i < NFILES; i++) {
		char p[64];
		snprintf(p, sizeof p, "%sf%03d", i % 2 ? "a/sub/" : "a/", i);
		md.size = (uint64_t)i * 100;
		CHECK_EQ(st_create(st, p, &md, 1, &out, &existed), 0);
		/* sizes are set by SETATTR in CHFS; the record carries what create stored */
	}
	CHECK_EQ(st_create(st, "ab/f000", &md, 1, &out, &existed), 0);
	CHECK_EQ(st_create(st, "top", &md, 1, &out, &existed), 0);
	/* implicit directory: an entry below a directory this server has no record of */
	CHECK_EQ(st_create(st, "a/implicit/deep/f999", &md, 1, &out, &existed), 0);
}

int main(void)
{
	char dir[] = "/tmp/chfs-test-find-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	CHECK_EQ(st_open(dir, &st), 0);
	req = calloc(1, sizeof *req);
	fp = malloc(sizeof *fp);
	make_tree();

	/* every file below a, one big page and many small ones (cut at FIND_KEEP = 8) */
	struct result r;
	set_pred("-name", "f[0-9][0-9][0-9]", "-type", "f");
	for (size_t cap = WIRE_HDR_LEN + WIRE_FIND_MAX; cap >= 200; cap /= 4) {
		run("a", &r, cap);
		CHECK(expect(&r, 1, 1));         /* + a/implicit/deep/f999 */
		CHECK_EQ(r.visited, NFILES + 2); /* files, a/sub, f999 (implicit dirs have no record) */
		if (cap < 1000)
			CHECK(r.pages > NFILES / (2 * 8)); /* at most 2 x FIND_KEEP - 1 per walk */
		free_result(&r);
	}
	/* the root start, and a start that is a prefix of a sibling ("a" vs "ab") */
	set_pred(NULL, NULL, NULL, NULL);
	run("", &r, 300);
	CHECK_EQ(r.n, NFILES + 6); /* a, a/sub, ab, ab/f000, top, f999; a/implicit* are not */
	CHECK_EQ(r.n, r.visited);
	free_result(&r);
	run("a", &r, 300);
	CHECK_EQ(r.n, NFILES + 2); /* a/sub, the files, f999; nothing of "ab" */
	for (size_t i = 0; i < r.n; i++)
		CHECK(strcmp(r.paths[i], "f000") != 0 || i == 0); /* a/f000 once, ab/f000 never */
	free_result(&r);
	run("ab", &r, 300);
	CHECK(r.n == 1 && !strcmp(r.paths[0], "f000"));
	free_result(&r);

	/* nothing matches: one empty page (no sorting of an empty set: qsort(NULL, 0) is UB) */
	set_pred("-name", "no-such-name", NULL, NULL);
	run("a", &r, 300);
	CHECK(r.n == 0 && r.eof && r.pages == 1 && r.visited == NFILES + 2);
	free_result(&r);
	run("nosuchdir", &r, 300);
	CHECK(r.n == 0 && r.eof && r.visited == 0);
	free_result(&r);

	/* more concurrent finds than sessions: the evicted ones resume from their cursor */
	set_pred("-type", "f", NULL, NULL);
	static struct result conc[NCONC];
	for (int k = 0; k < NCONC; k++) {
		memset(&conc[k], 0, sizeof conc[k]);
		CHECK_EQ(page("a", &conc[k], 300), 0);
	}
	for (int round = 0; round < 1000; round++) {
		int more = 0;
		for (int k = 0; k < NCONC; k++)
			if (!conc[k].eof) {
				more = 1;
				CHECK_EQ(page("a", &conc[k], 300), 0);
			}
		if (!more)
			break;
	}
	for (int k = 0; k < NCONC; k++) {
		CHECK(conc[k].eof && expect(&conc[k], 1, 1));
		free_result(&conc[k]);
	}

	/* a session id with another predicate is not used: the new predicate's results */
	set_pred("-type", "f", NULL, NULL);
	memset(&r, 0, sizeof r);
	CHECK_EQ(page("a", &r, 300), 0);
	CHECK(!r.eof);
	uint64_t sid = r.session;
	set_pred("-name", "f00*", NULL, NULL);
	struct result r2;
	memset(&r2, 0, sizeof r2);
	r2.session = sid;
	while (!r2.eof && r2.pages < 1000)
		CHECK_EQ(page("a", &r2, 300), 0);
	CHECK_EQ(r2.n, 10); /* f000..f009, not the -type f session's */
	for (size_t i = 0; i < r2.n; i++)
		CHECK(strstr(r2.paths[i], "f00") != NULL);
	free_result(&r);
	free_result(&r2);

	/* a malformed predicate is refused */
	uint8_t badp[8] = {1, 0, 0, 0, 99, 0, 0, 0};
	memcpy(pred, badp, sizeof badp);
	predlen = sizeof badp;
	memset(&r, 0, sizeof r);
	CHECK(page("a", &r, 300) < 0);

	st_close(st);
	free(req);
	free(fp);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	return check_result("test_find_server");
}
