/*
 * test_threads.c — one area shared by 4 requesting threads at once: each places its own
 * requests (ring preads of its own file region, execution-thread lseek/getppid, and now and
 * then a read of its own pipe), and collects them in its own way
 * (as_wait per slot, as_poll loops, as_wakeup + as_wait); a feeder thread writes a byte to
 * every pipe each 2 ms, so those reads block for a while on the ring or on an execution thread
 * (never on each other: an execution thread blocked on a read that only a queued request could
 * satisfy would wait forever, as any blocking call would). Every result must be right and every
 * request collected once; a lost wake-up shows as the ctest timeout. Run under TSan by
 * ci/test --tsan.
 * usage: test_threads uring|threads
 */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NT 4
#define PER 3000
#define BLK 512

static struct as *as;
static int fd;
static int pipes[NT][2];
static _Atomic int bad;
static _Atomic int stop;

static void *feeder(void *arg)
{
	struct timespec ts = {0, 2 * 1000000L};
	while (!atomic_load(&stop)) {
		for (int t = 0; t < NT; t++)
			if (write(pipes[t][1], "x", 1) != 1)
				atomic_fetch_add(&bad, 1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void expect(long got, long want, int t, int i)
{
	if (got != want && atomic_fetch_add(&bad, 1) < 10)
		fprintf(stderr, "thread %d request %d: %ld, expected %ld\n", t, i, got, want);
}

static void *requester(void *arg)
{
	int t = (int)(long)arg;
	static _Thread_local char buf[16][BLK];
	for (int i = 0; i < PER; i += 16) {
		struct syscall_info si[16];
		long want[16];
		int n = 0;
		for (int k = 0; k < 16 && i + k < PER; k++, n++) {
			int j = i + k;
			if (j % 3 == 0) {
				si[k] = (struct syscall_info){.num = SYS_pread64,
				                              .arg = {fd, (long)buf[k], BLK, (long)t * BLK}};
				want[k] = BLK;
			} else if (j % 3 == 1) {
				si[k] = (struct syscall_info){.num = SYS_getppid};
				want[k] = getppid();
			} else if (j % 97 == 2) {
				si[k] = (struct syscall_info){.num = SYS_read,
				                              .arg = {pipes[t][0], (long)buf[k], 1}};
				want[k] = 1;
			} else {
				si[k] = (struct syscall_info){.num = SYS_lseek, .arg = {fd, j, SEEK_SET}};
				want[k] = j;
			}
		}
		unsigned slots[16];
		int r;
		while ((r = as_submitv(as, si, n, slots)) == -EAGAIN)
			sched_yield();
		expect(r, n, t, i);
		if (r != n)
			return NULL;
		for (int k = 0; k < n; k++) {
			long ret = -12345;
			switch ((i / 16 + t) % 3) {
			case 0: expect(as_wait(as, slots[k], &ret), 0, t, i + k); break;
			case 1:
				while ((r = as_poll(as, slots[k], &ret)) == 0)
					as_wakeup(as);
				expect(r, 1, t, i + k);
				break;
			default:
				as_wakeup(as);
				expect(as_wait(as, slots[k], &ret), 0, t, i + k);
				break;
			}
			expect(ret, want[k], t, i + k);
			if (si[k].num == SYS_pread64 && ret == BLK)
				for (int b = 0; b < BLK; b++)
					if (buf[k][b] != (char)(t + 1)) {
						atomic_fetch_add(&bad, 1);
						break;
					}
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned flags = backend_flags(argc, argv);
	char path[] = "/tmp/asyncsys-threads-XXXXXX";
	fd = mkstemp(path);
	unlink(path);
	for (int t = 0; t < NT; t++) {
		char blk[BLK];
		memset(blk, t + 1, BLK);
		CHECK_EQ(pwrite(fd, blk, BLK, (off_t)t * BLK), BLK);
		CHECK_EQ(pipe(pipes[t]), 0);
	}
	/* fewer slots than requests can be in flight, so -EAGAIN and slot reuse happen too */
	struct as_params p = {.nthreads = 2, .nreq = 48, .flags = flags};
	CHECK_EQ(as_init_params(&as, &p), 0);
	check_backend(as, flags);
	pthread_t th[NT], feed;
	for (int t = 0; t < NT; t++) /* the pipes must never fill and block the feeder */
		fcntl(pipes[t][1], F_SETFL, O_NONBLOCK);
	pthread_create(&feed, NULL, feeder, NULL);
	for (long t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, requester, (void *)t);
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	atomic_store(&stop, 1);
	pthread_join(feed, NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(as_exit(as, NULL, NULL), 0);
	return check_result(argc > 1 ? argv[1] : "uring");
}
