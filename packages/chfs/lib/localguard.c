/*
 * localguard.c — see localguard.h and common/fastpath_page.h.
 */
#define _GNU_SOURCE
#include "localguard.h"

#include "fastpath_page.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct mapped {
	char dir[PATH_MAX];
	struct fastpath_page *page;
	struct mapped *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct mapped *maps; /* kept for the life of the process (a few per node) */

struct fastpath_page *lguard_get(const char *backing)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", backing);
	for (int up = 0; up < 2; up++) { /* DIR/data/<id> -> DIR */
		char *slash = strrchr(dir, '/');
		if (!slash || slash == dir)
			return NULL;
		*slash = '\0';
	}
	pthread_mutex_lock(&lock);
	struct mapped *m;
	for (m = maps; m && strcmp(m->dir, dir) != 0; m = m->next)
		;
	if (!m) {
		char path[PATH_MAX + 16];
		struct stat sb;
		void *p = MAP_FAILED;
		snprintf(path, sizeof path, "%s/%s", dir, FASTPATH_PAGE_NAME);
		int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		/* Only a page of our own: another user's file must not steer our writes. */
		if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
		    sb.st_size >= FASTPATH_PAGE_SIZE)
			p = mmap(NULL, FASTPATH_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (fd >= 0)
			close(fd);
		if (p != MAP_FAILED && (m = calloc(1, sizeof *m)) != NULL) {
			snprintf(m->dir, sizeof m->dir, "%s", dir);
			m->page = p;
			m->next = maps;
			maps = m;
		} else if (p != MAP_FAILED) {
			munmap(p, FASTPATH_PAGE_SIZE);
		}
	}
	pthread_mutex_unlock(&lock);
	return m && atomic_load(&m->page->magic) == FASTPATH_MAGIC ? m->page : NULL;
}

int lguard_enter(struct fastpath_page *g, uint64_t ring_epoch)
{
	atomic_fetch_add(&g->inflight, 1);
	if (atomic_load(&g->ring_epoch) == ring_epoch && !atomic_load(&g->window_open))
		return 0;
	atomic_fetch_sub(&g->inflight, 1);
	return -1;
}

void lguard_leave(struct fastpath_page *g) { atomic_fetch_sub(&g->inflight, 1); }
