/*
 * backend_chfs.c — the benchmark's operations on CHFS through chfs.h only (as IOR's CHFS backend
 * does). The pool comes from CHFS_SERVER; root is a CHFS directory prefix.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <chfs.h>

#include "bench_backend.h"

static char root[1024];

static const char *full(const char *p, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", root, p);
	return buf;
}

static int c_init(const char *r)
{
	snprintf(root, sizeof root, "%s", r && *r ? r : "/");
	if (chfs_init(NULL) != 0)
		return -1;
	if (chfs_mkdir(root, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

static void c_fini(void) { chfs_term(); }

#define PATHOP(expr)             \
	char b[2048];            \
	full(path, b, sizeof b); \
	return expr

static int c_create(const char *path) { PATHOP(chfs_create(b, O_WRONLY | O_TRUNC, 0644)); }
static int c_open_rd(const char *path) { PATHOP(chfs_open(b, O_RDONLY)); }
static int c_open_wr(const char *path) { PATHOP(chfs_open(b, O_WRONLY)); }
static int c_stat(const char *path, struct stat *st) { PATHOP(chfs_stat(b, st)); }
static int c_unlink(const char *path) { PATHOP(chfs_unlink(b)); }
static int c_mkdir(const char *path) { PATHOP(chfs_mkdir(b, 0755)); }
static int c_rmdir(const char *path) { PATHOP(chfs_rmdir(b)); }

static ssize_t c_pwrite(int fd, const void *buf, size_t n, off_t off) { return chfs_pwrite(fd, buf, n, off); }

static ssize_t c_pread(int fd, void *buf, size_t n, off_t off) { return chfs_pread(fd, buf, n, off); }

const struct bench_backend bench_chfs = {
        "chfs",  c_init,     c_fini, c_create, c_open_rd, c_open_wr, c_pwrite,
        c_pread, chfs_close, c_stat, c_unlink, c_mkdir,   c_rmdir,
};
