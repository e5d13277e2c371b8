/*
 * test_ns_index.c — the in-memory namespace index: records and implicit parents, implicit
 * directories dropped when nothing is below them, -ENOTDIR below a file, children in name
 * order from any cursor (checked against a sorted copy over thousands of names, inserted and
 * removed in random order), and the walk's parents-before-children order.
 */
#define _GNU_SOURCE
#include "check.h"
#include "ns_index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const uint8_t REC[4] = {1, 2, 3, 4};

static int set(struct ns_index *x, const char *path, uint32_t mode)
{
	return nsi_set(x, path, REC, sizeof REC, mode);
}

static int has_rec(struct ns_index *x, const char *path)
{
	struct ns_ent *e = nsi_find(x, path);
	size_t len;
	return e && nsi_rec(e, &len) != NULL;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

struct order {
	int n, bad;
	char seen[64][64];
};

static int visit(void *arg, const struct ns_ent *e)
{
	struct order *o = arg;
	const char *p = nsi_path(e), *slash = strrchr(p, '/');
	if (slash) { /* the parent must have been seen already */
		int found = 0;
		for (int i = 0; i < o->n; i++)
			found |= strncmp(o->seen[i], p, (size_t)(slash - p)) == 0 &&
			         o->seen[i][slash - p] == '\0';
		o->bad += !found;
	}
	if (o->n < 64)
		snprintf(o->seen[o->n++], sizeof o->seen[0], "%s", p);
	return 0;
}

int main(void)
{
	struct ns_index *x = nsi_new();
	CHECK(x != NULL);
	CHECK(nsi_find(x, "") != NULL && S_ISDIR(nsi_mode(nsi_find(x, ""))));

	/* Implicit parents appear with a record below them and go with it. */
	CHECK_EQ(set(x, "a/b/c", S_IFREG | 0644), 0);
	CHECK(has_rec(x, "a/b/c") && !has_rec(x, "a/b") && nsi_find(x, "a/b") && nsi_find(x, "a"));
	CHECK_EQ(nsi_count(x), 1);
	CHECK_EQ(nsi_check_parents(x, "a/b/c/d"), -ENOTDIR);
	CHECK_EQ(nsi_check_parents(x, "a/b/x"), 0);
	CHECK_EQ(set(x, "a", S_IFDIR | 0755), 0);
	nsi_clear(x, "a/b/c");
	CHECK(nsi_find(x, "a/b/c") == NULL && nsi_find(x, "a/b") == NULL);
	CHECK(has_rec(x, "a") && nsi_nkids(nsi_find(x, "a")) == 0); /* recorded: stays */
	CHECK_EQ(set(x, "a/k", S_IFREG | 0644), 0);
	nsi_clear(x, "a"); /* a record with something below: becomes implicit */
	CHECK(nsi_find(x, "a") != NULL && !has_rec(x, "a") && S_ISDIR(nsi_mode(nsi_find(x, "a"))));
	nsi_clear(x, "a/k");
	CHECK(nsi_find(x, "a") == NULL && nsi_nkids(nsi_find(x, "")) == 0);
	CHECK_EQ(nsi_count(x), 0);
	nsi_clear(x, "never"); /* absent: no-op */

	/* Children in name order from any cursor, while names come and go in random order. */
	enum { N = 5000 };
	char **names = calloc(N, sizeof *names), path[64];
	int *live = calloc(N, sizeof *live);
	srand(7);
	for (int i = 0; i < N; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "%08x%d", (unsigned)rand(), i);
	}
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < N; k++) {
			int i = rand() % N;
			snprintf(path, sizeof path, "dir/%s", names[i]);
			if (live[i])
				nsi_clear(x, path);
			else
				CHECK_EQ(set(x, path, S_IFREG | 0600), 0);
			live[i] = !live[i];
		}
		char **sorted = calloc(N, sizeof *sorted);
		int n = 0;
		for (int i = 0; i < N; i++)
			if (live[i])
				sorted[n++] = names[i];
		qsort(sorted, (size_t)n, sizeof *sorted, cmp);
		struct ns_ent *d = nsi_find(x, "dir");
		CHECK(d != NULL && nsi_nkids(d) == (size_t)n && nsi_count(x) == (size_t)n);
		int i = 0, bad = 0;
		for (struct ns_ent *c = nsi_next_child(d, ""); c; c = nsi_next_child(d, nsi_name(c)), i++)
			bad += i >= n || strcmp(nsi_name(c), sorted[i]) != 0;
		CHECK(bad == 0 && i == n);
		/* A cursor between names (not itself a name) starts at the next one. */
		if (n > 10) {
			char cur[32];
			snprintf(cur, sizeof cur, "%s!", sorted[n / 2]); /* '!' sorts before digits */
			struct ns_ent *c = nsi_next_child(d, cur);
			CHECK(c && strcmp(nsi_name(c), sorted[n / 2 + 1]) == 0);
			CHECK(nsi_next_child(d, sorted[n - 1]) == NULL);
		}
		free(sorted);
	}
	for (int i = 0; i < N; i++) {
		snprintf(path, sizeof path, "dir/%s", names[i]);
		nsi_clear(x, path);
		free(names[i]);
	}
	free(names);
	free(live);
	CHECK(nsi_find(x, "dir") == NULL && nsi_count(x) == 0);

	/* The walk: a directory before its children. */
	const char *paths[] = {"z/y/x", "z/a", "m", "z/y/b/c", "b/q"};
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
		CHECK_EQ(set(x, paths[i], S_IFREG | 0644), 0);
	static struct order o;
	CHECK_EQ(nsi_walk(x, visit, &o), 0);
	CHECK(o.bad == 0 && o.n == 9); /* 5 records and the implicit b, z, z/y, z/y/b */
	CHECK(strcmp(o.seen[0], "b") == 0 && strcmp(o.seen[1], "b/q") == 0 && strcmp(o.seen[2], "m") == 0);
	CHECK(strcmp(o.seen[6], "z/y/b") == 0 && strcmp(o.seen[8], "z/y/x") == 0);
	nsi_free(x);
	return check_result("test_ns_index");
}
