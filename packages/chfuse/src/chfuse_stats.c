/*
 * chfuse_stats.c — request counters of the daemon, so tests and users can see which requests
 * actually reached it (with passthrough, a node-local file's reads and writes never do).
 *
 * Counters are lock-free atomics bumped by the operation handlers. They are written as
 * "name value" lines to the -o stats=FILE file at unmount and whenever the daemon gets SIGUSR1;
 * the file is written under a temporary name and renamed, so a reader never sees half of it.
 */
#include "chfuse.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static atomic_long counters[CHFUSE_NCOUNTERS];
static const char *const counter_names[CHFUSE_NCOUNTERS] = {
        [CHFUSE_READ] = "read_requests",
        [CHFUSE_WRITE] = "write_requests",
        [CHFUSE_OPEN] = "open_requests",
        [CHFUSE_PASSTHROUGH] = "passthrough_opens",
        [CHFUSE_LOCAL_NOPT] = "local_opens_without_passthrough",
        [CHFUSE_READ_BYTES] = "read_bytes",
        [CHFUSE_WRITE_BYTES] = "write_bytes",
};
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fuse_session *_Atomic session;

void chfuse_stats_set_session(struct fuse_session *se) { atomic_store(&session, se); }

void chfuse_count(enum chfuse_counter c, long n)
{
	atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed);
}

void chfuse_stats_dump(void)
{
	if (!chfuse_cfg.stats_path)
		return;
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", chfuse_cfg.stats_path) >= (int)sizeof tmp)
		return;
	pthread_mutex_lock(&dump_lock);
	FILE *f = fopen(tmp, "w");
	if (f) {
		fprintf(f, "passthrough_active %d\n", (int)atomic_load(&chfuse_passthrough_active));
		for (int i = 0; i < CHFUSE_NCOUNTERS; i++)
			fprintf(f, "%s %ld\n", counter_names[i], atomic_load(&counters[i]));
#ifdef FUSE_HAVE_URING_STATS
		/* Requests that came through FUSE over io_uring (-o io_uring), not /dev/fuse. */
		struct fuse_session *se = atomic_load(&session);
		fprintf(f, "uring_requests %llu\n",
		        se ? (unsigned long long)fuse_session_uring_requests(se) : 0ULL);
#endif
		if (fclose(f) == 0)
			rename(tmp, chfuse_cfg.stats_path);
	}
	pthread_mutex_unlock(&dump_lock);
}

static void *signal_thread(void *arg)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	for (;;) {
		int sig;
		if (sigwait(&set, &sig) == 0 && sig == SIGUSR1)
			chfuse_stats_dump();
	}
	return NULL;
}

int chfuse_stats_start_signal_thread(void)
{
	pthread_t t;
	int rc = pthread_create(&t, NULL, signal_thread, NULL);
	if (rc == 0)
		pthread_detach(t);
	return -rc;
}
