/*
 * shadow.c — where the hook keeps the node-local kernel objects that stand for CHFS FIFOs and
 * sockets.
 *
 * A FIFO or a socket in CHFS is only a name (libchfs special.c); its bytes never go through
 * CHFS. A hooked process that opens such a FIFO, or binds or connects such a socket, uses a
 * kernel object of the same kind on this node instead, its shadow, named by the entry's file
 * id (which stays with the entry through renames): every hooked process of the same user on
 * the node that uses the same CHFS entry meets in the same shadow, as processes of one node do
 * through an NFS FIFO or socket. The shadows live in a directory private to the user,
 * /tmp/chfs-fifo-<euid> (mode 0700, checked to be the user's and closed to others before every
 * use); nothing else is ever made outside CHFS on a program's behalf. Processes of different
 * users do not meet (their shadows differ): documented in the README. Raw syscalls only (this
 * runs inside the hook).
 */
#define _GNU_SOURCE
#include "hook.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>

long hook_shadow_path(const char *kind, unsigned long long fileid, char *out, size_t size)
{
	long uid = RAW0(SYS_geteuid);
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/chfs-fifo-%ld", uid);
	long rc = RAW2(SYS_mkdir, dir, 0700);
	if (rc < 0 && rc != -EEXIST)
		return rc;
	struct stat ds;
	if ((rc = RAW2(SYS_lstat, dir, &ds)) < 0)
		return rc;
	if (!S_ISDIR(ds.st_mode) || (long)ds.st_uid != uid || (ds.st_mode & 077))
		return -EACCES; /* not ours, or open to others: never trusted */
	if ((size_t)snprintf(out, size, "%s/%s%016llx", dir, kind, fileid) >= size)
		return -ENAMETOOLONG;
	return 0;
}
