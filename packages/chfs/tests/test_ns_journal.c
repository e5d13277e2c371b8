/*
 * test_ns_journal.c — crash consistency of the namespace journal and snapshot, through
 * ns_store (the real composition of index + journal):
 *   - a journal cut at every byte offset replays to exactly the state after the last whole
 *     frame (never a half-applied change), and the server appends and reopens fine after it;
 *   - the same with the tail after the cut overwritten by garbage instead of removed;
 *   - compaction after every change gives the same state on reopen; a journal of the previous
 *     generation left beside a newer snapshot (a crash between the snapshot's rename and the
 *     journal's truncation) is not replayed again; a journal newer than the snapshot is -EIO;
 *   - a stored snapshot cut short is -EIO rather than a partial namespace.
 */
#define _GNU_SOURCE
#include "check.h"
#include "ns_journal.h"
#include "ns_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXOPS 64

struct dump {
	char *s;
	size_t len, cap;
};

static int dump_one(void *arg, const char *path, const struct chfs_md *md)
{
	struct dump *d = arg;
	char line[4400];
	int n = snprintf(line, sizeof line, "%s %o %llx %llu %s\n", path, md->mode,
	                 (unsigned long long)md->fileid, (unsigned long long)md->size, md->link);
	if (d->len + (size_t)n + 1 > d->cap) {
		d->cap = (d->len + (size_t)n + 1) * 2;
		d->s = realloc(d->s, d->cap);
	}
	memcpy(d->s + d->len, line, (size_t)n + 1);
	d->len += (size_t)n;
	return 0;
}

/* Every entry of the store as text (ns_walk order is deterministic: by path). */
static char *state(struct ns_store *ns)
{
	struct dump d = {.s = calloc(1, 1), .cap = 1};
	CHECK_EQ(ns_walk(ns, dump_one, &d), 0);
	return d.s;
}

static int open_dir(const char *dir, struct ns_store **ns, int *fd)
{
	*fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = ns_open_store(*fd, ns);
	if (rc)
		close(*fd);
	return rc;
}

static void close_dir(struct ns_store *ns, int fd)
{
	ns_close_store(ns);
	close(fd);
}

static struct chfs_md mk(mode_t mode)
{
	struct chfs_md m;
	memset(&m, 0, sizeof m);
	m.mode = mode;
	m.chunk_size = 65536;
	return m;
}

static char *states[MAXOPS + 1];
static off_t ends[MAXOPS + 1];
static int nops;

static off_t file_size(const char *dir, const char *name)
{
	char p[300];
	struct stat sb;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return stat(p, &sb) == 0 ? sb.st_size : -1;
}

static void record_step(struct ns_store *ns, const char *dir)
{
	states[nops] = state(ns);
	ends[nops] = file_size(dir, "ns.journal");
	nops++;
}

/* A run of every kind of change; states[i] is the state after i changes. */
static void changes(struct ns_store *ns, const char *dir)
{
	static struct chfs_md in, out, old;
	int existed, replaced;
	record_step(ns, dir);
	in = mk(S_IFDIR | 0755);
	CHECK_EQ(ns_mkdir(ns, "d", &in), 0);
	record_step(ns, dir);
	in = mk(S_IFREG | 0644);
	for (int i = 0; i < 6; i++) {
		char p[32];
		snprintf(p, sizeof p, "d/f%d", i);
		CHECK_EQ(ns_create(ns, p, &in, 1, &out, &existed), 0);
		record_step(ns, dir);
	}
	CHECK_EQ(ns_create(ns, "x/y/deep", &in, 1, &out, &existed), 0); /* implicit parents */
	record_step(ns, dir);
	CHECK_EQ(ns_setattr(ns, "d/f1", 0, &(struct wire_setattr){.which = WIRE_SET_SIZE_MAX, .size = 12345},
	                    &out),
	         0);
	record_step(ns, dir);
	CHECK_EQ(ns_rename(ns, "d/f2", "d/g2", &old, &replaced), 0);
	record_step(ns, dir);
	CHECK_EQ(ns_unlink(ns, "d/f3", &old), 0);
	record_step(ns, dir);
	CHECK_EQ(ns_lookup(ns, "d/f4", &out), 0);
	CHECK_EQ(ns_remove_if(ns, "d/f4", out.fileid), 0);
	record_step(ns, dir);
	in = mk(S_IFLNK | 0777);
	strcpy(in.link, "../target");
	CHECK_EQ(ns_create(ns, "d/link", &in, 1, &out, &existed), 0);
	record_step(ns, dir);
	in = mk(S_IFDIR | 0700);
	CHECK_EQ(ns_adopt(ns, "x/y", &in), 0); /* an implicit directory takes a record */
	record_step(ns, dir);
	CHECK_EQ(ns_unlink(ns, "x/y/deep", &old), 0);
	record_step(ns, dir);
	CHECK_EQ(ns_rmdir(ns, "x/y"), 0);
	record_step(ns, dir);
	in = mk(S_IFREG | 0600);
	in.fileid = 42;
	CHECK_EQ(ns_insert(ns, "d/f0", &in, 0, &old, &replaced), 0);
	CHECK(replaced == 1);
	record_step(ns, dir);
}

/* work/ns.journal = the first `cut` bytes of the journal, then (garbage) random bytes up to
 * its full length. */
static void copy_cut(const uint8_t *jbuf, size_t jlen, const char *to, size_t cut, int garbage)
{
	char p[600];
	snprintf(p, sizeof p, "%s/ns.journal", to);
	uint8_t *b = malloc(jlen);
	memcpy(b, jbuf, cut);
	for (size_t o = cut; o < jlen; o++)
		b[o] = (uint8_t)(rand() & 0xff);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, b, garbage ? jlen : cut) == (ssize_t)(garbage ? jlen : cut));
	close(fd);
	free(b);
}

/* A directory recorded here follows the names below it (lib/dirtimes.c): times and the
 * subdirectory count change with the entry, in its journal group, and survive a reopen. */
static void dir_touches(void)
{
	char dir[] = "/tmp/chfs-test-nsj3-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct ns_store *ns;
	int fd, existed, replaced;
	struct chfs_md in = mk(S_IFDIR | 0755), out, old, p0, p;
	CHECK_EQ(open_dir(dir, &ns, &fd), 0);
	CHECK_EQ(ns_mkdir(ns, "p", &in), 0);
	CHECK_EQ(ns_lookup(ns, "p", &p0), 0);
	CHECK_EQ(p0.subdirs, 0);
	CHECK_EQ(ns_mkdir(ns, "p/s", &in), 0);
	CHECK_EQ(ns_mkdir(ns, "p/t", &in), 0);
	CHECK_EQ(ns_lookup(ns, "p", &p), 0);
	CHECK(p.subdirs == 2 && p.mtime_ns > p0.mtime_ns && p.ctime_ns == p.mtime_ns);
	in = mk(S_IFREG | 0644);
	CHECK_EQ(ns_create(ns, "p/f", &in, 1, &out, &existed), 0);
	CHECK_EQ(ns_lookup(ns, "p", &p0), 0);
	CHECK(p0.mtime_ns > p.mtime_ns && p0.subdirs == 2);
	CHECK_EQ(ns_rename(ns, "p/t", "q", &old, &replaced), 0);   /* out of p: one subdirectory less */
	CHECK_EQ(ns_rename(ns, "p/f", "p/g", &old, &replaced), 0); /* within p: count unchanged */
	CHECK_EQ(ns_rmdir(ns, "p/s"), 0);
	CHECK_EQ(ns_lookup(ns, "p", &p), 0);
	CHECK(p.subdirs == 0 && p.mtime_ns > p0.mtime_ns);
	close_dir(ns, fd);
	CHECK_EQ(open_dir(dir, &ns, &fd), 0); /* replayed from the journal */
	CHECK_EQ(ns_lookup(ns, "p", &p0), 0);
	CHECK(p0.subdirs == 0 && p0.mtime_ns == p.mtime_ns);
	close_dir(ns, fd);
	char cmd[100];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

int main(void)
{
	char dir[] = "/tmp/chfs-test-nsj-XXXXXX", work[64];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(work, sizeof work, "%s.cut", dir);
	struct ns_store *ns;
	int fd;
	CHECK_EQ(open_dir(dir, &ns, &fd), 0);
	changes(ns, dir);
	close_dir(ns, fd);
	CHECK(nops > 10 && file_size(dir, "ns.snap") < 0); /* all in the journal */

	/* Cut at every byte offset, or garbage from every offset on. */
	off_t total = ends[nops - 1];
	char jp[600];
	snprintf(jp, sizeof jp, "%s/ns.journal", dir);
	uint8_t *jbuf = malloc((size_t)total);
	int jfd = open(jp, O_RDONLY);
	CHECK(jfd >= 0 && read(jfd, jbuf, (size_t)total) == total);
	close(jfd);
	CHECK(mkdir(work, 0700) == 0);
	char cmd[700];
	int bad = 0;
	for (int garbage = 0; garbage < 2; garbage++) {
		for (off_t cut = 0; cut <= total; cut++) {
			copy_cut(jbuf, (size_t)total, work, (size_t)cut, garbage);
			int expect = 0;
			for (int i = 0; i < nops; i++)
				if (ends[i] <= cut)
					expect = i;
			if (open_dir(work, &ns, &fd) != 0) {
				bad++;
				continue;
			}
			char *got = state(ns);
			if (strcmp(got, states[expect]) != 0) {
				if (bad++ < 3)
					fprintf(stderr,
					        "cut %lld garbage %d: state differs from after change %d\n",
					        (long long)cut, garbage, expect);
			}
			free(got);
			/* The server goes on: a new entry is appended after the valid frames. */
			struct chfs_md in = mk(S_IFREG | 0644), out;
			int existed;
			CHECK_EQ(ns_create(ns, "after-crash", &in, 0, &out, &existed), 0);
			close_dir(ns, fd);
			CHECK_EQ(open_dir(work, &ns, &fd), 0);
			CHECK_EQ(ns_lookup(ns, "after-crash", &out), 0);
			close_dir(ns, fd);
		}
	}
	CHECK_EQ(bad, 0);
	free(jbuf);
	dir_touches();
	printf("journal of %lld bytes cut/garbled at every offset: %d mismatches\n", (long long)total, bad);

	/* Compaction after every change: reopen gives the final state, from the snapshot. */
	char dir2[] = "/tmp/chfs-test-nsj2-XXXXXX";
	CHECK(mkdtemp(dir2) != NULL);
	char *final = strdup(states[nops - 1]);
	for (int i = 0; i < nops; i++)
		free(states[i]);
	nops = 0;
	CHECK_EQ(open_dir(dir2, &ns, &fd), 0);
	ns_set_compact_bytes(ns, 0);
	changes(ns, dir2);
	char *now = state(ns);
	close_dir(ns, fd);
	CHECK(file_size(dir2, "ns.snap") > 24 && file_size(dir2, "ns.journal") == 24);
	/* Same changes, other file ids: compare the shape only (paths and modes). */
	CHECK_EQ(open_dir(dir2, &ns, &fd), 0);
	char *again = state(ns);
	CHECK(strcmp(again, now) == 0);
	free(again);
	close_dir(ns, fd);

	/* A previous-generation journal beside the snapshot: not replayed. Keep a journal with
	 * one frame of generation g, compact to g+1, then put the old journal back. */
	char p[300], q[300];
	CHECK_EQ(open_dir(dir2, &ns, &fd), 0);
	ns_set_compact_bytes(ns, 1u << 30);
	struct chfs_md in = mk(S_IFREG | 0644), out, old;
	int existed;
	CHECK_EQ(ns_create(ns, "stale-frame", &in, 1, &out, &existed), 0);
	snprintf(p, sizeof p, "%s/ns.journal", dir2);
	snprintf(q, sizeof q, "%s/ns.journal.old", dir2);
	snprintf(cmd, sizeof cmd, "cp %s %s", p, q);
	CHECK(system(cmd) == 0);
	CHECK_EQ(ns_unlink(ns, "stale-frame", &old), 0);
	ns_set_compact_bytes(ns, 0);
	CHECK_EQ(ns_create(ns, "compacted", &in, 1, &out, &existed), 0); /* compacts */
	close_dir(ns, fd);
	CHECK(rename(q, p) == 0);
	CHECK_EQ(open_dir(dir2, &ns, &fd), 0);
	CHECK_EQ(ns_lookup(ns, "stale-frame", &out), -ENOENT);
	CHECK_EQ(ns_lookup(ns, "compacted", &out), 0);
	close_dir(ns, fd);

	/* A journal newer than the snapshot (the snapshot was lost): refused. */
	snprintf(cmd, sizeof cmd, "cp %s/ns.snap %s/snap.keep && rm %s/ns.snap", dir2, dir2, dir2);
	CHECK(system(cmd) == 0);
	CHECK_EQ(open_dir(dir2, &ns, &fd), -EIO);
	/* A snapshot cut short: refused. */
	snprintf(cmd, sizeof cmd, "mv %s/snap.keep %s/ns.snap && truncate -s -3 %s/ns.snap", dir2, dir2,
	         dir2);
	CHECK(system(cmd) == 0);
	CHECK_EQ(open_dir(dir2, &ns, &fd), -EIO);

	CHECK_EQ(nsj_crc32c(0, "123456789", 9), 0xE3069283u); /* the CRC-32C check value */

	free(now);
	free(final);
	snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", dir, dir2, work);
	CHECK(system(cmd) == 0);
	return check_result("test_ns_journal");
}
