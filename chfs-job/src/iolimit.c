/* iolimit.c — the published bandwidth formula over counters shared by the whole job.
 *
 * Each transfer of a class (disk: regular files; net: sockets) holds the caller back by
 *     sleep = (sum of the sizes transferred in the last t seconds) / Limit - t
 * (nothing if negative). The history covers at most 1 s; t is the span it actually covers (now
 * - the oldest transfer still in it), not the full second: with a fixed t a job would burst
 * Limit x t bytes unthrottled after every idle second, and with transfers of size n spaced d
 * apart the fixed-t formula settles at d^2 + d*t = n*t/Limit — 9 % over the limit for 1 MB writes
 * at 10 MB/s — whereas with the covered span it settles at exactly d = n/Limit.
 *
 * The sum is that of the transfers before this one (its requested size is known before it runs:
 * seccomp holds the call's answer, ptrace the tracee at the call's entry), and the transfer is
 * recorded at the time it is let through (now + sleep): it starts once everything before it has
 * drained at Limit since the oldest. Recorded at its request instead, a held transfer made the
 * others' span too long, and P processes sharing the limit settled at (m+P-1)/m of it with m
 * transfers a second (+6 % for 2 processes, +15 % for 4, at 1 MB/s in 64 KiB writes); counted
 * after the call (ptrace's bytes moved, until 2026-11-26) each process's own transfer went
 * unheld, with the same excess (+5 % measured). A short transfer gives its unmoved bytes back
 * (cj_iolimit_refund: ptrace sees the result; seccomp does not, and counts the request).
 *
 * Idle time: measured from the oldest transfer of the second, t also spans any pause in it, so
 * a job that read a few library pages at its start-up and began its stream 0.2-0.6 s later could
 * burst Limit x the pause (bench: +3-5 % over 4 s at 100 MB/s; 2.5x over 1 s after a 0.6 s
 * pause). Every shorter window of the history is therefore checked too, less CATCH_UP: the sum
 * of the transfers from each bucket on may exceed Limit x its span by at most Limit x CATCH_UP,
 * so a pause (or a stall of the job: a held process scheduled late, the page cache's own
 * throttling) is made up for by at most CATCH_UP. With no pause every window gives the same
 * sleep, and the formula's own (the whole history) decides.
 * The history is kept in 1 ms buckets (a ring of 2,000: the past second and transfers being
 * held), each stamped with its millisecond so stale ones are ignored and with the exact time of
 * its earliest transfer, from which t is measured (a span measured from the millisecond was up
 * to 1 ms too long, each sleep that much too short).
 *
 * Sharing: one file per job, $XDG_RUNTIME_DIR (or /tmp)/chfs-job-UID-JOBID.iolimit, mode 0600,
 * published initialised (built under a private name, then link()ed: link fails if the name
 * exists, so exactly one process publishes); later ones accept it only if it is a regular file
 * owned by them with mode 0600 (another user must not throttle or unthrottle the job). A
 * process-shared robust mutex serialises updates; the publisher removes the name when it ends
 * (members already attached keep using it). */
#define _GNU_SOURCE
#include "iolimit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 1000   /* buckets of history: 1 s */
#define NBUCKETS 2000 /* the ring also holds transfers being held, up to WINDOW ahead */
#define BUCKET_NS 1000000LL
#define CATCH_UP 20000000LL /* ns: a stall or idle time made up for at most this much */
#define MAGIC 0x63686a33    /* "chj3": the ring of 2,000 with exact first times */

struct class_hist {
	int64_t stamp[NBUCKETS]; /* the bucket's millisecond */
	int64_t first[NBUCKETS]; /* the earliest transfer in it, ns: t is measured from the exact time */
	uint64_t bytes[NBUCKETS];
};

struct shared {
	uint32_t magic;
	pthread_mutex_t lock;
	struct class_hist cls[CJ_NCLASSES];
};

struct cj_iolimit {
	struct shared *sh;
	uint64_t limit[CJ_NCLASSES];
	char path[256];
	bool owner;
};

int64_t cj_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *job_id(char *buf, size_t len)
{
	const char *id = getenv("CHFS_JOB_ID");
	if (!id || !*id)
		id = getenv("SLURM_JOB_ID");
	if (!id || !*id) {
		/* a fresh id: a stale counter file of an earlier job must never be joined */
		snprintf(buf, len, "p%d-%lld", (int)getpid(), (long long)(cj_now_ns() / 1000));
		id = buf;
	}
	setenv("CHFS_JOB_ID", id, 1);
	return id;
}

static int init_shared(struct shared *sh)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int rc = pthread_mutex_init(&sh->lock, &a);
	pthread_mutexattr_destroy(&a);
	sh->magic = MAGIC;
	return -rc;
}

struct cj_iolimit *cj_iolimit_open(const struct cj_policy *p, char *err, size_t errlen)
{
	struct cj_iolimit *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "io_limit: out of memory");
		return NULL;
	}
	memcpy(l->limit, p->limit, sizeof(l->limit));
	char idbuf[48];
	const char *id = job_id(idbuf, sizeof(idbuf));
	const char *dir = getenv("XDG_RUNTIME_DIR");
	if (!dir || !*dir)
		dir = "/tmp";
	snprintf(l->path, sizeof(l->path), "%s/chfs-job-%d-%s.iolimit", dir, (int)getuid(), id);
	if (strchr(id, '/')) {
		snprintf(err, errlen, "io_limit: job id '%s' contains '/'", id);
		goto fail;
	}
	/* Publish a fully initialised file atomically: build it under a private name, then link()
	 * it to the shared name; if another process won the race, use theirs. */
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", l->path, (int)getpid());
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail_errno;
	if (ftruncate(fd, sizeof(struct shared)) < 0 ||
	    (l->sh = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
	            MAP_FAILED) {
		l->sh = NULL;
		close(fd);
		unlink(tmp);
		goto fail_errno;
	}
	close(fd);
	init_shared(l->sh);
	if (link(tmp, l->path) == 0) {
		l->owner = true;
		unlink(tmp);
		return l;
	}
	int e = errno;
	unlink(tmp);
	munmap(l->sh, sizeof(struct shared));
	l->sh = NULL;
	if (e != EEXIST) {
		errno = e;
		goto fail_errno;
	}
	fd = open(l->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		goto fail_errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 0777) != 0600 ||
	    st.st_size != (off_t)sizeof(struct shared)) {
		close(fd);
		snprintf(err, errlen, "io_limit: %s is not this user's 0600 counter file; refusing it",
		         l->path);
		goto fail;
	}
	l->sh = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (l->sh == MAP_FAILED) {
		l->sh = NULL;
		goto fail_errno;
	}
	if (l->sh->magic != MAGIC) {
		snprintf(err, errlen, "io_limit: %s is not a chfs-job counter file", l->path);
		goto fail;
	}
	return l;
fail_errno:
	snprintf(err, errlen, "io_limit: %s: %s", l->path, strerror(errno));
fail:
	if (l->sh)
		munmap(l->sh, sizeof(struct shared));
	free(l);
	return NULL;
}

bool cj_iolimit_limited(const struct cj_iolimit *l, int cls) { return l && cls >= 0 && l->limit[cls] > 0; }

int64_t cj_iolimit_account(struct cj_iolimit *l, int cls, uint64_t bytes, int64_t *at)
{
	return cj_iolimit_account_at(l, cls, bytes, cj_now_ns(), at);
}

static void lock(struct cj_iolimit *l)
{
	if (pthread_mutex_lock(&l->sh->lock) == EOWNERDEAD)
		pthread_mutex_consistent(
		        &l->sh->lock); /* a member died holding it: counters are still sane */
}

int64_t cj_iolimit_account_at(struct cj_iolimit *l, int cls, uint64_t bytes, int64_t now, int64_t *at)
{
	if (!cj_iolimit_limited(l, cls) || bytes == 0)
		return 0;
	struct class_hist *h = &l->sh->cls[cls];
	int64_t slot = now / BUCKET_NS;
	lock(l);
	/* newest bucket first (stamps may lie ahead of now: transfers being held): each bucket's sum
	 * and those after it over the time since its earliest transfer. The oldest window is the
	 * formula's own; every shorter one, less CATCH_UP, bounds the bursts it would allow. */
	double per_byte = 1e9 / (double)l->limit[cls];
	uint64_t sum = 0;
	int64_t sleep = 0, need = 0;
	for (int64_t k = slot + WINDOW - 1; k > slot - WINDOW && k >= 0; k--) {
		int i = (int)(k % NBUCKETS);
		if (h->stamp[i] != k || !h->bytes[i])
			continue;
		sum += h->bytes[i];
		need = (int64_t)((double)sum * per_byte) - (now - h->first[i]);
		if (need - CATCH_UP > sleep)
			sleep = need - CATCH_UP;
	}
	if (need > sleep)
		sleep = need; /* the whole history's window, the last computed */
	/* recorded when it goes through; less than WINDOW ahead, so it never lands on a bucket of
	 * the past second */
	int64_t at_ns = now + sleep;
	if (at_ns / BUCKET_NS > slot + WINDOW - 1)
		at_ns = (slot + WINDOW - 1) * BUCKET_NS;
	int64_t ms = at_ns / BUCKET_NS;
	int b = (int)(ms % NBUCKETS);
	if (h->stamp[b] != ms) {
		h->stamp[b] = ms;
		h->first[b] = at_ns;
		h->bytes[b] = 0;
	}
	if (at_ns < h->first[b])
		h->first[b] = at_ns;
	h->bytes[b] += bytes;
	pthread_mutex_unlock(&l->sh->lock);
	if (at)
		*at = at_ns;
	return sleep;
}

void cj_iolimit_refund(struct cj_iolimit *l, int cls, uint64_t bytes, int64_t at)
{
	if (!cj_iolimit_limited(l, cls) || bytes == 0)
		return;
	struct class_hist *h = &l->sh->cls[cls];
	int64_t ms = at / BUCKET_NS;
	int b = (int)(ms % NBUCKETS);
	lock(l);
	if (h->stamp[b] == ms)
		h->bytes[b] -= bytes < h->bytes[b] ? bytes : h->bytes[b];
	pthread_mutex_unlock(&l->sh->lock);
}

void cj_iolimit_close(struct cj_iolimit *l)
{
	if (!l)
		return;
	if (l->owner)
		unlink(l->path);
	munmap(l->sh, sizeof(struct shared));
	free(l);
}
