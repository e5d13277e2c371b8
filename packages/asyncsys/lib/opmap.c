/*
 * opmap.c — which system calls the ring runs, and their SQEs. A call goes to the ring only when
 * its io_uring opcode does exactly what the system call would do with these arguments; anything
 * else (negative pread offsets, which io_uring reads as "current position"; lengths beyond 32
 * bits; sendto/recvfrom with an address; splice's offset pointers) stays on the execution
 * threads, where syscall(2) gives the kernel's own answer.
 */
#include "internal.h"
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>

#define U32(x) ((uint64_t)(x) <= UINT32_MAX)
#define NONNEG(x) ((int64_t)(x) >= 0)

/* The io_uring opcode for si, or -1. */
static int opcode_of(const struct syscall_info *si)
{
	const int64_t *a = si->arg;
	switch (si->num) {
	case SYS_read: return U32(a[2]) ? IORING_OP_READ : -1;
	case SYS_write: return U32(a[2]) ? IORING_OP_WRITE : -1;
	case SYS_pread64: return U32(a[2]) && NONNEG(a[3]) ? IORING_OP_READ : -1;
	case SYS_pwrite64: return U32(a[2]) && NONNEG(a[3]) ? IORING_OP_WRITE : -1;
	case SYS_readv: return U32(a[2]) ? IORING_OP_READV : -1;
	case SYS_writev: return U32(a[2]) ? IORING_OP_WRITEV : -1;
	case SYS_preadv: return U32(a[2]) && NONNEG(a[3]) ? IORING_OP_READV : -1;
	case SYS_pwritev: return U32(a[2]) && NONNEG(a[3]) ? IORING_OP_WRITEV : -1;
	case SYS_fsync:
	case SYS_fdatasync: return IORING_OP_FSYNC;
	case SYS_sync_file_range: return U32(a[2]) && NONNEG(a[1]) ? IORING_OP_SYNC_FILE_RANGE : -1;
	case SYS_fallocate: return IORING_OP_FALLOCATE;
	case SYS_fadvise64: return U32(a[2]) && NONNEG(a[1]) ? IORING_OP_FADVISE : -1;
	case SYS_open:
	case SYS_openat: return IORING_OP_OPENAT;
	case SYS_openat2: return a[3] == sizeof(struct open_how) ? IORING_OP_OPENAT2 : -1;
	case SYS_close: return IORING_OP_CLOSE;
	case SYS_statx: return IORING_OP_STATX;
	case SYS_sendto: return U32(a[2]) && a[4] == 0 ? IORING_OP_SEND : -1;
	case SYS_recvfrom: return U32(a[2]) && a[4] == 0 && a[5] == 0 ? IORING_OP_RECV : -1;
	case SYS_sendmsg: return IORING_OP_SENDMSG;
	case SYS_recvmsg: return IORING_OP_RECVMSG;
	case SYS_accept:
	case SYS_accept4: return IORING_OP_ACCEPT;
	case SYS_connect: return IORING_OP_CONNECT;
	case SYS_shutdown: return IORING_OP_SHUTDOWN;
	case SYS_socket: return IORING_OP_SOCKET;
	case SYS_epoll_ctl: return IORING_OP_EPOLL_CTL;
	case SYS_tee: return U32(a[2]) ? IORING_OP_TEE : -1;
	case SYS_rename:
	case SYS_renameat:
	case SYS_renameat2: return IORING_OP_RENAMEAT;
	case SYS_unlink:
	case SYS_rmdir:
	case SYS_unlinkat: return IORING_OP_UNLINKAT;
	case SYS_mkdir:
	case SYS_mkdirat: return IORING_OP_MKDIRAT;
	case SYS_symlink:
	case SYS_symlinkat: return IORING_OP_SYMLINKAT;
	case SYS_link:
	case SYS_linkat: return IORING_OP_LINKAT;
	default: return -1;
	}
}

bool as_opmap_has(const struct syscall_info *si, const struct io_uring_probe *probe)
{
	int op = opcode_of(si);
	return op >= 0 && probe && io_uring_opcode_supported(probe, op);
}

#define P(i) ((void *)(uintptr_t)a[i])
#define I(i) ((int)a[i])

void as_opmap_prep(struct io_uring_sqe *sqe, const struct syscall_info *si)
{
	const int64_t *a = si->arg;
	switch (si->num) {
	case SYS_read: io_uring_prep_read(sqe, I(0), P(1), a[2], (uint64_t)-1); break;
	case SYS_write: io_uring_prep_write(sqe, I(0), P(1), a[2], (uint64_t)-1); break;
	case SYS_pread64: io_uring_prep_read(sqe, I(0), P(1), a[2], a[3]); break;
	case SYS_pwrite64: io_uring_prep_write(sqe, I(0), P(1), a[2], a[3]); break;
	case SYS_readv: io_uring_prep_readv(sqe, I(0), P(1), a[2], (uint64_t)-1); break;
	case SYS_writev: io_uring_prep_writev(sqe, I(0), P(1), a[2], (uint64_t)-1); break;
	case SYS_preadv: io_uring_prep_readv(sqe, I(0), P(1), a[2], a[3]); break;
	case SYS_pwritev: io_uring_prep_writev(sqe, I(0), P(1), a[2], a[3]); break;
	case SYS_fsync: io_uring_prep_fsync(sqe, I(0), 0); break;
	case SYS_fdatasync: io_uring_prep_fsync(sqe, I(0), IORING_FSYNC_DATASYNC); break;
	case SYS_sync_file_range: io_uring_prep_sync_file_range(sqe, I(0), a[2], a[1], I(3)); break;
	case SYS_fallocate: io_uring_prep_fallocate(sqe, I(0), I(1), a[2], a[3]); break;
	case SYS_fadvise64: io_uring_prep_fadvise(sqe, I(0), a[1], a[2], I(3)); break;
	case SYS_open: io_uring_prep_openat(sqe, AT_FDCWD, P(0), I(1), a[2]); break;
	case SYS_openat: io_uring_prep_openat(sqe, I(0), P(1), I(2), a[3]); break;
	case SYS_openat2: io_uring_prep_openat2(sqe, I(0), P(1), P(2)); break;
	case SYS_close: io_uring_prep_close(sqe, I(0)); break;
	case SYS_statx: io_uring_prep_statx(sqe, I(0), P(1), I(2), a[3], P(4)); break;
	case SYS_sendto: io_uring_prep_send(sqe, I(0), P(1), a[2], I(3)); break;
	case SYS_recvfrom: io_uring_prep_recv(sqe, I(0), P(1), a[2], I(3)); break;
	case SYS_sendmsg: io_uring_prep_sendmsg(sqe, I(0), P(1), a[2]); break;
	case SYS_recvmsg: io_uring_prep_recvmsg(sqe, I(0), P(1), a[2]); break;
	case SYS_accept: io_uring_prep_accept(sqe, I(0), P(1), P(2), 0); break;
	case SYS_accept4: io_uring_prep_accept(sqe, I(0), P(1), P(2), I(3)); break;
	case SYS_connect: io_uring_prep_connect(sqe, I(0), P(1), a[2]); break;
	case SYS_shutdown: io_uring_prep_shutdown(sqe, I(0), I(1)); break;
	case SYS_socket: io_uring_prep_socket(sqe, I(0), I(1), I(2), 0); break;
	case SYS_epoll_ctl: io_uring_prep_epoll_ctl(sqe, I(0), I(2), I(1), P(3)); break;
	case SYS_tee: io_uring_prep_tee(sqe, I(0), I(1), a[2], a[3]); break;
	case SYS_rename: io_uring_prep_renameat(sqe, AT_FDCWD, P(0), AT_FDCWD, P(1), 0); break;
	case SYS_renameat: io_uring_prep_renameat(sqe, I(0), P(1), I(2), P(3), 0); break;
	case SYS_renameat2: io_uring_prep_renameat(sqe, I(0), P(1), I(2), P(3), a[4]); break;
	case SYS_unlink: io_uring_prep_unlinkat(sqe, AT_FDCWD, P(0), 0); break;
	case SYS_rmdir: io_uring_prep_unlinkat(sqe, AT_FDCWD, P(0), AT_REMOVEDIR); break;
	case SYS_unlinkat: io_uring_prep_unlinkat(sqe, I(0), P(1), I(2)); break;
	case SYS_mkdir: io_uring_prep_mkdirat(sqe, AT_FDCWD, P(0), a[1]); break;
	case SYS_mkdirat: io_uring_prep_mkdirat(sqe, I(0), P(1), a[2]); break;
	case SYS_symlink: io_uring_prep_symlinkat(sqe, P(0), AT_FDCWD, P(1)); break;
	case SYS_symlinkat: io_uring_prep_symlinkat(sqe, P(0), I(1), P(2)); break;
	case SYS_link: io_uring_prep_linkat(sqe, AT_FDCWD, P(0), AT_FDCWD, P(1), 0); break;
	case SYS_linkat: io_uring_prep_linkat(sqe, I(0), P(1), I(2), P(3), I(4)); break;
	}
}
