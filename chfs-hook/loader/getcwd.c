/*
 * getcwd.c — the one libc function the loader interposes: getcwd(3) in a CHFS working
 * directory deeper than PATH_MAX.
 *
 * The getcwd system call answers ENAMETOOLONG for a working directory of PATH_MAX bytes or more
 * (the hook answers as the kernel does), and glibc then walks ".." upwards, matching each
 * directory's identity in its parent's listing. Under the hook that walk leaves CHFS at the
 * mount point, whose parent's listing does not hold the mount point (it is a name the hook
 * serves, not a directory of the local file system), so glibc's getcwd failed with ENOENT where
 * a local file system answers with the whole name. When glibc's getcwd fails so, this asks the
 * hook for the name it holds, with a getcwd system call that carries CHFS_HOOK_GETCWD_LONG in
 * its third argument (the kernel ignores it: outside CHFS the answer is the kernel's again).
 * glibc's buffer rules are kept: a NULL buffer with size 0 is allocated as large as needed, a
 * NULL buffer with a size is allocated of that size, a buffer too small is ERANGE.
 * Callers inside libc (realpath(3) of a relative name) do not come through here.
 */
#define _GNU_SOURCE
#include "gate.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The name the hook holds, into a buffer of `size` bytes; its length + 1, or -1 with errno. */
static long hook_cwd(char *buf, size_t size)
{
	long n = syscall(SYS_getcwd, buf, size, CHFS_HOOK_GETCWD_LONG);
	if (n > 0 && buf[0] != '/') {
		errno = ENOENT; /* "(unreachable)…": not a CHFS name */
		return -1;
	}
	return n;
}

/* glibc's getcwd failed with `err`: the hook's answer, with getcwd(3)'s buffer rules. */
static char *deep_cwd(char *buf, size_t size, int err)
{
	if (buf) {
		if (hook_cwd(buf, size) > 0)
			return buf;
	} else {
		size_t cap = size ? size : CHFS_HOOK_CWD_MAX;
		char *b = malloc(cap);
		if (!b)
			return NULL; /* ENOMEM */
		long n = hook_cwd(b, cap);
		if (n > 0) {
			char *fit = size ? NULL : realloc(b, (size_t)n);
			return fit ? fit : b;
		}
		free(b);
	}
	/* ERANGE for a buffer too small is the answer; anything else keeps glibc's */
	if (errno != ERANGE)
		errno = err;
	return NULL;
}

EXPORT char *getcwd(char *buf, size_t size)
{
	static char *(*next)(char *, size_t);
	if (!next)
		next = (char *(*)(char *, size_t))dlsym(RTLD_NEXT, "getcwd");
	if (!next) {
		errno = ENOSYS;
		return NULL;
	}
	int saved = errno;
	char *r = next(buf, size);
	if (r || (errno != ENOENT && errno != ENAMETOOLONG))
		return r;
	r = deep_cwd(buf, size, errno);
	if (r)
		errno = saved;
	return r;
}
