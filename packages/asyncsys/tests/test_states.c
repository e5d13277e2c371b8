/*
 * test_states.c — every transition of a request slot, observed in the shared area: NONE (fresh)
 * -> HASCALL (as_submit; nothing starts before as_wakeup) -> EXECUTING (taken, blocked on an
 * empty pipe) -> COMPLETED (as_wakeup returns) -> NONE (as_poll collects; the reuse counter
 * moves). Once for a ring request (read) and once for an execution-thread request (ppoll), and
 * the area's size rule (whole pages of 72-byte slots).
 * usage: test_states uring|threads
 */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

struct feeder {
	const struct syscall_info *si;
	int wfd;
	int saw_executing;
};

/* Waits (up to 10 s) until the slot is EXECUTING, then makes the blocked call return. */
static void *feed(void *arg)
{
	struct feeder *f = arg;
	for (int i = 0; i < 10000 && !f->saw_executing; i++) {
		if (AS_STATE(atomic_load(&f->si->state)) == AS_EXECUTING)
			f->saw_executing = 1;
		else
			sleep_ms(1);
	}
	sleep_ms(20); /* it stays EXECUTING while the pipe is empty */
	if (AS_STATE(atomic_load(&f->si->state)) != AS_EXECUTING)
		f->saw_executing = 0;
	if (write(f->wfd, "x", 1) != 1)
		perror("write");
	return NULL;
}

static void one_cycle(struct as *as, long num, int rfd, int wfd, const char *what)
{
	static char buf[8];
	struct pollfd pfd = {.fd = rfd, .events = POLLIN};
	long args[6] = {0};
	if (num == SYS_read) {
		args[0] = rfd;
		args[1] = (long)buf;
		args[2] = 1;
	} else { /* ppoll(fds, 1, NULL, NULL, 8) */
		args[0] = (long)&pfd;
		args[1] = 1;
		args[4] = 8;
	}
	unsigned n;
	const struct syscall_info *area = as_area(as, &n);
	int slot = as_submit(as, num, args);
	CHECK(slot >= 0 && (unsigned)slot < n);
	if (slot < 0)
		return;
	const struct syscall_info *si = &area[slot];
	int64_t w0 = atomic_load(&si->state);
	CHECK_EQ(AS_STATE(w0), AS_HASCALL);
	CHECK_EQ(si->num, num);
	sleep_ms(50);
	CHECK_EQ(AS_STATE(atomic_load(&si->state)), AS_HASCALL); /* not started before as_wakeup */
	long r = 0;
	CHECK_EQ(as_poll(as, slot, &r), 0); /* placed, not complete */

	struct feeder f = {.si = si, .wfd = wfd};
	pthread_t t;
	pthread_create(&t, NULL, feed, &f);
	int c = as_wakeup(as); /* returns once the fed call completed */
	pthread_join(t, NULL);
	CHECK(f.saw_executing);
	CHECK_EQ(c, 1);
	int64_t w = atomic_load(&si->state);
	CHECK_EQ(AS_STATE(w), AS_COMPLETED);
	CHECK_EQ(w >> 8, w0 >> 8);
	CHECK_EQ(si->ret, 1); /* read: 1 byte; ppoll: 1 ready fd */
	CHECK_EQ(as_poll(as, slot, &r), 1);
	CHECK_EQ(r, 1);
	w = atomic_load(&si->state);
	CHECK_EQ(AS_STATE(w), AS_NONE);
	CHECK_EQ(w >> 8, (w0 >> 8) + 1);          /* the reuse counter moved */
	CHECK_EQ(as_poll(as, slot, &r), -EINVAL); /* collected exactly once */
	CHECK_EQ(as_wait(as, slot, &r), -EINVAL);
	if (num != SYS_read && read(rfd, buf, 1) != 1) /* ppoll left the byte in the pipe */
		CHECK(0);
	if (check_failures)
		fprintf(stderr, "  (in the %s cycle)\n", what);
}

int main(int argc, char **argv)
{
	unsigned flags = backend_flags(argc, argv);
	struct as_params p = {.nthreads = 2, .nreq = 1, .flags = flags};
	struct as *as;
	CHECK_EQ(as_init_params(&as, &p), 0);
	check_backend(as, flags);
	unsigned n;
	const struct syscall_info *area = as_area(as, &n);
	CHECK_EQ(n, 4096 / 72); /* one page */
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ(AS_STATE(atomic_load(&area[i].state)), AS_NONE);
	CHECK_EQ(as_wakeup(as), 0); /* nothing in flight: returns at once */

	int pfd[2];
	CHECK_EQ(pipe(pfd), 0);
	one_cycle(as, SYS_read, pfd[0], pfd[1], "read");
	one_cycle(as, SYS_ppoll, pfd[0], pfd[1], "ppoll");
	one_cycle(as, SYS_read, pfd[0], pfd[1], "second read (slot reuse)");
	CHECK_EQ(as_exit(as, NULL, NULL), 0);

	/* 512 slots are exactly 9 pages; one more slot takes a tenth page. */
	CHECK_EQ(as_init(&as, 1, 512), 0);
	as_area(as, &n);
	CHECK_EQ(n, 512);
	as_exit(as, NULL, NULL);
	CHECK_EQ(as_init(&as, 1, 513), 0);
	as_area(as, &n);
	CHECK_EQ(n, 10 * 4096 / 72);
	as_exit(as, NULL, NULL);
	close(pfd[0]);
	close(pfd[1]);
	return check_result(argc > 1 ? argv[1] : "uring");
}
