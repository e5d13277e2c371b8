/*
 * test_path.c — path canonicalisation (client side) and validation (server side).
 */
#include "check.h"
#include "path.h"

#include <errno.h>
#include <string.h>

static void canon_is(const char *in, const char *want)
{
	char out[CHFS_PATH_MAX];
	int rc = path_canonical(in, out);
	CHECK_EQ(rc, 0);
	if (rc == 0 && strcmp(out, want) != 0) {
		fprintf(stderr, "canonical(\"%s\") = \"%s\", want \"%s\"\n", in, out, want);
		check_failures++;
	}
}

static int canon_err(const char *in)
{
	char out[CHFS_PATH_MAX];
	return path_canonical(in, out);
}

int main(void)
{
	canon_is("/", "");
	canon_is("a", "a");
	canon_is("/a/b/c", "a/b/c");
	canon_is("//a///b//", "a/b");
	canon_is("/a/./b/.", "a/b");
	canon_is("/a/b/../c", "a/c");
	canon_is("/a/b/../../c", "c");
	canon_is("/a/..", "");
	canon_is("./x", "x");
	canon_is("/...", "...");
	canon_is("/a/..b/.c", "a/..b/.c");
	CHECK_EQ(canon_err(""), -ENOENT);
	CHECK_EQ(canon_err(".."), -EINVAL);
	CHECK_EQ(canon_err("/../etc/passwd"), -EINVAL);
	CHECK_EQ(canon_err("/a/../../b"), -EINVAL);
	/* Top-level names starting with byte 1 are the servers' inode keys (wire_inode_key). */
	CHECK_EQ(canon_err("/\x01"
	                   "0123456789abcdef"),
	         -EINVAL);
	CHECK_EQ(canon_err("/x/../\x01"
	                   "a"),
	         -EINVAL);
	canon_is("/a/\x01"
	         "b",
	         "a/\x01"
	         "b");

	char longname[300];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	CHECK_EQ(canon_err(longname), -ENAMETOOLONG);
	longname[CHFS_NAME_MAX] = '\0';
	char out[CHFS_PATH_MAX];
	CHECK_EQ(path_canonical(longname, out), 0);
	static char longpath[3 * CHFS_PATH_MAX];
	for (int i = 0; i < CHFS_PATH_MAX; i++)
		memcpy(longpath + 2 * i, "a/", 2);
	CHECK_EQ(canon_err(longpath), -ENAMETOOLONG);
	/* Deeper than Linux's 4,095 bytes per argument (issue 16 item 5), up to CHFS_PATH_MAX - 1:
	 * components of 99 bytes and a slash, the last cut to end at the bound exactly. */
	static char deep[CHFS_PATH_MAX + 1], deepout[CHFS_PATH_MAX];
	for (int i = 0; i < CHFS_PATH_MAX; i++)
		deep[i] = i % 100 == 99 ? '/' : 'd';
	deep[CHFS_PATH_MAX - 1] = '\0';
	CHECK(CHFS_PATH_MAX - 1 > 4095);
	CHECK_EQ(path_canonical(deep, deepout), 0);
	CHECK_EQ(strlen(deepout), (size_t)CHFS_PATH_MAX - 1);
	CHECK_EQ(path_check_canonical(deepout, strlen(deepout), 0), 0);
	deep[CHFS_PATH_MAX - 1] = 'd'; /* one byte more */
	deep[CHFS_PATH_MAX] = '\0';
	CHECK_EQ(canon_err(deep), -ENAMETOOLONG);
	CHECK_EQ(path_check_canonical(deep, CHFS_PATH_MAX, 0), -ENAMETOOLONG);

	/* Server-side validation never accepts what canonicalisation would change. */
	CHECK_EQ(path_check_canonical("a/b", 3, 0), 0);
	CHECK_EQ(path_check_canonical("", 0, 1), 0);
	CHECK_EQ(path_check_canonical("", 0, 0), -EINVAL);
	CHECK_EQ(path_check_canonical("/a", 2, 0), -EINVAL);
	CHECK_EQ(path_check_canonical("a/", 2, 0), -EINVAL);
	CHECK_EQ(path_check_canonical("a//b", 4, 0), -EINVAL);
	CHECK_EQ(path_check_canonical("a/../b", 6, 0), -EINVAL);
	CHECK_EQ(path_check_canonical("..", 2, 0), -EINVAL);
	CHECK_EQ(path_check_canonical("a/.", 3, 0), -EINVAL);
	CHECK_EQ(path_check_canonical("a\0b", 3, 0), -EINVAL);
	CHECK_EQ(path_check_canonical(longname, strlen(longname), 0), 0);
	longname[CHFS_NAME_MAX] = 'n';
	CHECK_EQ(path_check_canonical(longname, CHFS_NAME_MAX + 1, 0), -ENAMETOOLONG);

	char parent[CHFS_PATH_MAX];
	CHECK(strcmp(path_split("a/b/c", parent), "c") == 0 && strcmp(parent, "a/b") == 0);
	CHECK(strcmp(path_split("x", parent), "x") == 0 && parent[0] == '\0');
	CHECK(path_split("", parent) == NULL);
	CHECK(path_join("a/b", "c", out) == 0 && strcmp(out, "a/b/c") == 0);
	CHECK(path_join("", "c", out) == 0 && strcmp(out, "c") == 0);
	return check_result("test_path");
}
