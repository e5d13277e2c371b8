/*
 * test_start.c — as_start starts what is placed and returns without waiting: a pipe write
 * placed with as_submit has not run before as_start (the pipe stays empty), runs after it while
 * the caller does not call into the library (the caller reads the byte with plain read(2)), and
 * its completion is then collected once with as_wait. A batch of pwrite64s to a file (ring
 * requests, and gettid on the execution threads) started together all land.
 * usage: test_start uring|threads
 */
#define _GNU_SOURCE
#include "check.h"
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct as_params p = {.nthreads = 2, .nreq = 64, .flags = backend_flags(argc, argv)};
	struct as *as = NULL;
	CHECK_EQ(as_init_params(&as, &p), 0);
	if (!as)
		return check_result("test_start");
	check_backend(as, p.flags);
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	static const char byte = 'x';
	long args[6] = {fds[1], (long)&byte, 1};
	int slot = as_submit(as, SYS_write, args);
	CHECK(slot >= 0);
	struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
	CHECK_EQ(poll(&pfd, 1, 50), 0); /* placed, not started */
	CHECK_EQ(as_start(as), 0);
	CHECK_EQ(poll(&pfd, 1, 5000), 1); /* started without a wait call */
	char got = 0;
	CHECK_EQ(read(fds[0], &got, 1), 1);
	CHECK_EQ(got, 'x');
	long ret = -1;
	CHECK_EQ(as_wait(as, (unsigned)slot, &ret), 0);
	CHECK_EQ(ret, 1);
	CHECK_EQ(as_start(as), 0); /* nothing placed: a no-op */

	char path[] = "/tmp/asyncsys-start-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	static char blocks[16][512];
	int slots[17];
	for (int i = 0; i < 16; i++) {
		memset(blocks[i], 'a' + i, sizeof blocks[i]);
		long a[6] = {fd, (long)blocks[i], sizeof blocks[i], (long)i * 512};
		slots[i] = as_submit(as, SYS_pwrite64, a);
		CHECK(slots[i] >= 0);
	}
	slots[16] = as_submit(as, SYS_gettid, (long[6]){0});
	CHECK_EQ(as_start(as), 0);
	for (int i = 0; i < 17; i++) {
		ret = -1;
		CHECK_EQ(as_wait(as, (unsigned)slots[i], &ret), 0);
		if (i < 16)
			CHECK_EQ(ret, 512);
		else
			CHECK(ret > 0); /* an execution thread's tid */
	}
	char back[512];
	for (int i = 0; i < 16; i++) {
		CHECK_EQ(pread(fd, back, sizeof back, (off_t)i * 512), 512);
		CHECK(memcmp(back, blocks[i], sizeof back) == 0);
	}
	close(fd);
	close(fds[0]);
	close(fds[1]);
	CHECK_EQ(as_exit(as, NULL, NULL), 0);
	return check_result("test_start");
}
