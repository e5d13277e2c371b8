/*
 * statefile.c — write a state file of the storage directory atomically (see statefile.h): the
 * temporary file is created 0600 without following a symlink, filled through stdio, checked
 * for write errors, optionally fsynced, then renamed over the old file; on any failure the
 * temporary file is removed and the old file stays.
 */
#define _GNU_SOURCE
#include "statefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int statefile_write(int rootfd, const char *name, int durable, int (*fill)(FILE *f, void *arg), void *arg)
{
	char tmp[256];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", name) >= (int)sizeof tmp)
		return -ENAMETOOLONG;
	int fd = openat(rootfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlinkat(rootfd, tmp, 0);
		return -ENOMEM;
	}
	int rc = fill(f, arg);
	if (rc == 0 && fflush(f) != 0)
		rc = -errno;
	if (rc == 0 && durable && fsync(fd) != 0)
		rc = -errno;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(rootfd, tmp, rootfd, name) != 0)
		rc = -errno;
	if (rc)
		unlinkat(rootfd, tmp, 0);
	return rc;
}
