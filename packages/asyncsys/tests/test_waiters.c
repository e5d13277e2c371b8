/*
 * test_waiters.c — many threads, each placing one request at a time and waiting for it
 * (as_submit + as_wait, as chfsd's handler threads do): half of them fsyncs (io_uring sends
 * those to its workers, they stay in flight a while), half page-cache preads (answered
 * within the submit). A waiter whose request is in flight must find the ring, or be woken by
 * whoever holds it; one that sleeps while nobody will wake it stops making progress, which
 * the main thread reports after STALL_S seconds without a completion in some thread.
 * (The lost wake-up this was written for: a submitter counted its ring requests only after
 * releasing the queue lock, so a flush that took them first made the count of ring requests
 * read 0 for a moment, and a waiter that looked then slept on the event counter with its own
 * request in flight and nobody on the ring — chfsd's journal write hung; CI 20a.)
 * usage: test_waiters uring|threads [seconds]
 */
#define _GNU_SOURCE
#include "check.h"
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define NT 8
#define STALL_S 5

static struct as *as;
static int fd;
static _Atomic long done_by[NT];
static _Atomic int stop, ended[NT];
static pthread_rwlock_t ns_lock = PTHREAD_RWLOCK_INITIALIZER;

/* Odd threads look a name up (the lock shared) before each pread; even ones hold the lock
 * exclusively while their fsync runs (chfsd: lookups, and journal appends under the namespace
 * lock). A writer that is never woken holds the lock: the others stop too. */
static void *worker(void *arg)
{
	long t = (long)arg;
	const int reader = t % 2;
	char buf[16];
	const long num = reader ? SYS_pread64 : SYS_fsync, want = reader ? (long)sizeof buf : 0;
	const long a[6] = {fd, reader ? (long)buf : 0, reader ? (long)sizeof buf : 0};
	while (!atomic_load(&stop)) {
		if (reader) {
			pthread_rwlock_rdlock(&ns_lock);
			pthread_rwlock_unlock(&ns_lock);
		} else {
			pthread_rwlock_wrlock(&ns_lock);
		}
		int slot = as_submit(as, num, a);
		long ret = -1;
		if (slot < 0 || as_wait(as, (unsigned)slot, &ret) != 0 || ret != want) {
			fprintf(stderr, "test_waiters: thread %ld: slot %d, result %ld\n", t, slot, ret);
			_exit(1); /* (an even thread holds the lock: the others could not end) */
		}
		if (!reader)
			pthread_rwlock_unlock(&ns_lock);
		atomic_fetch_add(&done_by[t], 1);
	}
	atomic_store(&ended[t], 1);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned flags = backend_flags(argc, argv);
	int seconds = argc > 2 ? atoi(argv[2]) : 4;
	char path[] = "/tmp/asyncsys-waiters-XXXXXX", blk[16] = "0123456789abcdef";
	fd = mkstemp(path);
	unlink(path);
	CHECK_EQ(pwrite(fd, blk, sizeof(blk), 0), sizeof(blk));
	struct as_params p = {.nthreads = 2, .nreq = 64, .flags = flags};
	CHECK_EQ(as_init_params(&as, &p), 0);
	pthread_t th[NT];
	for (long t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	long last[NT] = {0}, total = 0;
	time_t begin = time(NULL), moved[NT];
	for (int t = 0; t < NT; t++)
		moved[t] = begin;
	/* Run for the time asked, then ask the threads to stop: each must keep moving (or end)
	 * throughout. */
	int stalled = -1, nended = 0;
	for (time_t now = begin; stalled < 0 && nended < NT; now = time(NULL)) {
		if (now - begin >= seconds)
			atomic_store(&stop, 1);
		struct timespec ms = {0, 100 * 1000 * 1000};
		nanosleep(&ms, NULL);
		nended = 0;
		for (int t = 0; t < NT; t++) {
			long d = atomic_load(&done_by[t]);
			if (atomic_load(&ended[t]))
				nended++;
			else if (d != last[t])
				moved[t] = now, last[t] = d;
			else if (now - moved[t] >= STALL_S)
				stalled = t;
		}
	}
	if (stalled >= 0) {
		fprintf(stderr,
		        "test_waiters: thread %d (%s) made no progress for %d s after %ld requests: "
		        "a waiter was not woken\n",
		        stalled, stalled % 2 ? "preads" : "fsyncs under the lock", STALL_S, last[stalled]);
		_exit(1); /* it never returns: no join */
	}
	for (int t = 0; t < NT; t++) {
		pthread_join(th[t], NULL);
		total += atomic_load(&done_by[t]);
	}
	CHECK(total > 0);
	printf("test_waiters: %ld requests in %d s by %d threads\n", total, seconds, NT);
	CHECK_EQ(as_exit(as, NULL, NULL), 0);
	close(fd);
	return check_result("test_waiters");
}
