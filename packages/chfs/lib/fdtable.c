/*
 * fdtable.c — library-private descriptors (small integers, lowest free first, as upstream).
 *
 * The table maps an int to a refcounted struct chfs_file; every operation holds a reference
 * while it works, so a concurrent chfs_close() never frees a file under another thread. Writes
 * mark a file dirty; fd_sync_sizes() reports the highest written offset of dirty files to the
 * owners of their paths (see the consistency model in client.h).
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chfs_file **fds;
static int nfds;

int fd_alloc(struct chfs_file *f)
{
	pthread_mutex_lock(&fd_lock);
	int i;
	for (i = 0; i < nfds && fds[i]; i++)
		;
	if (i == nfds) {
		int nn = nfds ? nfds * 2 : 100;
		struct chfs_file **t = realloc(fds, (size_t)nn * sizeof *t);
		if (!t) {
			pthread_mutex_unlock(&fd_lock);
			return -ENOMEM;
		}
		memset(t + nfds, 0, (size_t)(nn - nfds) * sizeof *t);
		fds = t;
		nfds = nn;
	}
	atomic_store(&f->refs, 1);
	fds[i] = f;
	pthread_mutex_unlock(&fd_lock);
	return i;
}

struct chfs_file *fd_get(int fd)
{
	struct chfs_file *f = NULL;
	pthread_mutex_lock(&fd_lock);
	if (fd >= 0 && fd < nfds && fds[fd]) {
		f = fds[fd];
		atomic_fetch_add(&f->refs, 1);
	}
	pthread_mutex_unlock(&fd_lock);
	if (!f)
		errno = EBADF;
	return f;
}

void fd_put(struct chfs_file *f)
{
	if (f && atomic_fetch_sub(&f->refs, 1) == 1) {
		for (unsigned i = 0; f->direct && i < f->ndirect; i++)
			if (f->direct[i].fd >= 0)
				close(f->direct[i].fd);
		free(f->direct);
		free(f->wbuf);
		pthread_mutex_destroy(&f->wlock);
		pthread_mutex_destroy(&f->lock);
		free(f);
	}
}

int fd_release(int fd, struct chfs_file **out)
{
	pthread_mutex_lock(&fd_lock);
	if (fd < 0 || fd >= nfds || !fds[fd]) {
		pthread_mutex_unlock(&fd_lock);
		return -EBADF;
	}
	*out = fds[fd];
	fds[fd] = NULL;
	pthread_mutex_unlock(&fd_lock);
	return 0;
}

/* Snapshot the files matching a predicate (with references held). */
static int collect(uint64_t fileid, int dirty_only, struct chfs_file ***out)
{
	pthread_mutex_lock(&fd_lock);
	int n = 0;
	struct chfs_file **v = malloc((size_t)(nfds ? nfds : 1) * sizeof *v);
	for (int i = 0; v && i < nfds; i++) {
		struct chfs_file *f = fds[i];
		if (!f || (fileid && f->md.fileid != fileid))
			continue;
		if (dirty_only) { /* dirty changes under f->lock (taken after fd_lock, never before) */
			pthread_mutex_lock(&f->lock);
			int dirty = f->dirty;
			pthread_mutex_unlock(&f->lock);
			if (!dirty)
				continue;
		}
		atomic_fetch_add(&f->refs, 1);
		v[n++] = f;
	}
	pthread_mutex_unlock(&fd_lock);
	*out = v;
	return v ? n : -ENOMEM;
}

int fd_sync_sizes(uint64_t fileid)
{
	if (atomic_load(&chfs_client.dirty_fds) <= 0)
		return 0;
	struct chfs_file **v;
	int n = collect(fileid, 1, &v), rc = 0;
	for (int i = 0; i < n; i++) {
		int r = ns_report_size(v[i]);
		if (r && !rc)
			rc = r;
		fd_put(v[i]);
	}
	free(v);
	return n < 0 ? n : rc;
}

void fd_foreach_fileid(uint64_t fileid, void (*fn)(struct chfs_file *, void *), void *arg)
{
	struct chfs_file **v;
	int n = collect(fileid, 0, &v);
	for (int i = 0; i < n; i++) {
		fn(v[i], arg);
		fd_put(v[i]);
	}
	free(v);
}
