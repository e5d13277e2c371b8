/*
 * backing_paths.c — the backing-file paths this process was told by its node's servers
 * (WOP_LOCAL_PATH), remembered by server and file id.
 *
 * A hooked program opens the same local-placement file again and again (a Montage tool opened
 * each of its five files four to six times: 24 opens), and every open of such a file asked the
 * server where its backing file is: one request per open on top of the open's lookup. The
 * answer for a file id never changes while the file exists (a local-placement file never
 * moves; ids are not reused) and an open's lookup has just found that id, so it is kept here.
 * Only for files without the persistent backend: for those (MD_PATHED) the request also
 * registers the file for the flush, so it is always sent. A path kept for a file removed since
 * names nothing (the open of it fails and the caller goes through the server).
 */
#include "client.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BACKING_PATHS 64 /* entries, replaced round-robin */

static struct {
	pthread_mutex_t lock;
	unsigned next;
	struct {
		uint64_t fileid;
		char *addr, *path;
	} e[BACKING_PATHS];
} bp = {.lock = PTHREAD_MUTEX_INITIALIZER};

int backing_path_get(const char *addr, uint64_t fileid, char *buf, size_t size)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&bp.lock);
	for (unsigned i = 0; i < BACKING_PATHS && rc == -ENOENT; i++)
		if (bp.e[i].path && bp.e[i].fileid == fileid && strcmp(bp.e[i].addr, addr) == 0) {
			size_t n = strlen(bp.e[i].path);
			rc = n < size ? 0 : -ERANGE;
			if (rc == 0)
				memcpy(buf, bp.e[i].path, n + 1);
		}
	pthread_mutex_unlock(&bp.lock);
	return rc;
}

void backing_path_put(const char *addr, uint64_t fileid, const char *path)
{
	char *a = strdup(addr), *p = strdup(path);
	if (!a || !p) {
		free(a);
		free(p);
		return;
	}
	pthread_mutex_lock(&bp.lock);
	unsigned i = bp.next++ % BACKING_PATHS;
	free(bp.e[i].addr);
	free(bp.e[i].path);
	bp.e[i].fileid = fileid;
	bp.e[i].addr = a;
	bp.e[i].path = p;
	pthread_mutex_unlock(&bp.lock);
}
