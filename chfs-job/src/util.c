/* util.c — small process helpers shared by the methods: exit statuses as a shell reports them,
 * and passing a descriptor over a unix socket (SCM_RIGHTS). */
#define _GNU_SOURCE
#include "methods.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

int cj_wait_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 255;
}

int cj_send_fd(int sock, int fd)
{
	char c = 'f';
	struct iovec iov = {&c, 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr m = {
	        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c0 = CMSG_FIRSTHDR(&m);
	c0->cmsg_level = SOL_SOCKET;
	c0->cmsg_type = SCM_RIGHTS;
	c0->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c0), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

int cj_recv_fd(int sock)
{
	char c;
	struct iovec iov = {&c, 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {
	        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
		return -EIO;
	struct cmsghdr *c0 = CMSG_FIRSTHDR(&m);
	if (!c0 || c0->cmsg_type != SCM_RIGHTS)
		return -EIO;
	int fd;
	memcpy(&fd, CMSG_DATA(c0), sizeof(int));
	return fd;
}
