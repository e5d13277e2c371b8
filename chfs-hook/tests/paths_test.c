/*
 * paths_test.c — unit test of the hook's name handling (paths.c): lexical normalisation,
 * mount-point mapping (DIR and DIR=CHFSDIR), relative names under a virtual cwd, names that
 * leave CHFS through "..", and /proc/self/fd names. No pool needed: nothing here calls CHFS.
 */
#define _GNU_SOURCE
#include "check.h"
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
	struct hook_target t;
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
	if (failures == 0)
		puts("paths_test: all checks passed");
	return failures != 0;
}
