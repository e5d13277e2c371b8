/*
 * test_compete.c — four threads race to collect the same requests: one reaps in batches
 * (as_wakeup_wait + as_reap), one reaps three at a time, one polls every slot (as_poll), one
 * waits on every slot (as_wait, which answers -EINVAL for a request another thread took). Each
 * round the main thread places 256 requests (ring preads of a length that names the request,
 * execution-thread lseeks to a position that names it), the collectors run until all 256 are
 * collected, then meet at a barrier. Every request must be collected exactly once, with its own
 * result: a result taken twice or wrong ends the test at once, a lost one shows as the ctest
 * timeout. Run under
 * TSan by ci/test --tsan.
 * usage: test_compete uring|threads
 */
#define _GNU_SOURCE
#include "check.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define ROUNDS 200
#define N 256
#define NC 4

static struct as *as;
static int fd;
static char buf[N][64];
static long want[4096];       /* by slot, this round */
static _Atomic int got[4096]; /* collections of the slot's request, this round */
static unsigned slots[N];
static _Atomic int collected, bad;
static pthread_barrier_t start_b, end_b;

static void took(unsigned slot, long ret)
{
	if (slot >= 4096 || atomic_fetch_add(&got[slot], 1) != 0 || ret != want[slot]) {
		fprintf(stderr, "test_compete: slot %u: result %ld (want %ld), collected %d times\n", slot,
		        ret, slot < 4096 ? want[slot] : -1, slot < 4096 ? atomic_load(&got[slot]) : -1);
		_exit(1); /* (the area's free list is wrong from here on: the next rounds could hang) */
	}
	atomic_fetch_add(&collected, 1);
}

static void *collector(void *arg)
{
	int kind = (int)(long)arg;
	struct as_completion c[N];
	for (int round = 0; round < ROUNDS; round++) {
		pthread_barrier_wait(&start_b);
		while (atomic_load(&collected) < N) {
			long ret;
			switch (kind) {
			case 0:
			case 1: {
				as_wakeup_wait(as, 1);
				int k = as_reap(as, c, kind == 0 ? N : 3);
				for (int i = 0; i < k; i++)
					took(c[i].slot, (long)c[i].ret);
				break;
			}
			case 2:
				for (int i = 0; i < N; i++)
					if (as_poll(as, slots[i], &ret) == 1)
						took(slots[i], ret);
				break;
			default:
				for (int i = 0; i < N && atomic_load(&collected) < N; i++) {
					int r = as_wait(as, slots[i], &ret);
					if (r == 0)
						took(slots[i], ret);
					else if (r != -EINVAL)
						atomic_fetch_add(&bad, 1);
				}
			}
		}
		pthread_barrier_wait(&end_b);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned flags = backend_flags(argc, argv);
	char path[] = "/tmp/asyncsys-compete-XXXXXX", blk[64];
	fd = mkstemp(path);
	unlink(path);
	memset(blk, 'x', sizeof(blk));
	CHECK_EQ(pwrite(fd, blk, sizeof(blk), 0), sizeof(blk));
	struct as_params p = {.nthreads = 2, .nreq = N, .flags = flags};
	CHECK_EQ(as_init_params(&as, &p), 0);
	pthread_barrier_init(&start_b, NULL, NC + 1);
	pthread_barrier_init(&end_b, NULL, NC + 1);
	pthread_t th[NC];
	for (long t = 0; t < NC; t++)
		pthread_create(&th[t], NULL, collector, (void *)t);
	static struct syscall_info si[N];
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < N; i++)
			si[i] = i % 2 ? (struct syscall_info){.num = SYS_lseek,
			                                      .arg = {fd, i * 7 + round, SEEK_SET}}
			              : (struct syscall_info){.num = SYS_pread64,
			                                      .arg = {fd, (long)buf[i], i % 64 + 1, 0}};
		atomic_store(&collected, 0);
		CHECK_EQ(as_submitv(as, si, N, slots), N);
		for (int i = 0; i < N; i++) {
			want[slots[i]] = i % 2 ? i * 7 + round : i % 64 + 1;
			atomic_store(&got[slots[i]], 0);
		}
		pthread_barrier_wait(&start_b);
		pthread_barrier_wait(&end_b);
		CHECK_EQ(atomic_load(&collected), N);
		for (int i = 0; i < N; i++)
			CHECK_EQ(atomic_load(&got[slots[i]]), 1);
	}
	for (int t = 0; t < NC; t++)
		pthread_join(th[t], NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(as_exit(as, NULL, NULL), 0);
	close(fd);
	return check_result("test_compete");
}
