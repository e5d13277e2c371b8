/* tracee.c — access to a traced process (see tracee.h) through process_vm_readv/writev and
 * /proc/PID. The caller owns the time-of-check problem: memory read here may change after the
 * read; decide.c documents what each method does about it. */
#define _GNU_SOURCE
#include "tracee.h"
#include "policy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

int cj_tracee_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = {buf, len}, r = {(void *)(uintptr_t)addr, len};
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int cj_tracee_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = {(void *)buf, len}, r = {(void *)(uintptr_t)addr, len};
	ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

ssize_t cj_tracee_read_str(pid_t pid, uint64_t addr, char *buf, size_t len)
{
	size_t got = 0;
	if (addr == 0)
		return -EFAULT;
	while (got < len) {
		/* never cross a page boundary in one read: the next page may be unmapped */
		size_t chunk = 4096 - ((addr + got) & 4095);
		if (chunk > len - got)
			chunk = len - got;
		int rc = cj_tracee_read(pid, addr + got, buf + got, chunk);
		if (rc < 0)
			return rc;
		char *nul = memchr(buf + got, '\0', chunk);
		if (nul)
			return nul - buf;
		got += chunk;
	}
	return -ENAMETOOLONG;
}

int cj_tracee_dir(pid_t pid, int dirfd, char *out, size_t outlen)
{
	char link[64];
	if (dirfd < 0)
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	else
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)pid, dirfd);
	ssize_t n = readlink(link, out, outlen - 1);
	if (n < 0)
		return errno == ENOENT ? -EBADF : -errno;
	out[n] = '\0';
	if (out[0] != '/')
		return -ENOTDIR; /* socket:[..], anon_inode:.. */
	return 0;
}

int cj_tracee_fd_class(pid_t pid, int fd)
{
	char link[64];
	struct stat st;
	snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)pid, fd);
	if (stat(link, &st) < 0)
		return -1;
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
		return CJ_DISK;
	if (S_ISSOCK(st.st_mode))
		return CJ_NET;
	return -1;
}

mode_t cj_tracee_umask(pid_t pid)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	unsigned m = 022;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &m) == 1)
			break;
	if (f)
		fclose(f);
	return (mode_t)m;
}

int cj_tracee_getfd(pid_t pid, int tfd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, O_EXCL); /* PIDFD_THREAD: pid is a thread */
	if (pidfd < 0)
		return -ESRCH;
	int fd = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
	int e = errno;
	close(pidfd);
	return fd < 0 ? -e : fd;
}

uint64_t cj_tracee_io_size(pid_t pid, int iov, const uint64_t *args)
{
	uint64_t iov_addr = args[1], iovcnt = args[2];
	if (iov == 0)
		return args[2];
	if (iov == 2) {
		struct msghdr m;
		if (cj_tracee_read(pid, args[1], &m, sizeof(m)) < 0)
			return 0;
		iov_addr = (uint64_t)(uintptr_t)m.msg_iov;
		iovcnt = m.msg_iovlen;
	}
	uint64_t total = 0;
	struct iovec v[64];
	for (uint64_t done = 0; done < iovcnt && done < 1024;) {
		size_t k = iovcnt - done < 64 ? (size_t)(iovcnt - done) : 64;
		if (cj_tracee_read(pid, iov_addr + done * sizeof(struct iovec), v, k * sizeof(struct iovec)) <
		    0)
			break;
		for (size_t i = 0; i < k; i++)
			total += v[i].iov_len;
		done += k;
	}
	return total;
}
