/*
 * flush_local.c — write-back of a local-placement file (all chunks on its home server).
 *
 * Clients of the home's node read and write such a file directly in its backing file (the
 * local fast path, FUSE passthrough, the hook), so no WRITE request tells the server which
 * chunks changed. flush.c therefore keeps a local file's entry for as long as the file exists,
 * calls it dirty while the backing file's size or mtime differ from those of its last flush,
 * and flushes it here by copying the whole backing file: bytes, size (a cut file is cut on the
 * backend too) and mtime (the backing file's mtime is the file's, server/handlers.c, unless an
 * explicit utimens since its last write reached the backend first: flush_meta.c sets that
 * one, and a data flush coming after it keeps it).
 *
 * The state is taken before the copy, so a write during the copy leaves a newer mtime and the
 * file is copied again. The times of an explicit utimens are told from the backend file's own:
 * its ctime is newer than the backing file's mtime, and its mtime is not the one the previous
 * copy set. (The ctime alone said "explicit" also after a copy that set its times after a write
 * landed in it: the next copy kept the older mtime, and no later flush changed it.) A write within the file system's timestamp granularity of the state
 * may keep the same mtime: a state younger than SETTLE_NS is reported unsettled and flush.c
 * looks at the file once more.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "chfsd.h"
#include "io_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PIECE (1u << 20)
#define SETTLE_NS 50000000ll

int bflocal_copy(struct chfsd *d, uint64_t fileid, const char *path, uint64_t *size, int64_t *mtime_ns,
                 int *settled, int64_t *set_ns)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int rc = st_data_stat(d->st, fileid, size, mtime_ns);
	if (rc)
		return rc;
	int64_t age = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - *mtime_ns;
	*settled = age >= SETTLE_NS || age < 0; /* a future mtime (set explicitly): a write changes it */
	int dfd = st_data_open(d->st, fileid, 0);
	if (dfd < 0 && dfd != -ENOENT)
		return dfd;
	/* The backend file's times changed after the backing file's last write, to others than the
	 * previous copy set: the times of an explicit utimens, which flush_meta.c applied after
	 * that write — they stay. */
	struct stat was;
	int64_t keep = 0;
	if (backend_lstat(d->bk, path, &was) == 0 && S_ISREG(was.st_mode) &&
	    (int64_t)was.st_ctim.tv_sec * 1000000000 + was.st_ctim.tv_nsec > *mtime_ns)
		keep = (int64_t)was.st_mtim.tv_sec * 1000000000 + was.st_mtim.tv_nsec;
	if (keep && keep == *set_ns)
		keep = 0; /* our own: the previous copy's, set after a write that landed in it */
	int64_t set = keep ? keep : *mtime_ns;
	int bfd = backend_open_write(d->bk, path);
	uint8_t *buf = malloc(PIECE);
	if (bfd < 0)
		rc = bfd;
	else if (!buf)
		rc = -ENOMEM;
	/* Holes are copied as zeros: the backend file may hold older bytes there. */
	if (rc == 0 && dfd >= 0 && *size)
		rc = ioe_copy_range(dfd, bfd, buf, PIECE, 0, *size, NULL);
	if (rc == 0 && ftruncate(bfd, (off_t)*size) < 0)
		rc = -errno;
	const struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
	                               {.tv_sec = set / 1000000000, .tv_nsec = set % 1000000000}};
	if (rc == 0 && set && futimens(bfd, ts) < 0)
		rc = -errno;
	rc = ioe_copy_end(dfd, bfd, buf, rc);
	if (rc == 0)
		*set_ns = set;
	return rc;
}
