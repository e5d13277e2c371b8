/*
 * fifo.c — opening a CHFS FIFO under the hook: a node-local shadow FIFO.
 *
 * A FIFO in CHFS is only a name (libchfs special.c); its bytes never go through CHFS. A hooked
 * process that opens one gets a kernel FIFO standing for it on this node, so every hooked
 * process of the same user on the node that opens the same CHFS FIFO (same file id) meets in
 * the same kernel FIFO, as processes of one node do through an NFS FIFO. The shadows live in a
 * directory private to the user, /tmp/chfs-fifo-<euid> (mode 0700, checked to be the user's
 * and closed to others before use), named by the file id; they are left there (empty nodes).
 * Processes of different users do not meet (their shadows differ): documented in the README.
 * All file-system calls here are raw syscalls (this runs inside the hook).
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>

long hook_open_fifo(const char *cpath, int flags)
{
	struct stat st;
	if (chfs_stat(cpath, &st) != 0 || !S_ISFIFO(st.st_mode))
		return -ENXIO; /* a socket: ENXIO as Linux's open of one */
	long uid = RAW0(SYS_geteuid);
	char dir[64], path[96];
	snprintf(dir, sizeof dir, "/tmp/chfs-fifo-%ld", uid);
	long rc = RAW2(SYS_mkdir, dir, 0700);
	if (rc < 0 && rc != -EEXIST)
		return rc;
	struct stat ds;
	if ((rc = RAW2(SYS_lstat, dir, &ds)) < 0)
		return rc;
	if (!S_ISDIR(ds.st_mode) || (long)ds.st_uid != uid || (ds.st_mode & 077))
		return -EACCES; /* not ours, or open to others: never trusted */
	snprintf(path, sizeof path, "%s/%016llx", dir, (unsigned long long)st.st_ino);
	rc = RAW3(SYS_mknod, path, S_IFIFO | 0600, 0);
	if (rc < 0 && rc != -EEXIST)
		return rc;
	return RAW3(SYS_open, path, (flags & (O_ACCMODE | O_NONBLOCK | O_CLOEXEC)) | O_NOFOLLOW, 0);
}
