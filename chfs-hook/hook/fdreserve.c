/*
 * fdreserve.c — keep the CHFS client's own descriptors out of the application's way.
 *
 * libchfs and libfabric open sockets, epoll instances, eventfds and pipes. They share the
 * process's descriptor table with the application, and the kernel hands out the lowest free
 * number: without care they would take 3, 4, 5..., be inherited by exec'ed programs, and be
 * clobbered by the first `exec 5>file` of a shell script. The hook library is the first object
 * of its link-map namespace, so the definitions below interpose on these calls for libchfs and
 * libfabric (and only for them: the application's own libc lives in the other namespace). Each
 * new descriptor is moved, close-on-exec, to the top of the descriptor range
 * (3/4 of min(RLIMIT_NOFILE, 8192) and up), far from the numbers programs pick themselves.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#define EXPORT __attribute__((visibility("default")))

static int reserve_base;

static int base(void)
{
	if (!reserve_base) {
		struct rlimit rl;
		long lim = 1024;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			lim = (long)rl.rlim_cur;
		if (lim > 8192)
			lim = 8192;
		reserve_base = (int)(lim * 3 / 4);
	}
	return reserve_base;
}

static int moved(long fd)
{
	if (fd < 0) {
		errno = (int)-fd;
		return -1;
	}
	if (fd >= base())
		return (int)fd;
	long hi = RAW3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, base());
	if (hi < 0) /* the reserve is full: keep the low number rather than fail */
		return (int)fd;
	RAW1(SYS_close, fd);
	return (int)hi;
}

EXPORT int socket(int domain, int type, int protocol)
{
	return moved(RAW3(SYS_socket, domain, type, protocol));
}

EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	long rc = hook_raw(SYS_socketpair, domain, type, protocol, (long)sv, 0, 0);
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	sv[0] = moved(sv[0]);
	sv[1] = moved(sv[1]);
	return 0;
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return moved(RAW4(SYS_accept4, fd, addr, len, flags));
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return moved(RAW4(SYS_accept4, fd, addr, len, 0));
}

EXPORT int epoll_create1(int flags) { return moved(RAW1(SYS_epoll_create1, flags)); }
EXPORT int epoll_create(int size) { return size <= 0 ? (errno = EINVAL, -1) : epoll_create1(0); }
EXPORT int eventfd(unsigned int initval, int flags) { return moved(RAW2(SYS_eventfd2, initval, flags)); }

EXPORT int pipe2(int fds[2], int flags)
{
	long rc = RAW2(SYS_pipe2, fds, flags);
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	fds[0] = moved(fds[0]);
	fds[1] = moved(fds[1]);
	return 0;
}

EXPORT int pipe(int fds[2]) { return pipe2(fds, 0); }

static int open_moved(int dirfd, const char *path, int flags, mode_t mode)
{
	return moved(RAW4(SYS_openat, dirfd, path, flags, mode));
}

#define OPEN_MODE(flags, mode)                   \
	mode_t mode = 0;                         \
	if ((flags) & (O_CREAT | __O_TMPFILE)) { \
		va_list ap;                      \
		va_start(ap, flags);             \
		mode = va_arg(ap, mode_t);       \
		va_end(ap);                      \
	}

EXPORT int open(const char *path, int flags, ...)
{
	OPEN_MODE(flags, mode);
	return open_moved(AT_FDCWD, path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	OPEN_MODE(flags, mode);
	return open_moved(AT_FDCWD, path, flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags, mode);
	return open_moved(dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags, mode);
	return open_moved(dirfd, path, flags, mode);
}

EXPORT int __open_2(const char *path, int flags) { return open_moved(AT_FDCWD, path, flags, 0); }
EXPORT int __open64_2(const char *path, int flags) { return open_moved(AT_FDCWD, path, flags, 0); }

EXPORT int memfd_create(const char *name, unsigned int flags)
{
	return moved(RAW2(SYS_memfd_create, name, flags));
}

EXPORT int timerfd_create(int clockid, int flags) { return moved(RAW2(SYS_timerfd_create, clockid, flags)); }

EXPORT int dup(int fd) { return moved(RAW1(SYS_dup, fd)); }
