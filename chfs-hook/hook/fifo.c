/*
 * fifo.c — opening a CHFS FIFO under the hook: a node-local shadow FIFO (shadow.c says where
 * the shadows live and who meets in them). The shadow is made on first open and left there (an
 * empty node). All file-system calls here are raw syscalls (this runs inside the hook).
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

long hook_open_fifo(const char *cpath, int flags)
{
	struct stat st;
	if (chfs_stat(cpath, &st) != 0 || !S_ISFIFO(st.st_mode))
		return -ENXIO; /* a socket: ENXIO as Linux's open of one */
	char path[96];
	long rc = hook_shadow_path("", (unsigned long long)st.st_ino, path, sizeof path);
	if (rc < 0)
		return rc;
	rc = RAW3(SYS_mknod, path, S_IFIFO | 0600, 0);
	if (rc < 0 && rc != -EEXIST)
		return rc;
	return RAW3(SYS_open, path, (flags & (O_ACCMODE | O_NONBLOCK | O_CLOEXEC)) | O_NOFOLLOW, 0);
}
