/* seccomp_read.c — the seccomp supervisor carries out a read of a limited file for the tracee.
 *
 * A seccomp supervisor never sees a call's result: answered CONTINUE, the kernel runs the call
 * after the answer. Counting the requested size instead made a small-file reader pay for its
 * buffer: `read(fd, buf, 1 MiB)` returning 100 bytes counted 1 MiB against the disk limit. So a
 * read of a regular file (or block device) under a disk limit is done here and answered with its
 * count, which is what the limit then counts:
 *   pidfd_open(caller) -> SECCOMP_IOCTL_NOTIF_ID_VALID (the pidfd names the thread that is stopped
 *   in this call, not a process that reused its pid) -> pidfd_getfd(its descriptor) -> fstat
 *   (regular file or block device, else the kernel runs the call as before) -> read/pread into a
 *   1 MiB page-aligned buffer -> process_vm_writev into the caller's buffers, chunk by chunk until
 *   the request is met or the file ends, as the kernel's own read of a regular file does.
 * The duplicate shares the caller's open file description, so read() advances the caller's offset
 * exactly as its own read would have. If the caller's buffer cannot be written past some byte,
 * the bytes read beyond it are given back (lseek) and the count stops there (EFAULT if nothing was
 * written): the kernel's own answer to a partly unmapped buffer.
 *
 * An answer that is refused after the read (the call was withdrawn: the caller was signalled or
 * died; the supervisor asks the kernel for SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, so on Linux
 * >= 5.19 only death withdraws a received call) gives the offset back too (cj_sread_finish), so a
 * restarted read reads the same bytes again. A positional read (pread64, preadv, preadv2 with an
 * offset) leaves the offset alone and has nothing to give back.
 *
 * Not carried out here (the kernel runs them, the requested size is counted as before): sockets
 * (their data cannot be given back if the answer is refused, and a blocking receive would stall
 * the supervisor), preadv2 with RWF_* flags. The read runs in the supervisor: a file on a slow
 * file system (NFS, FUSE) stalls the other processes' calls for as long as it takes; a FUSE
 * daemon sees the supervisor's pid as the reader. */
#define _GNU_SOURCE
#include "seccomp_read.h"
#include "policy.h"
#include "tracee.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHUNK (1u << 20)
#define MAX_RW 0x7ffff000UL /* the kernel's MAX_RW_COUNT: one call moves at most this much */
#define MAX_IOV 1024        /* UIO_MAXIOV */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

#define NPIDFD 64 /* callers' pidfds kept, by thread id (a direct-mapped cache) */

struct cj_sread {
	void *buf; /* CHUNK bytes, page-aligned (a descriptor opened O_DIRECT) */
	struct {
		pid_t tid;
		int fd;
	} pidfd[NPIDFD];
	struct iovec seg[MAX_IOV]; /* the caller's buffers */
	struct iovec win[MAX_IOV]; /* the part of them one chunk fills */
};

struct cj_sread *cj_sread_new(void)
{
	struct cj_sread *r = calloc(1, sizeof(*r));
	if (r && !(r->buf = aligned_alloc(4096, CHUNK))) {
		free(r);
		r = NULL;
	}
	for (int i = 0; r && i < NPIDFD; i++)
		r->pidfd[i].fd = -1;
	return r;
}

void cj_sread_free(struct cj_sread *r)
{
	for (int i = 0; r && i < NPIDFD; i++)
		if (r->pidfd[i].fd >= 0)
			close(r->pidfd[i].fd);
	if (r)
		free(r->buf);
	free(r);
}

bool cj_sread_handles(int nr)
{
	return nr == SYS_read || nr == SYS_pread64 || nr == SYS_readv || nr == SYS_preadv ||
	       nr == SYS_preadv2;
}

/* A pidfd of thread tid: the one kept from its last read unless fresh, else a new one. */
static int pidfd_of(struct cj_sread *r, pid_t tid, bool fresh)
{
	int i = (int)((unsigned)tid % NPIDFD);
	if (r->pidfd[i].tid == tid && r->pidfd[i].fd >= 0 && !fresh)
		return r->pidfd[i].fd;
	if (r->pidfd[i].fd >= 0)
		close(r->pidfd[i].fd);
	int fd = (int)syscall(SYS_pidfd_open, tid, 0);
	if (fd < 0) /* a thread, not a leader: ENOENT on Linux 6.18, EINVAL on older ones */
		fd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	r->pidfd[i].tid = fd < 0 ? 0 : tid;
	r->pidfd[i].fd = fd;
	return fd;
}

/* The caller's descriptor tfd, duplicated once its notification is confirmed pending: -ENOENT if
 * it is not (nothing may be done for it), another -errno if the descriptor cannot be taken.
 * A pidfd names one process for good: a kept one whose thread has ended (its number perhaps
 * reused since) fails with ESRCH, and a new one is opened — then checked, as every pidfd is,
 * against the pending notification before it is used. Kept pidfds save the pidfd_open and
 * close that were a quarter of the supervisor's time per read. */
static int take_fd(struct cj_sread *r, int listener, const struct seccomp_notif *req, int tfd)
{
	for (int fresh = 0; fresh < 2; fresh++) {
		int pidfd = pidfd_of(r, req->pid, fresh);
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
			return -ENOENT; /* the thread is gone, and with it the call */
		if (pidfd < 0)
			return -ESRCH; /* pending, but no pidfd (a kernel before 6.9, for a thread): the
			                * kernel runs the call, counted by its request */
		int fd = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
		if (fd >= 0)
			return fd;
		if (errno != ESRCH)
			return errno == ENOENT ? -EBADF : -errno;
	}
	return -ENOENT;
}

/* The caller's buffers: r->seg[0..*nseg) and their total (capped as the kernel caps it), or -errno. */
static long buffers(struct cj_sread *r, pid_t pid, int nr, const uint64_t *a, int *nseg)
{
	if (nr == SYS_read || nr == SYS_pread64) {
		r->seg[0] = (struct iovec){(void *)(uintptr_t)a[1], (size_t)a[2]};
		*nseg = 1;
	} else {
		if (a[2] > MAX_IOV)
			return -EINVAL;
		*nseg = (int)a[2];
		if (*nseg && cj_tracee_read(pid, a[1], r->seg, (size_t)*nseg * sizeof(struct iovec)) < 0)
			return -EFAULT;
	}
	unsigned long total = 0;
	for (int i = 0; i < *nseg; i++) {
		if (r->seg[i].iov_len > (size_t)SSIZE_MAX)
			return -EINVAL;
		unsigned long take = r->seg[i].iov_len < MAX_RW - total ? r->seg[i].iov_len : MAX_RW - total;
		r->seg[i].iov_len = take; /* past MAX_RW the kernel fills nothing either */
		total += take;
	}
	return (long)total;
}

/* The caller's buffer space [*si, *so) onwards, n bytes of it, as r->win: how many entries. */
static int window(struct cj_sread *r, int nseg, int *si, size_t *so, size_t n)
{
	int k = 0;
	while (n && *si < nseg) {
		size_t room = r->seg[*si].iov_len - *so, take = room < n ? room : n;
		if (take)
			r->win[k++] = (struct iovec){(char *)r->seg[*si].iov_base + *so, take};
		n -= take;
		*so += take;
		if (*so == r->seg[*si].iov_len)
			(*si)++, *so = 0;
	}
	return k;
}

int cj_sread_run(struct cj_sread *r, int listener, const struct seccomp_notif *req, int *cls,
                 struct cj_sread_done *done)
{
	const uint64_t *a = (const uint64_t *)req->data.args;
	int nr = req->data.nr;
	pid_t pid = req->pid;
	*done = (struct cj_sread_done){0, -1, 0};
	if (nr == SYS_preadv2 && a[5] != 0) { /* RWF_NOWAIT, RWF_HIPRI, ...: the kernel's to do */
		*cls = cj_tracee_fd_class(pid, (int)a[0]);
		return 0;
	}
	int fd = take_fd(r, listener, req, (int)a[0]);
	if (fd == -ENOENT)
		return -ENOENT;
	struct stat st = {0};
	if (fd < 0 || fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
		/* a socket, a pipe, a bad descriptor (the kernel gives EBADF), or one we may not take:
		 * class it as before, by the caller's /proc entry */
		*cls = fd >= 0 && S_ISSOCK(st.st_mode) ? CJ_NET
		       : fd >= 0                       ? -1
		                                       : cj_tracee_fd_class(pid, (int)a[0]);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	done->fd = fd;
	int nseg = 0;
	long total = buffers(r, pid, nr, a, &nseg);
	if (total < 0) {
		done->res = total;
		return 1;
	}
	/* preadv2's offset -1: the current one, as readv */
	bool positional = nr == SYS_pread64 || nr == SYS_preadv || (nr == SYS_preadv2 && (int64_t)a[3] != -1);
	off_t off = (off_t)a[3];
	long moved = 0, err = 0;
	int si = 0;
	size_t so = 0;
	do {
		size_t want = (size_t)(total - moved) < CHUNK ? (size_t)(total - moved) : CHUNK;
		ssize_t n = positional ? pread(fd, r->buf, want, off + moved) : read(fd, r->buf, want);
		if (n <= 0) {
			err = n < 0 ? -errno : 0;
			break;
		}
		int k = window(r, nseg, &si, &so, (size_t)n);
		struct iovec l = {r->buf, (size_t)n};
		ssize_t w = process_vm_writev(pid, &l, 1, r->win, (unsigned long)k, 0);
		if (w < 0)
			w = 0;
		moved += w;
		if (w < n) { /* the caller's buffer ends (unmapped) there: give back what did not fit */
			if (!positional)
				lseek(fd, -(off_t)(n - w), SEEK_CUR);
			if (moved == 0)
				err = -EFAULT;
			break;
		}
		if ((size_t)n < want)
			break; /* the end of the file */
	} while (moved < total);
	done->res = moved > 0 ? moved : err;
	done->rewind = positional ? 0 : moved;
	return 1;
}

void cj_sread_finish(struct cj_sread_done *done, bool answered)
{
	if (done->fd < 0)
		return;
	if (!answered && done->rewind > 0)
		lseek(done->fd, -(off_t)done->rewind, SEEK_CUR);
	close(done->fd);
	done->fd = -1;
}
