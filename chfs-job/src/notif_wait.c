/* notif_wait.c — the seccomp supervisor waits in SECCOMP_IOCTL_NOTIF_RECV itself.
 *
 * With SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6) the kernel hands a trap over
 * synchronously: the trapped thread wakes the supervisor on its own CPU and sleeps, and the
 * answer wakes it back on ours, so a trap costs two context switches on one CPU — but only for a
 * supervisor asleep in NOTIF_RECV, not in poll(), which also costs a system call per trap.
 *
 * The end of the job: from Linux 6.11 a blocked NOTIF_RECV returns (ENOENT) once no process holds
 * the filter; on 6.6–6.10 it sleeps on forever. So a watcher thread waits for that moment with a
 * poll() for POLLHUP alone — the kernel's wake-ups for each notification carry EPOLLIN and pass
 * it by, so it costs nothing per trap — and then interrupts the serving thread with a signal
 * until it has seen the end. Only then: a signal during a notification's handling could cut short
 * a call made for it (ADDFD waits interruptibly), and after the end there is none. */
#define _GNU_SOURCE
#include "notif_wait.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS /* Linux 6.6; Debian 12's headers are 6.1 */
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

struct cj_notif_wait {
	int listener;
	pthread_t server, watcher;
	atomic_bool over; /* the serving thread has seen the end */
};

static bool orphaned(int listener)
{
	struct pollfd pf = {listener, 0, 0};
	return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR));
}

static void interrupted(int sig) { (void)sig; /* only there to make NOTIF_RECV return EINTR */ }

static void *watch(void *arg)
{
	struct cj_notif_wait *w = arg;
	/* SIGURG (from cj_notif_wait_stop) is let in only during ppoll: one sent before it stays
	 * pending and ends it, where a handler run before a poll() would be lost */
	sigset_t during;
	pthread_sigmask(SIG_BLOCK, NULL, &during);
	sigdelset(&during, SIGURG);
	struct pollfd pf = {w->listener, 0, 0};
	for (;;) {
		if (atomic_load(&w->over))
			return NULL;
		int n = ppoll(&pf, 1, NULL, &during);
		if (n > 0)
			break; /* POLLHUP: no process holds the filter */
		if (n < 0 && errno != EINTR)
			return NULL; /* cannot watch: the kernel's own wake-up (6.11) is left */
	}
	while (!atomic_load(&w->over)) {
		pthread_kill(w->server, SIGURG);
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	return NULL;
}

struct cj_notif_wait *cj_notif_wait_start(int listener)
{
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) < 0)
		return NULL;
	struct cj_notif_wait *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->listener = listener;
	w->server = pthread_self();
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = interrupted; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	sigset_t all, old;
	sigfillset(&all);
	/* the watcher takes none of the process's signals: forwarded ones stay with this thread */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = sigaction(SIGURG, &sa, NULL) < 0 ? -1 : pthread_create(&w->watcher, NULL, watch, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		free(w);
		return NULL; /* the listener keeps its flag: harmless under poll() */
	}
	return w;
}

int cj_notif_wait_next(struct cj_notif_wait *w, struct seccomp_notif *req)
{
	for (;;) {
		memset(req, 0, sizeof(*req));
		if (ioctl(w->listener, SECCOMP_IOCTL_NOTIF_RECV, req) == 0)
			return 1;
		if (errno != EINTR && errno != ENOENT)
			return -errno;
		/* interrupted, or the call was withdrawn (its process signalled or killed), or the end */
		if (orphaned(w->listener))
			return 0;
	}
}

void cj_notif_wait_stop(struct cj_notif_wait *w)
{
	if (!w)
		return;
	atomic_store(&w->over, true);
	/* a watcher still waiting for POLLHUP (the serving thread failed): wake it */
	pthread_kill(w->watcher, SIGURG);
	pthread_join(w->watcher, NULL);
	free(w);
}
