/*
 * api_cases.c — single-process checks of chfs.h open/create semantics, one case per run
 * (test_upstream_api.py runs each against a live pool and asserts on the exit status and the
 * one line printed). Each case prints what it observed, so a failure message says what went
 * wrong, and exits 0 only when the behaviour is the documented one.
 *
 * Usage: api_cases CASE DIR   (DIR: a CHFS directory of this run that does not exist yet)
 */
#define _GNU_SOURCE
#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c, ...)                                                    \
	do {                                                             \
		if (!(c)) {                                              \
			printf(__VA_ARGS__);                             \
			printf(" (errno %s)\n", strerrorname_np(errno)); \
			return 1;                                        \
		}                                                        \
	} while (0)

static char path[4096];

static const char *at(const char *dir, const char *name)
{
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return path;
}

static long long size_of(const char *p)
{
	struct stat st;
	return chfs_stat(p, &st) == 0 ? (long long)st.st_size : -1;
}

static int found;
static int find_name(void *want, const char *name, const struct stat *st, off_t off)
{
	(void)st, (void)off;
	if (strcmp(name, want) == 0)
		found = 1;
	return 0;
}

/* O_TRUNC create of a file this process still has unreported writes on gives an empty file. */
static int recreate_dirty(const char *dir)
{
	static char mib[1 << 20];
	memset(mib, 'a', sizeof mib);
	const char *p = at(dir, "f");
	int fd1 = chfs_create(p, O_WRONLY | O_TRUNC, 0644);
	CHECK(fd1 >= 0, "create failed");
	CHECK(chfs_pwrite(fd1, mib, sizeof mib, 0) == (ssize_t)sizeof mib, "pwrite failed");
	int fd2 = chfs_create(p, O_WRONLY | O_TRUNC, 0644);
	CHECK(fd2 >= 0, "re-create failed");
	CHECK(chfs_close(fd2) == 0 && chfs_close(fd1) == 0, "close failed");
	long long n = size_of(p);
	CHECK(n == 0, "size after O_TRUNC re-create is %lld, expected 0", n);
	printf("ok\n");
	return 0;
}

/* create without O_TRUNC opens an existing file as it is. */
static int create_keeps(const char *dir)
{
	const char *p = at(dir, "f");
	int fd = chfs_create(p, O_WRONLY, 0644);
	CHECK(fd >= 0 && chfs_pwrite(fd, "hello", 5, 0) == 5 && chfs_close(fd) == 0, "write failed");
	fd = chfs_create(p, O_WRONLY, 0600);
	CHECK(fd >= 0, "second create failed");
	char b[8] = {0};
	CHECK(chfs_pread(fd, b, sizeof b, 0) == 5 && memcmp(b, "hello", 5) == 0, "second create left \"%s\"",
	      b);
	CHECK(chfs_close(fd) == 0, "close failed");
	/* Upstream ignores O_EXCL (IOR -B passes 0x80, its IOR_DIRECT): the file opens as it is. */
	fd = chfs_create(p, O_WRONLY | O_EXCL, 0644);
	CHECK(fd >= 0, "create with 0x80 (O_EXCL, IOR's IOR_DIRECT) of an existing file failed: %s",
	      strerror(errno));
	CHECK(chfs_pread(fd, b, sizeof b, 0) == 5 && memcmp(b, "hello", 5) == 0 && chfs_close(fd) == 0,
	      "create with 0x80 changed the file");
	fd = chfs_create(p, O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0 && chfs_close(fd) == 0, "O_TRUNC create failed");
	long long n = size_of(p);
	CHECK(n == 0, "size after O_TRUNC create is %lld", n);
	printf("ok\n");
	return 0;
}

/* chfs_open ignores the access mode (IOR_RDONLY is 0x01 = O_WRONLY), as upstream's. */
static int open_any_mode(const char *dir)
{
	const char *p = at(dir, "f");
	int fd = chfs_create(p, O_RDONLY, 0644);
	CHECK(fd >= 0 && chfs_pwrite(fd, "abc", 3, 0) == 3 && chfs_close(fd) == 0,
	      "write through an O_RDONLY create failed");
	fd = chfs_open(p, O_WRONLY);
	char b[4] = {0};
	CHECK(fd >= 0 && chfs_pread(fd, b, 3, 0) == 3 && strcmp(b, "abc") == 0,
	      "read through an O_WRONLY open failed");
	CHECK(chfs_close(fd) == 0, "close failed");
	printf("ok\n");
	return 0;
}

/* chfs_create makes missing parents (listed like mkdir's); chfs_open_posix says ENOENT. */
static int missing_parents(const char *dir)
{
	char p[4096], d[4096];
	snprintf(p, sizeof p, "%s/strict/f", dir);
	errno = 0;
	CHECK(chfs_open_posix(p, O_CREAT | O_WRONLY, 0644, 0) < 0 && errno == ENOENT,
	      "chfs_open_posix under a missing directory did not fail with ENOENT");
	CHECK(size_of(at(dir, "strict")) < 0 && errno == ENOENT, "strict open made a parent");
	snprintf(p, sizeof p, "%s/a/b/f", dir);
	int fd = chfs_create(p, O_WRONLY, 0644);
	CHECK(fd >= 0 && chfs_close(fd) == 0, "chfs_create of %s failed", p);
	struct stat st;
	snprintf(d, sizeof d, "%s/a/b", dir);
	CHECK(chfs_stat(d, &st) == 0 && S_ISDIR(st.st_mode), "%s is not a directory", d);
	found = 0;
	CHECK(chfs_readdir(dir, "a", find_name) == 0 && found, "a not listed in %s", dir);
	snprintf(d, sizeof d, "%s/a", dir);
	found = 0;
	CHECK(chfs_readdir(d, "b", find_name) == 0 && found, "b not listed in %s", d);
	/* a regular file in the way is ENOTDIR, not a directory made under it */
	snprintf(p, sizeof p, "%s/a/b/f/g", dir);
	CHECK(chfs_create(p, O_WRONLY, 0644) < 0 && errno == ENOTDIR,
	      "create below a regular file did not fail with ENOTDIR");
	printf("ok\n");
	return 0;
}

/* chfs_open_posix(O_CREAT) on an existing file keeps its bytes; O_EXCL says EEXIST. */
static int posix_create(const char *dir)
{
	const char *p = at(dir, "f");
	int fd = chfs_open_posix(p, O_CREAT | O_WRONLY, 0644, 0);
	CHECK(fd >= 0 && chfs_pwrite(fd, "first", 5, 0) == 5, "first creator failed");
	int fd2 = chfs_open_posix(p, O_CREAT | O_RDWR, 0644, 0);
	CHECK(fd2 >= 0, "second creator failed");
	CHECK(chfs_close(fd) == 0 && chfs_close(fd2) == 0, "close failed");
	long long n = size_of(p);
	CHECK(n == 5, "size %lld after a second O_CREAT open, expected 5", n);
	CHECK(chfs_open_posix(p, O_CREAT | O_EXCL | O_WRONLY, 0644, 0) < 0 && errno == EEXIST,
	      "O_CREAT|O_EXCL of an existing file did not fail with EEXIST");
	CHECK(chfs_open_posix(dir, O_CREAT | O_WRONLY, 0644, 0) < 0 && errno == EISDIR,
	      "O_CREAT of a directory did not fail with EISDIR");
	printf("ok\n");
	return 0;
}

/* Another process renames (or unlinks) a file this one is writing; the writer then closes.
 * The size report must follow the file (by file id) to its new name, and never bring back a
 * removed name. Eight renames, so both same-owner and cross-owner renames occur. */
static int rename_while_writing(const char *dir)
{
	static char mib2[2 << 20], back[2 << 20];
	for (size_t i = 0; i < sizeof mib2; i++)
		mib2[i] = (char)(i * 7 + 1);
	char from[4096], to[4096], cmd[9000];
	for (int k = 0; k < 8; k++) {
		snprintf(from, sizeof from, "%s/w%d", dir, k);
		snprintf(to, sizeof to, "%s/renamed%d", dir, k);
		int fd = chfs_create(from, O_WRONLY | O_TRUNC, 0644);
		CHECK(fd >= 0, "create %s failed", from);
		CHECK(chfs_pwrite(fd, mib2, sizeof mib2, 0) == (ssize_t)sizeof mib2, "pwrite failed");
		snprintf(cmd, sizeof cmd, "chfs-io rename %s %s", from, to);
		CHECK(system(cmd) == 0, "%s failed", cmd);
		CHECK(chfs_close(fd) == 0, "close after the rename failed");
		long long n = size_of(to);
		CHECK(n == (long long)sizeof mib2, "%s: size %lld after rename-while-writing, expected %zu",
		      to, n, sizeof mib2);
		fd = chfs_open(to, O_RDONLY);
		CHECK(fd >= 0 && chfs_pread(fd, back, sizeof back, 0) == (ssize_t)sizeof back &&
		              memcmp(back, mib2, sizeof back) == 0 && chfs_close(fd) == 0,
		      "%s does not read back what was written", to);
		CHECK(size_of(from) < 0 && errno == ENOENT, "%s came back after the rename", from);
	}
	snprintf(from, sizeof from, "%s/gone", dir);
	int fd = chfs_create(from, O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0 && chfs_pwrite(fd, mib2, sizeof mib2, 0) == (ssize_t)sizeof mib2, "write failed");
	snprintf(cmd, sizeof cmd, "chfs-io unlink %s", from);
	CHECK(system(cmd) == 0, "%s failed", cmd);
	CHECK(chfs_close(fd) == 0, "close after the unlink failed");
	CHECK(size_of(from) < 0 && errno == ENOENT, "%s came back after the unlink", from);
	printf("ok\n");
	return 0;
}

/* ftruncate of an open file another process renamed: keyed by file id, it reaches the file
 * under its new name (it failed with ENOENT at the old one). */
static int ftruncate_after_rename(const char *dir)
{
	char from[4096], to[4096], cmd[9000];
	snprintf(from, sizeof from, "%s/t", dir);
	int fd = chfs_create(from, O_RDWR | O_TRUNC, 0644);
	CHECK(fd >= 0 && chfs_pwrite(fd, "0123456789", 10, 0) == 10 && chfs_fsync(fd) == 0, "write failed");
	for (int k = 0; k < 8; k++) { /* same-owner and cross-owner renames */
		snprintf(to, sizeof to, "%s/t%d", dir, k);
		snprintf(cmd, sizeof cmd, "chfs-io rename %s %s", from, to);
		CHECK(system(cmd) == 0, "%s failed", cmd);
		CHECK(chfs_ftruncate(fd, 9 - k) == 0, "ftruncate after renaming to %s failed", to);
		long long n = size_of(to);
		CHECK(n == 9 - k, "%s: size %lld after ftruncate, expected %d", to, n, 9 - k);
		snprintf(from, sizeof from, "%s", to);
	}
	CHECK(chfs_close(fd) == 0, "close failed");
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: api_cases CASE DIR\n");
		return 2;
	}
	if (chfs_init(NULL) < 0) {
		perror("chfs_init");
		return 2;
	}
	if (chfs_mkdir(argv[2], 0755) < 0) {
		perror("chfs_mkdir");
		return 2;
	}
	static const struct {
		const char *name;
		int (*fn)(const char *);
	} cases[] = {{"recreate-dirty", recreate_dirty},
	             {"create-keeps", create_keeps},
	             {"open-any-mode", open_any_mode},
	             {"missing-parents", missing_parents},
	             {"posix-create", posix_create},
	             {"rename-while-writing", rename_while_writing},
	             {"ftruncate-after-rename", ftruncate_after_rename}};
	int rc = 2;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strcmp(argv[1], cases[i].name) == 0)
			rc = cases[i].fn(argv[2]);
	if (rc == 2)
		fprintf(stderr, "api_cases: unknown case %s\n", argv[1]);
	chfs_term();
	return rc;
}
