/*
 * test_storage.c — chfsd's storage layer on a temporary directory: namespace entries, implicit
 * parents, readdir paging and ownership, rename, setattr, backing files, that no client path
 * is resolved in the file system, and that a reopened store (a restarted server) serves every
 * record it had, field for field, also after garbage was appended to its journal.
 */
#define _GNU_SOURCE
#include "check.h"
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int same_md(const struct chfs_md *a, const struct chfs_md *b)
{
	return a->mode == b->mode && a->uid == b->uid && a->gid == b->gid && a->flags == b->flags &&
	       a->chunk_size == b->chunk_size && a->pkey == b->pkey && a->size == b->size &&
	       a->fileid == b->fileid && a->atime_ns == b->atime_ns && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns && strcmp(a->link, b->link) == 0 && strcmp(a->home, b->home) == 0;
}

static struct chfs_md file_md(uint64_t id)
{
	struct chfs_md m;
	memset(&m, 0, sizeof m);
	m.mode = S_IFREG | 0644;
	m.chunk_size = 65536;
	m.fileid = id;
	return m;
}

struct names {
	int n;
	char last[300];
	int limit;
};

static int collect(void *arg, const char *name, const struct chfs_md *md)
{
	struct names *c = arg;
	if (c->limit && c->n == c->limit)
		return 1;
	c->n++;
	snprintf(c->last, sizeof c->last, "%s", name);
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/chfs-test-storage-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct storage *st;
	CHECK_EQ(st_open(dir, &st), 0);
	struct chfs_md in = file_md(0), out, old;
	int existed = -1, replaced = -1, eof = 0;

	/* create / lookup / create again (truncates) / exclusive create */
	in.size = 0;
	CHECK_EQ(st_create(st, "a/b/file", &in, 0, &out, &existed), 0);
	CHECK(existed == 0 && out.fileid != 0);
	uint64_t id = out.fileid;
	CHECK_EQ(st_setattr(st, "a/b/file", id,
	                    &(struct wire_setattr){.which = WIRE_SET_SIZE_MAX, .size = 5000}, &out),
	         0);
	CHECK_EQ(st_setattr(st, "a/b/file", id,
	                    &(struct wire_setattr){.which = WIRE_SET_SIZE_MAX, .size = 100}, &out),
	         0);
	CHECK_EQ(out.size, 5000u);
	CHECK_EQ(st_setattr(st, "a/b/file", id + 1,
	                    &(struct wire_setattr){.which = WIRE_SET_SIZE_MAX, .size = 1}, &out),
	         -ESTALE);
	CHECK_EQ(st_lookup(st, "a/b/file", &out), 0);
	CHECK(out.fileid == id && out.size == 5000);
	/* chown: owner and group change; set-user-ID always and set-group-ID of a group-executable
	 * file cleared (Linux's rule); a directory keeps both. */
	CHECK_EQ(st_setattr(st, "a/b/file", id, &(struct wire_setattr){.which = WIRE_SET_MODE, .mode = 06755},
	                    &out),
	         0);
	CHECK_EQ(st_setattr(st, "a/b/file", id,
	                    &(struct wire_setattr){
	                            .which = WIRE_SET_UID | WIRE_SET_GID, .uid = 1001, .gid = 2002},
	                    &out),
	         0);
	CHECK_EQ(st_lookup(st, "a/b/file", &out), 0);
	CHECK(out.uid == 1001 && out.gid == 2002 && (out.mode & 07777) == 0755);
	CHECK_EQ(st_setattr(st, "a/b/file", id, &(struct wire_setattr){.which = WIRE_SET_MODE, .mode = 02644},
	                    &out),
	         0);
	CHECK_EQ(
	        st_setattr(st, "a/b/file", id, &(struct wire_setattr){.which = WIRE_SET_GID, .gid = 3}, &out),
	        0);
	CHECK((out.mode & 07777) == 02644 && out.gid == 3 && out.uid == 1001); /* not group-exec: kept */
	CHECK_EQ(st_create(st, "a/b/file", &in, 0, &out, &existed), 0);
	CHECK(existed == 1 && out.size == 0 && out.fileid == id);
	CHECK_EQ(st_create(st, "a/b/file", &in, 1, &out, &existed), -EEXIST);

	/* "a" and "a/b" exist only implicitly here: not entries, not listed. */
	CHECK_EQ(st_lookup(st, "a", &out), -ENOENT);
	CHECK_EQ(st_lookup(st, "a/b/file/x", &out), -ENOENT);
	CHECK_EQ(st_dir_has_entries(st, "a"), 1);
	struct names c = {0};
	CHECK_EQ(st_readdir(st, "a", "", collect, &c, &eof), 0);
	CHECK(c.n == 0 && eof == 1);

	/* mkdir over an implicit directory makes it real; rmdir turns it implicit again. */
	struct chfs_md dmd;
	memset(&dmd, 0, sizeof dmd);
	dmd.mode = S_IFDIR | 0755;
	dmd.chunk_size = 65536;
	CHECK_EQ(st_mkdir(st, "a/b", &dmd), 0);
	CHECK_EQ(st_mkdir(st, "a/b", &dmd), -EEXIST);
	CHECK_EQ(st_mkdir(st, "a/b/file", &dmd), -EEXIST);
	CHECK_EQ(st_lookup(st, "a/b", &out), 0);
	CHECK(S_ISDIR(out.mode));
	CHECK_EQ(st_unlink(st, "a/b", &old), -EISDIR);
	CHECK_EQ(st_rmdir(st, "a/b"), 0);
	CHECK_EQ(st_lookup(st, "a/b", &out), -ENOENT);
	CHECK_EQ(st_rmdir(st, "a/b/file"), -ENOTDIR);
	CHECK_EQ(st_lookup(st, "", &out), 0);
	CHECK(S_ISDIR(out.mode));

	/* readdir: order, cursor paging, stop early */
	CHECK_EQ(st_mkdir(st, "d", &dmd), 0);
	char p[64];
	for (int i = 0; i < 50; i++) {
		snprintf(p, sizeof p, "d/f%02d", i);
		CHECK_EQ(st_create(st, p, &in, 1, &out, &existed), 0);
	}
	memset(&c, 0, sizeof c);
	c.limit = 20;
	CHECK_EQ(st_readdir(st, "d", "", collect, &c, &eof), 0);
	CHECK(c.n == 20 && eof == 0 && strcmp(c.last, "f19") == 0);
	struct names c2 = {0};
	CHECK_EQ(st_readdir(st, "d", c.last, collect, &c2, &eof), 0);
	CHECK(c2.n == 30 && eof == 1 && strcmp(c2.last, "f49") == 0);

	/* rename: replace, cross-directory, atomic insert / remove_if */
	CHECK_EQ(st_rename(st, "d/f00", "d/f01", &old, &replaced), 0);
	CHECK_EQ(replaced, 1);
	CHECK_EQ(st_lookup(st, "d/f00", &out), -ENOENT);
	CHECK_EQ(st_rename(st, "d/f01", "e/g/h", &old, &replaced), 0);
	CHECK_EQ(replaced, 0);
	CHECK_EQ(st_lookup(st, "e/g/h", &out), 0);
	struct chfs_md ins = file_md(4242);
	CHECK_EQ(st_insert(st, "x/y", &ins, 0, &old, &replaced), 0);
	CHECK_EQ(st_insert(st, "x/y", &ins, 1, &old, &replaced), -EEXIST);
	CHECK_EQ(st_remove_if(st, "x/y", 1), -ESTALE);
	CHECK_EQ(st_remove_if(st, "x/y", 4242), 0);
	CHECK_EQ(st_lookup(st, "x/y", &out), -ENOENT);

	/* Backing files: sparse writes at logical offsets, truncate sets the exact size (node-local
	 * files are read directly through their backing file), remove. */
	uint64_t nfiles, nbytes;
	CHECK(st_data_usage(st, &nfiles, &nbytes) == 0 && nfiles == 0 && nbytes == 0);
	int fd = st_data_open(st, 77, 1);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, "z", 1, 1 << 20) == 1);
	close(fd);
	/* usage counts allocated blocks (status's stored_bytes): a sparse file, not its size */
	CHECK(st_data_usage(st, &nfiles, &nbytes) == 0 && nfiles == 1 && nbytes > 0 && nbytes < (1 << 20));
	uint64_t size;
	int64_t mt;
	CHECK(st_data_stat(st, 77, &size, &mt) == 0 && size == (1 << 20) + 1);
	CHECK_EQ(st_data_truncate(st, 77, 10), 0);
	CHECK(st_data_stat(st, 77, &size, &mt) == 0 && size == 10);
	CHECK_EQ(st_data_truncate(st, 77, 1000), 0);
	CHECK(st_data_stat(st, 77, &size, &mt) == 0 && size == 1000);
	char path[4200];
	struct wire_tag tag = {.pkey = 1, .chunk_size = 65536};
	CHECK_EQ(st_data_path(st, 77, &tag, path, sizeof path), 0);
	CHECK(strncmp(path, st_root(st), strlen(st_root(st))) == 0 && strstr(path, "/data/000000000000004d"));
	CHECK_EQ(st_data_remove(st, 77), 0);
	CHECK(st_data_stat(st, 77, &size, &mt) == 0 && size == 0);
	CHECK(st_data_usage(st, &nfiles, &nbytes) == 0 && nfiles == 0 && nbytes == 0);
	CHECK_EQ(st_data_open(st, 0, 1), -EINVAL);

	/* Client paths are never resolved in the file system: a symlink planted in the storage
	 * directory under a name a path would once have mapped to changes nothing. */
	char link[300];
	snprintf(link, sizeof link, "%s/_evil", dir);
	CHECK(symlink("/etc", link) == 0);
	CHECK_EQ(st_lookup(st, "evil/passwd", &out), -ENOENT);
	CHECK_EQ(st_lookup(st, "evil", &out), -ENOENT);
	CHECK_EQ(st_create(st, "evil/new", &in, 0, &out, &existed), 0);
	CHECK(access("/etc/_new", F_OK) != 0 && access("/etc/new", F_OK) != 0);
	CHECK_EQ(st_unlink(st, "evil/new", &old), 0);

	/* Reopen (a restarted server): every record is served as it was, including a symlink with
	 * the longest target and a node-local file with the longest home address. */
	static struct chfs_md lnk, loc, lnk_was, loc_was, dir_was;
	lnk = file_md(0);
	lnk.mode = S_IFLNK | 0777;
	memset(lnk.link, 't', CHFS_LINK_MAX - 1);
	CHECK_EQ(st_create(st, "s/link", &lnk, 1, &lnk_was, &existed), 0);
	loc = file_md(0);
	loc.flags = MD_LOCAL;
	loc.uid = 1234;
	loc.gid = 5678;
	loc.pkey = 0xabcdef01u;
	memset(loc.home, 'h', WIRE_ADDR_MAX - 1);
	CHECK_EQ(st_create(st, "s/local", &loc, 1, &out, &existed), 0);
	uint32_t which = WIRE_SET_SIZE_MAX | WIRE_SET_MODE | WIRE_SET_ATIME;
	struct wire_setattr set = {.which = which, .mode = 0600, .atime_ns = -5, .size = 123};
	CHECK_EQ(st_setattr(st, "s/local", out.fileid, &set, &loc_was), 0);
	CHECK_EQ(st_lookup(st, "d", &dir_was), 0);
	st_close(st);
	CHECK_EQ(st_open(dir, &st), 0);
	CHECK_EQ(st_lookup(st, "s/link", &out), 0);
	CHECK(same_md(&out, &lnk_was) && strlen(out.link) == CHFS_LINK_MAX - 1);
	CHECK_EQ(st_lookup(st, "s/local", &out), 0);
	CHECK(same_md(&out, &loc_was) && strlen(out.home) == WIRE_ADDR_MAX - 1);
	CHECK(out.size == 123 && out.mode == (S_IFREG | 0600) && out.atime_ns == -5);
	CHECK_EQ(st_lookup(st, "d", &out), 0);
	CHECK(same_md(&out, &dir_was) && S_ISDIR(out.mode));
	memset(&c, 0, sizeof c);
	CHECK_EQ(st_readdir(st, "d", "", collect, &c, &eof), 0);
	CHECK(c.n == 48 && eof == 1 && strcmp(c.last, "f49") == 0);

	/* Garbage after the journal's last frame (a torn append) is dropped at open, cut off the
	 * file, and what follows it is appended after the valid frames. */
	st_close(st);
	char jpath[300];
	snprintf(jpath, sizeof jpath, "%s/ns.journal", dir);
	int jfd = open(jpath, O_WRONLY | O_APPEND);
	CHECK(jfd >= 0 && write(jfd, "CMD1\x81\x81\0\0\x55", 9) == 9);
	close(jfd);
	CHECK_EQ(st_open(dir, &st), 0);
	CHECK_EQ(st_lookup(st, "s/local", &out), 0);
	CHECK(same_md(&out, &loc_was));
	CHECK_EQ(st_create(st, "s/after", &in, 1, &out, &existed), 0);
	st_close(st);
	CHECK_EQ(st_open(dir, &st), 0);
	CHECK_EQ(st_lookup(st, "s/after", &out), 0);
	CHECK_EQ(st_lookup(st, "s/link", &out), 0);
	CHECK(same_md(&out, &lnk_was));

	st_close(st);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return check_result("test_storage");
}
