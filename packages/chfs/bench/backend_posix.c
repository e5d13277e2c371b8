/*
 * backend_posix.c — the same operations with POSIX I/O in a directory of the local file system
 * (the run script points it at the CHFS servers' storage file system): the machine's own limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_backend.h"

static int rootfd = -1;

static int p_init(const char *r)
{
	if (mkdir(r, 0755) != 0 && errno != EEXIST)
		return -1;
	rootfd = open(r, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	return rootfd < 0 ? -1 : 0;
}

static void p_fini(void) { close(rootfd); }

static int p_create(const char *p)
{
	return openat(rootfd, p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}
static int p_open_rd(const char *p) { return openat(rootfd, p, O_RDONLY | O_CLOEXEC); }
static int p_open_wr(const char *p) { return openat(rootfd, p, O_WRONLY | O_CLOEXEC); }
static int p_stat(const char *p, struct stat *st) { return fstatat(rootfd, p, st, 0); }
static int p_unlink(const char *p) { return unlinkat(rootfd, p, 0); }
static int p_mkdir(const char *p) { return mkdirat(rootfd, p, 0755); }
static int p_rmdir(const char *p) { return unlinkat(rootfd, p, AT_REMOVEDIR); }

const struct bench_backend bench_posix = {
        "posix", p_init, p_fini, p_create, p_open_rd, p_open_wr, pwrite,
        pread,   close,  p_stat, p_unlink, p_mkdir,   p_rmdir,
};
