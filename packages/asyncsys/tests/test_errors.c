/*
 * test_errors.c — failures come back cleanly: kernel errors as -errno in ret (on the ring and
 * on the execution threads), refused requests as a negative return of as_submit (number out
 * of range: -ENOSYS; calls that would end or replace the execution thread: -EINVAL; a full
 * area: -EAGAIN, and as_submitv places nothing then), bad arguments to the interface: -EINVAL.
 * usage: test_errors uring|threads
 */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static long run(struct as *as, long num, long a0, long a1, long a2, long a3, long a4)
{
	long args[6] = {a0, a1, a2, a3, a4, 0}, r = 0;
	int slot = as_submit(as, num, args);
	if (slot < 0)
		return 1000 + slot; /* distinct from any errno */
	int w = as_wait(as, slot, &r);
	return w < 0 ? 2000 + w : r;
}

int main(int argc, char **argv)
{
	unsigned flags = backend_flags(argc, argv);
	struct as_params p = {.nthreads = 2, .nreq = 1, .flags = flags};
	struct as *as;
	CHECK_EQ(as_init_params(&as, &p), 0);
	check_backend(as, flags);
	char buf[64];
	struct statx stx;

	/* kernel errors in ret: ring opcodes (or threads) ... */
	CHECK_EQ(run(as, SYS_pread64, -1, (long)buf, 8, 0, 0), -EBADF);
	CHECK_EQ(run(as, SYS_openat, AT_FDCWD, (long)"/nonexistent/asyncsys", O_RDONLY, 0, 0), -ENOENT);
	CHECK_EQ(run(as, SYS_statx, AT_FDCWD, (long)"/nonexistent/asyncsys", 0, STATX_SIZE, (long)&stx),
	         -ENOENT);
	CHECK_EQ(run(as, SYS_close, 1000000, 0, 0, 0, 0), -EBADF);
	/* A regular file (procfs files differ: pwrite gives ESPIPE there, io_uring's write EBADF). */
	char path[] = "/tmp/asyncsys-errors-XXXXXX";
	int wfd = mkstemp(path);
	CHECK(wfd >= 0 && write(wfd, "0123456789", 10) == 10);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	unlink(path);
	close(wfd);
	CHECK_EQ(run(as, SYS_pwrite64, fd, (long)buf, 8, 0, 0), -EBADF); /* read-only descriptor */
	/* ... a negative offset, which io_uring would take as "current position", fails as in pread */
	CHECK_EQ(run(as, SYS_pread64, fd, (long)buf, 8, -1, 0), -EINVAL);
	/* ... and execution-thread calls */
	CHECK_EQ(run(as, SYS_fcntl, -1, F_GETFL, 0, 0, 0), -EBADF);
	CHECK_EQ(run(as, SYS_kill, getpid(), 1000, 0, 0, 0), -EINVAL);
	CHECK_EQ(run(as, SYS_mkdirat, AT_FDCWD, (long)"/proc/asyncsys-no", 0700, 0, 0), -ENOENT);
	CHECK_EQ(run(as, 999, 0, 0, 0, 0, 0), -ENOSYS); /* in range, not a system call */
	/* and successes still work on the same area */
	CHECK_EQ(run(as, SYS_getppid, 0, 0, 0, 0, 0), getppid());
	CHECK(run(as, SYS_pread64, fd, (long)buf, 8, 0, 0) == 8);
	close(fd);

	/* refused at submission */
	long args[6] = {0};
	CHECK_EQ(as_submit(as, -1, args), -ENOSYS);
	CHECK_EQ(as_submit(as, 5000, args), -ENOSYS);
	CHECK_EQ(as_submit(as, SYS_exit, args), -EINVAL);
	CHECK_EQ(as_submit(as, SYS_exit_group, args), -EINVAL);
	CHECK_EQ(as_submit(as, SYS_clone, args), -EINVAL);
	CHECK_EQ(as_submit(as, SYS_execve, args), -EINVAL);
	CHECK_EQ(as_submit(as, SYS_vfork, args), -EINVAL);
	struct syscall_info mixed[2] = {{.num = SYS_getpid}, {.num = SYS_exit}};
	unsigned slots[64];
	CHECK_EQ(as_submitv(as, mixed, 2, slots), -EINVAL); /* nothing placed */

	/* a full area: placed but not started requests fill it */
	unsigned n;
	as_area(as, &n);
	CHECK(n <= 64);
	struct syscall_info req[64];
	for (unsigned i = 0; i < 64; i++)
		req[i] = (struct syscall_info){.num = SYS_getpid};
	CHECK_EQ(as_submitv(as, req, n + 1, slots), -EAGAIN); /* all or nothing */
	CHECK_EQ(as_submitv(as, req, n - 1, slots), (int)n - 1);
	CHECK(as_submit(as, SYS_getpid, args) >= 0);
	CHECK_EQ(as_submit(as, SYS_getpid, args), -EAGAIN);
	CHECK_EQ(as_submitv(as, req, 1, slots), -EAGAIN);
	/* collect them all: the area is usable again */
	unsigned got = 0;
	struct as_completion c[64];
	while (got < n) {
		CHECK(as_wakeup(as) > 0);
		int r = as_reap(as, c, 64);
		CHECK(r >= 0);
		for (int i = 0; i < r; i++) {
			CHECK_EQ(c[i].num, SYS_getpid);
			CHECK_EQ(c[i].ret, getpid());
		}
		got += r > 0 ? r : 0;
	}
	CHECK_EQ(got, n);
	CHECK_EQ(run(as, SYS_getppid, 0, 0, 0, 0, 0), getppid());

	/* interface misuse */
	long r;
	CHECK_EQ(as_poll(as, n, &r), -EINVAL);
	CHECK_EQ(as_wait(as, n + 5, &r), -EINVAL);
	CHECK_EQ(as_reap(as, NULL, 3), -EINVAL);
	CHECK_EQ(as_init(&as, 0, 10), -EINVAL);
	CHECK_EQ(as_init(&as, 1, 0), -EINVAL);
	CHECK_EQ(as_exit(NULL, NULL, NULL), -EINVAL);
	CHECK_EQ(as_exit(as, NULL, NULL), 0);
	return check_result(argc > 1 ? argv[1] : "uring");
}
