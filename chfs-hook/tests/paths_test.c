/*
 * paths_test.c — unit test of the hook's name handling (paths.c): lexical normalisation,
 * mount-point mapping (DIR and DIR=CHFSDIR), relative names under a virtual cwd, names that
 * leave CHFS through "..", /proc/self/fd names, and names longer than PATH_MAX under a deep cwd
 * or directory descriptor (up to HOOK_CHFS_PATH_MAX, then ENAMETOOLONG). No pool needed:
 * nothing here calls CHFS.
 */
#define _GNU_SOURCE
#include "check.h"
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* paths.c needs these from the rest of the hook library. */
struct hook_config hook_cfg;
struct hook_file **hook_fdtab;
int hook_fdtab_size;

static void check_norm(const char *in, const char *want)
{
	char out[PATH_MAX];
	CHECK(hook_normalize(in, out, sizeof out) == 0);
	if (strcmp(out, want) != 0) {
		fprintf(stderr, "normalize(%s) = %s, want %s\n", in, out, want);
		failures++;
	}
}

static void check_resolve(int dirfd, const char *path, int chfs, const char *want)
{
	HOOK_TARGET(t);
	CHECK(hook_resolve(dirfd, path, &t) == 0);
	if (t.chfs != chfs || strcmp(t.path, want) != 0) {
		fprintf(stderr, "resolve(%d, %s) = (%d, %s), want (%d, %s)\n", dirfd, path, t.chfs, t.path,
		        chfs, want);
		failures++;
	}
}

static void add_mount(const char *dir, const char *sub)
{
	struct hook_mount *m = &hook_cfg.mounts[hook_cfg.nmounts++];
	strcpy(m->dir, dir);
	m->dirlen = strlen(dir);
	strcpy(m->sub, sub);
}

static int resolve_err(int dirfd, const char *path)
{
	HOOK_TARGET(t);
	return hook_resolve(dirfd, path, &t);
}

/* "/chfs" + n times "/" + 120 w's: a CHFS name of n * 121 bytes. */
static char *deep(int n, const char *tail)
{
	char *p = malloc(6 + (size_t)n * 121 + strlen(tail) + 2);
	strcpy(p, "/chfs");
	for (int i = 0; i < n; i++) {
		size_t o = strlen(p);
		p[o] = '/';
		memset(p + o + 1, 'w', 120);
		p[o + 121] = 0;
	}
	if (*tail)
		strcat(strcat(p, "/"), tail);
	return p;
}

/* Names longer than PATH_MAX: reached from a deep directory descriptor or cwd, kept whole on
 * the heap, ENAMETOOLONG from HOOK_CHFS_PATH_MAX bytes of CHFS path on. */
static void check_long_names(struct hook_file **table)
{
	char *d40 = deep(40, ""), *leaf = deep(40, "leaf"); /* 4,840 and 4,845 bytes from the root */
	static struct hook_file dir = {.is_dir = 1};
	dir.vpath = d40;
	dir.cpath = d40 + 5;
	table[8] = &dir;
	check_resolve(8, "leaf", 1, leaf + 5);
	char *up = deep(39, "x");
	check_resolve(8, "../x", 1, up + 5);
	free(up);
	{
		HOOK_TARGET(t);
		CHECK(hook_resolve(8, "leaf", &t) == 0 && strcmp(t.vpath, leaf) == 0);
		CHECK(t.path != t.path_buf && t.vpath != t.vpath_buf); /* on the heap */
		HOOK_TARGET(s);
		CHECK(hook_resolve(AT_FDCWD, "/chfs/short", &s) == 0);
		CHECK(s.path == s.path_buf && s.vpath == s.vpath_buf); /* inline */
	}
	CHECK(hook_vcwd_set(d40, 0) == 0);
	check_resolve(AT_FDCWD, "leaf", 1, leaf + 5);
	char cwd[PATH_MAX];
	CHECK(hook_vcwd_get(cwd, sizeof cwd) == -ERANGE);
	char *got = NULL;
	ino_t ino;
	CHECK(hook_vcwd_dup(&got, &ino) == 1 && strcmp(got, d40) == 0);
	free(got);
	hook_vcwd_set(NULL, 0);

	/* the bound: 135 components are 16,335 bytes; "/" and 47 more bytes are 16,383 */
	char *d135 = deep(135, "");
	dir.vpath = d135;
	dir.cpath = d135 + 5;
	char name[64];
	memset(name, 'n', 47);
	name[47] = 0;
	{
		HOOK_TARGET(t);
		CHECK(hook_resolve(8, name, &t) == 0 && t.chfs && strlen(t.path) == HOOK_CHFS_PATH_MAX - 1);
	}
	strcat(name, "n");
	CHECK(resolve_err(8, name) == -ENAMETOOLONG);
	CHECK(resolve_err(8, "..") == 0);
	CHECK(hook_vcwd_set(d135, 0) == 0);
	CHECK(resolve_err(AT_FDCWD, name) == -ENAMETOOLONG);
	hook_vcwd_set(NULL, 0);

	/* one argument of PATH_MAX bytes is ENAMETOOLONG whatever it names, as from the kernel */
	char *arg = malloc(PATH_MAX + 1);
	memset(arg, 'a', PATH_MAX);
	arg[PATH_MAX] = 0;
	CHECK(resolve_err(8, arg) == -ENAMETOOLONG);
	CHECK(resolve_err(AT_FDCWD, arg) == -ENAMETOOLONG);
	free(arg);
	table[8] = NULL;
	free(d135);
	free(d40);
	free(leaf);
}

int main(void)
{
	check_norm("/", "/");
	check_norm("//a///b/", "/a/b");
	check_norm("/a/./b/../c", "/a/c");
	check_norm("/../..", "/");
	check_norm("/chfs/..", "/");
	check_norm("/chfs/x/../../etc", "/etc");

	add_mount("/chfs", "");
	add_mount("/work/data", "/proj");
	check_resolve(AT_FDCWD, "/chfs", 1, "/");
	check_resolve(AT_FDCWD, "/chfs/", 1, "/");
	check_resolve(AT_FDCWD, "/chfs/a//b/./c", 1, "/a/b/c");
	check_resolve(AT_FDCWD, "/chfsx/a", 0, "/chfsx/a");
	check_resolve(AT_FDCWD, "/chfs/../etc/passwd", 0, "/etc/passwd"); /* kernel gets the fold */
	check_resolve(AT_FDCWD, "/etc/../chfs/a", 1, "/a");
	check_resolve(AT_FDCWD, "/work/data/x", 1, "/proj/x");
	check_resolve(AT_FDCWD, "/work/data", 1, "/proj");
	check_resolve(AT_FDCWD, "/work/datax", 0, "/work/datax");
	check_resolve(AT_FDCWD, "relative", 0, "relative"); /* kernel cwd */

	hook_vcwd_set("/chfs/d", 0);
	check_resolve(AT_FDCWD, "f", 1, "/d/f");
	check_resolve(AT_FDCWD, "../f", 1, "/f");
	check_resolve(AT_FDCWD, "../../tmp/x", 0, "/tmp/x"); /* leaves CHFS: made absolute */
	char cwd[PATH_MAX];
	CHECK(hook_vcwd_get(cwd, sizeof cwd) == (int)strlen("/chfs/d") + 1);
	CHECK(hook_vcwd_get(cwd, 3) == -ERANGE);
	hook_vcwd_set(NULL, 0);
	check_resolve(AT_FDCWD, "f", 0, "f");

	static struct hook_file *table[16];
	static struct hook_file dir = {.is_dir = 1, .vpath = "/chfs/d", .cpath = "/d"};
	hook_fdtab = table;
	hook_fdtab_size = 16;
	table[5] = &dir;
	check_resolve(5, "sub/f", 1, "/d/sub/f");
	check_resolve(AT_FDCWD, "/proc/self/fd/5", 1, "/d");
	check_resolve(AT_FDCWD, "/dev/fd/5", 1, "/d");
	check_resolve(AT_FDCWD, "/proc/self/fd/6", 0, "/proc/self/fd/6");
	check_resolve(7, "x", 0, "x"); /* a kernel directory descriptor */

	char out[PATH_MAX];
	CHECK(hook_vpath_to_chfs("/chfs/a", out, sizeof out) == 1 && strcmp(out, "/a") == 0);
	CHECK(hook_vpath_to_chfs("/tmp", out, sizeof out) == 0);
	check_long_names(table);
	if (failures == 0)
		puts("paths_test: all checks passed");
	return failures != 0;
}
