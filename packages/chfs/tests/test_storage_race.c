/*
 * test_storage_race.c — chfsd's metadata records against concurrent readers: one thread keeps
 * rewriting the records of a file and of a directory (chmod + utimens with values derived from
 * one counter), while two threads keep looking them up without the path lock, as chfsd's stat
 * handler does, for 4 s. Every lookup must succeed and see one whole record: mode, atime and
 * mtime from the same update. With records rewritten in place (pwrite over the old bytes) a
 * reader now and then saw a mode from one update and times from another.
 */
#define _GNU_SOURCE
#include "check.h"
#include "storage.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RUN_NS 4000000000LL

static struct storage *st;
static uint64_t file_id;
static atomic_int stop;
static atomic_long lookups, bad;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Update k stamps mode, atime and mtime with values derived from k. */
static int stamp(const char *path, uint64_t id, int64_t k)
{
	struct chfs_md out;
	struct wire_setattr set = {.which = WIRE_SET_MODE | WIRE_SET_ATIME | WIRE_SET_MTIME,
	                           .mode = (uint32_t)(k & 0777),
	                           .atime_ns = k * 3,
	                           .mtime_ns = k * 3 + 1};
	return st_setattr(st, path, id, &set, &out);
}

static void *writer(void *arg)
{
	for (int64_t k = 1; !atomic_load(&stop); k++) {
		int rc = stamp("f", file_id, k) | stamp("d", 0, k);
		if (rc) {
			fprintf(stderr, "setattr: %s\n", strerror(-rc));
			atomic_fetch_add(&bad, 1);
		}
	}
	return NULL;
}

static void *reader(void *arg)
{
	while (!atomic_load(&stop)) {
		for (int i = 0; i < 2; i++) {
			struct chfs_md md;
			int rc = st_lookup(st, i ? "d" : "f", &md);
			int64_t k = md.atime_ns / 3;
			if (rc == 0 && k == 0)
				continue; /* not stamped yet */
			if (rc || md.atime_ns != k * 3 || md.mtime_ns != k * 3 + 1 ||
			    (md.mode & 0777) != (uint32_t)(k & 0777) ||
			    (i == 0 && (md.fileid != file_id || !S_ISREG(md.mode))) ||
			    (i == 1 && !S_ISDIR(md.mode))) {
				if (atomic_fetch_add(&bad, 1) < 5)
					fprintf(stderr, "%s: rc %d mode %o atime %lld mtime %lld\n",
					        i ? "d" : "f", rc, md.mode, (long long)md.atime_ns,
					        (long long)md.mtime_ns);
			}
			atomic_fetch_add(&lookups, 1);
		}
	}
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/chfs-test-storage-race-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	CHECK_EQ(st_open(dir, &st), 0);
	struct chfs_md in, out;
	int existed;
	memset(&in, 0, sizeof in);
	in.mode = S_IFREG | 0644;
	in.chunk_size = 65536;
	CHECK_EQ(st_create(st, "f", &in, 1, &out, &existed), 0);
	file_id = out.fileid;
	in.mode = S_IFDIR | 0755;
	CHECK_EQ(st_mkdir(st, "d", &in), 0);

	pthread_t w, r[2];
	pthread_create(&w, NULL, writer, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	int64_t end = now_ns() + RUN_NS;
	while (now_ns() < end && atomic_load(&bad) == 0)
		usleep(10000);
	atomic_store(&stop, 1);
	pthread_join(w, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	printf("%ld lookups during updates, %ld bad\n", atomic_load(&lookups), atomic_load(&bad));
	CHECK(atomic_load(&lookups) > 1000);
	CHECK_EQ(atomic_load(&bad), 0);

	/* No temporary file is left beside the records. */
	char cmd[256];
	snprintf(cmd, sizeof cmd, "test -z \"$(find %s -name '.*tmp*')\"", dir);
	CHECK_EQ(system(cmd), 0);
	st_close(st);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	return check_result("test_storage_race");
}
