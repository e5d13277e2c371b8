/*
 * test_ns_import.c — a storage directory in the old one-file-per-entry layout (DIR/ns/_a/_b
 * record files, a directory's record in .meta, implicit directories without one), written here
 * with the same record_codec the old server used, is imported at open: every record is served
 * field for field, readdir lists owned entries only, the old tree is renamed ns.imported, and
 * a second open serves the same from the new format. An undecodable record and a planted
 * symlink are skipped, never followed.
 */
#define _GNU_SOURCE
#include "check.h"
#include "record_codec.h"
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/chfs-test-nsimport-XXXXXX";

static void put_old(const char *rel, const struct chfs_md *md)
{
	uint8_t buf[RECORD_MAX_LEN];
	size_t len;
	char p[600];
	CHECK_EQ(record_encode(md, buf, sizeof buf, &len), 0);
	snprintf(p, sizeof p, "%s/ns/%s", dir, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0 && write(fd, buf, len) == (ssize_t)len);
	close(fd);
}

static void mkdir_old(const char *rel)
{
	char p[600];
	snprintf(p, sizeof p, "%s/ns/%s", dir, rel);
	CHECK(mkdir(p, 0700) == 0);
}

static struct chfs_md md_of(mode_t mode, uint64_t id, uint64_t size)
{
	struct chfs_md m;
	memset(&m, 0, sizeof m);
	m.mode = mode;
	m.chunk_size = 65536;
	m.fileid = id;
	m.size = size;
	m.mtime_ns = 1700000000123456789;
	m.uid = 1000;
	return m;
}

struct names {
	int n;
	char all[256];
};

static int collect(void *arg, const char *name, const struct chfs_md *md)
{
	struct names *c = arg;
	(void)md;
	c->n++;
	strcat(c->all, name);
	strcat(c->all, " ");
	return 0;
}

static void check_served(struct storage *st)
{
	static struct chfs_md out;
	struct names c;
	int eof;
	CHECK_EQ(st_lookup(st, "d", &out), 0);
	CHECK(S_ISDIR(out.mode) && out.fileid == 0 && out.uid == 1000);
	CHECK_EQ(st_lookup(st, "d/f", &out), 0);
	CHECK(out.mode == (S_IFREG | 0640) && out.fileid == 77 && out.size == 4096 &&
	      out.mtime_ns == 1700000000123456789);
	CHECK_EQ(st_lookup(st, "d/lnk", &out), 0);
	CHECK(S_ISLNK(out.mode) && strcmp(out.link, "../somewhere") == 0);
	CHECK_EQ(st_lookup(st, "imp", &out), -ENOENT); /* implicit: no record */
	CHECK_EQ(st_lookup(st, "imp/deep/x", &out), 0);
	CHECK(out.fileid == 99 && strcmp(out.home, "tcp://10.0.0.1:1234") == 0);
	CHECK_EQ(st_dir_has_entries(st, "imp"), 1);
	CHECK_EQ(st_lookup(st, "d/bad", &out), -ENOENT);
	CHECK_EQ(st_lookup(st, "evil", &out), -ENOENT);
	memset(&c, 0, sizeof c);
	CHECK_EQ(st_readdir(st, "d", "", collect, &c, &eof), 0);
	CHECK(c.n == 2 && eof == 1 && strcmp(c.all, "f lnk ") == 0);
	memset(&c, 0, sizeof c);
	CHECK_EQ(st_readdir(st, "", "", collect, &c, &eof), 0);
	CHECK(c.n == 1 && strcmp(c.all, "d ") == 0); /* imp (implicit) is not listed here */
}

int main(void)
{
	CHECK(mkdtemp(dir) != NULL);
	/* The old layout, as the old server wrote it. */
	char p[600];
	snprintf(p, sizeof p, "%s/ns", dir);
	CHECK(mkdir(p, 0700) == 0);
	mkdir_old("_d");
	struct chfs_md m = md_of(S_IFDIR | 0755, 0, 0);
	put_old("_d/.meta", &m);
	m = md_of(S_IFREG | 0640, 77, 4096);
	put_old("_d/_f", &m);
	m = md_of(S_IFLNK | 0777, 78, 0);
	strcpy(m.link, "../somewhere");
	put_old("_d/_lnk", &m);
	mkdir_old("_imp");
	mkdir_old("_imp/_deep");
	m = md_of(S_IFREG | 0600, 99, 1);
	m.flags = MD_LOCAL;
	strcpy(m.home, "tcp://10.0.0.1:1234");
	put_old("_imp/_deep/_x", &m);
	snprintf(p, sizeof p, "%s/ns/_d/_bad", dir);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, "CMD1xx", 6) == 6);
	close(fd);
	snprintf(p, sizeof p, "%s/ns/_d/.tmp.0123", dir); /* an interrupted old write */
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	close(fd);
	snprintf(p, sizeof p, "%s/ns/_evil", dir);
	CHECK(symlink("/etc", p) == 0);

	struct storage *st;
	CHECK_EQ(st_open(dir, &st), 0);
	check_served(st);
	st_close(st);
	snprintf(p, sizeof p, "%s/ns", dir);
	CHECK(access(p, F_OK) != 0);
	snprintf(p, sizeof p, "%s/ns.imported/_d/_f", dir);
	CHECK(access(p, F_OK) == 0);
	snprintf(p, sizeof p, "%s/ns.snap", dir);
	CHECK(access(p, F_OK) == 0);

	/* Reopened: served from the snapshot, the old tree not read again. */
	CHECK_EQ(st_open(dir, &st), 0);
	check_served(st);
	st_close(st);

	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return check_result("test_ns_import");
}
