/*
 * threads.c — the CHFS client's threads never take the program's signals.
 *
 * libchfs and libfabric start threads (the transport's progress thread, providers' threads)
 * with the hook namespace's own libc. A process-directed signal (SIGCHLD, SIGALRM, SIGINT,
 * SIGTERM, kill(pid, ...)) is delivered to any thread that does not block it; landing on one of
 * these, the program's handler would run on a thread whose thread pointer belongs to the other
 * libc, where the program's libc finds its thread-local data (errno, malloc's per-thread cache,
 * stdio lock owners) at the wrong place. The hook library is the first object of its namespace,
 * so this pthread_create interposes for libchfs and libfabric (as fdreserve.c does for their
 * descriptors): every thread they start begins with all signals blocked, so process-directed
 * signals reach the program's own threads only, as in a process without the hook.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
	static _Atomic(create_fn) real;
	create_fn create = atomic_load(&real);
	if (!create) {
		create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
		if (!create)
			return EAGAIN;
		atomic_store(&real, create);
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits this mask */
	int rc = create(t, attr, start, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
