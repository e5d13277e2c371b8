/*
 * relink_gap.c — a server that was stopped asks for the backend names it missed before it
 * flushes again.
 *
 * A member the others cannot reach when a rename reaches the backend is owed the file's new
 * name (relink_owed.c). One that was killed asks for its debts when it starts again
 * (brelink_pull, before its flush threads begin). One that was only stopped (SIGSTOP, a paused
 * VM or container, a machine that hung for a while) never starts again: it resumes where it
 * was, with its dirty entries under the file's old name, and its flush threads and the next
 * sync's data phase flushed them there — a stale file under the old name on the backend, bytes
 * missing from the new one — before the debtor's delivery (at that sync, concurrently) reached it.
 *
 * So a thread here notes the time every TICK_MS. Its clock (CLOCK_MONOTONIC) runs on while the
 * process is stopped, so after a resume the last note is old: more than GAP_S ago. Nothing is
 * flushed while the last note is that old (brelink_await, before every flush): the thread, on
 * waking, asks every other member for its debts (brelink_pull, which sends them before
 * answering), and only then notes the time again and lets the flushes go. A debt needs the
 * member unreachable for longer than GAP_S (a call to it failing: the failure detector takes
 * about 2 s to find a hung member down, the RPC timeout is longer), so a stop too short to be
 * seen here cannot have made one. A thread starved for GAP_S on a loaded machine costs one such
 * pull, nothing else.
 *
 * Not covered: a member cut off by the network keeps running (no gap) and may flush under an
 * old name until the debtor's heartbeat finds it up again and delivers (heartbeat.c); a flush
 * that opened the backend file before the stop writes to that file wherever the rename moved it,
 * which is right.
 */
#define _GNU_SOURCE
#include "relink.h"

#include "chfsd.h"
#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#define TICK_MS 100
#define GAP_S 1.0

static struct {
	pthread_mutex_t lock;
	pthread_cond_t fresh;
	double tick; /* monotonic seconds of the last note (0: not started: nothing held) */
	int running, pulling;
	pthread_t thread;
} gw = {.lock = PTHREAD_MUTEX_INITIALIZER, .fresh = PTHREAD_COND_INITIALIZER};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The last note is recent and no pull is running (lock held). */
static int fresh(void) { return gw.tick == 0 || (!gw.pulling && now_s() - gw.tick <= GAP_S); }

static void *watch(void *arg)
{
	struct chfsd *d = arg;
	for (int last = 0; !last;) { /* (once more after the stop: a resume just before it counts) */
		struct timespec ts = {0, TICK_MS * 1000000L};
		nanosleep(&ts, NULL);
		last = atomic_load(&d->stopping);
		pthread_mutex_lock(&gw.lock);
		double gap = now_s() - gw.tick;
		gw.pulling = gap > GAP_S;
		pthread_mutex_unlock(&gw.lock);
		if (gap > GAP_S) {
			log_notice(
			        "backend names: this server was stopped or stalled for %.1f s; asking the other "
			        "members for renames it may have missed before flushing again",
			        gap);
			brelink_pull(d);
		}
		pthread_mutex_lock(&gw.lock);
		gw.tick = now_s();
		gw.pulling = 0;
		pthread_cond_broadcast(&gw.fresh);
		pthread_mutex_unlock(&gw.lock);
	}
	return NULL;
}

int brelink_watch_start(struct chfsd *d)
{
	if (!d->bk)
		return 0;
	gw.tick = now_s();
	sigset_t all, old; /* (SIGTERM, SIGUSR1, ...: the main thread's, by sigwait) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&gw.thread, NULL, watch, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		gw.tick = 0;
		return -rc;
	}
	gw.running = 1;
	return 0;
}

void brelink_watch_stop(void)
{
	if (!gw.running)
		return;
	pthread_join(gw.thread, NULL); /* (d->stopping is set: within a tick or a pull) */
	gw.running = 0;
	pthread_mutex_lock(&gw.lock);
	gw.tick = 0; /* nothing held any more: shutdown flushes at once */
	pthread_cond_broadcast(&gw.fresh);
	pthread_mutex_unlock(&gw.lock);
}

int brelink_fresh(void)
{
	pthread_mutex_lock(&gw.lock);
	int f = fresh();
	pthread_mutex_unlock(&gw.lock);
	return f;
}

void brelink_await(void)
{
	pthread_mutex_lock(&gw.lock);
	while (!fresh())
		pthread_cond_wait(&gw.fresh, &gw.lock);
	pthread_mutex_unlock(&gw.lock);
}
