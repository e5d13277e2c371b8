/*
 * fastpath.c — the server's side of the fast-path page (common/fastpath_page.h): created (or
 * reused, so clients that mapped it keep the same page across a restart) at start-up, and
 * updated with the ring epoch and the rebalance window.
 */
#define _GNU_SOURCE
#include "chfsd.h"

#include "fastpath_page.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_LIMIT_MS 10000

static struct fastpath_page *page;

int fastpath_open(struct chfsd *d)
{
	int fd =
	        openat(st_rootfd(d->st), FASTPATH_PAGE_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	void *p = MAP_FAILED;
	if (ftruncate(fd, FASTPATH_PAGE_SIZE) == 0)
		p = mmap(NULL, FASTPATH_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int rc = p == MAP_FAILED ? -errno : 0;
	close(fd);
	if (rc)
		return rc;
	page = p;
	atomic_store(&page->inflight, 0); /* clients killed mid-access left counts behind */
	atomic_store(&page->window_open, 1);
	atomic_store(&page->magic, FASTPATH_MAGIC);
	return 0;
}

void fastpath_publish(uint64_t ring_epoch, int window_open)
{
	if (!page)
		return;
	atomic_store(&page->window_open, (uint32_t)window_open);
	atomic_store(&page->ring_epoch, ring_epoch);
	for (int ms = 0; atomic_load(&page->inflight) != 0; ms++) {
		if (ms == DRAIN_LIMIT_MS) {
			log_warn("fast path: %llu direct accesses did not end within %d s (a client "
			         "killed in the middle?); going on",
			         (unsigned long long)atomic_load(&page->inflight), DRAIN_LIMIT_MS / 1000);
			atomic_store(&page->inflight, 0);
			break;
		}
		struct timespec t = {0, 1000000};
		nanosleep(&t, NULL);
	}
}
