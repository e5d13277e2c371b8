/*
 * storage.c — the storage directory as one handle (see storage.h): resolves DIR, keeps an fd
 * of it for membership state, and opens the namespace and data stores beneath it. The st_*
 * calls forward to the store that owns the concern, so the handlers keep one interface while
 * each store stays independent of the other and of its callers.
 */
#define _GNU_SOURCE
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct storage {
	char root[4096];
	int rootfd;
	struct ns_store *ns;
	struct data_store *data;
};

int st_open(const char *dir, struct storage **out)
{
	struct storage *st = calloc(1, sizeof *st);
	int rc;
	if (!st)
		return -ENOMEM;
	st->rootfd = -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		goto fail_errno;
	if (!realpath(dir, st->root))
		goto fail_errno;
	st->rootfd = open(st->root, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (st->rootfd < 0)
		goto fail_errno;
	if ((rc = ns_open_store(st->rootfd, &st->ns)) < 0 ||
	    (rc = ds_open_store(st->rootfd, st->root, &st->data)) < 0)
		goto fail;
	*out = st;
	return 0;
fail_errno:
	rc = errno ? -errno : -EIO;
fail:
	ns_close_store(st->ns);
	if (st->rootfd >= 0)
		close(st->rootfd);
	free(st);
	return rc;
}

void st_close(struct storage *st)
{
	if (!st)
		return;
	ns_close_store(st->ns);
	ds_close_store(st->data);
	close(st->rootfd);
	free(st);
}

const char *st_root(const struct storage *st) { return st->root; }
int st_rootfd(const struct storage *st) { return st->rootfd; }

/* ---- namespace (ns_store.c) ---- */
int st_create(struct storage *st, const char *path, const struct chfs_md *in, int excl, struct chfs_md *out,
              int *existed)
{
	return ns_create(st->ns, path, in, excl, out, existed);
}

int st_lookup(struct storage *st, const char *path, struct chfs_md *out)
{
	return ns_lookup(st->ns, path, out);
}

int st_mkdir(struct storage *st, const char *path, const struct chfs_md *in)
{
	return ns_mkdir(st->ns, path, in);
}

int st_rmdir(struct storage *st, const char *path) { return ns_rmdir(st->ns, path); }

int st_dir_has_entries(struct storage *st, const char *path) { return ns_dir_has_entries(st->ns, path); }

int st_readdir(struct storage *st, const char *path, const char *cursor, st_readdir_fn fn, void *arg,
               int *eof)
{
	return ns_readdir(st->ns, path, cursor, fn, arg, eof);
}

int st_unlink(struct storage *st, const char *path, struct chfs_md *old)
{
	return ns_unlink(st->ns, path, old);
}

int st_insert(struct storage *st, const char *path, const struct chfs_md *md, int noreplace,
              struct chfs_md *old, int *replaced)
{
	return ns_insert(st->ns, path, md, noreplace, old, replaced);
}

int st_remove_if(struct storage *st, const char *path, uint64_t fileid)
{
	return ns_remove_if(st->ns, path, fileid);
}

int st_rename(struct storage *st, const char *from, const char *to, struct chfs_md *old, int *replaced)
{
	return ns_rename(st->ns, from, to, old, replaced);
}

int st_setattr(struct storage *st, const char *path, uint64_t fileid, const struct wire_setattr *a,
               struct chfs_md *out)
{
	return ns_setattr(st->ns, path, fileid, a, out);
}

int st_adjust_links(struct storage *st, const char *key, uint64_t fileid, int add, struct chfs_md *out)
{
	return ns_adjust_links(st->ns, key, fileid, add, out);
}

int st_relink(struct storage *st, const char *path, const char *from, const char *to)
{
	return ns_relink(st->ns, path, from, to);
}

/* ---- backing files (data_store.c) ---- */
int st_data_open(struct storage *st, uint64_t fileid, int create)
{
	return ds_open(st->data, fileid, create);
}

int st_data_truncate(struct storage *st, uint64_t fileid, uint64_t len)
{
	return ds_truncate(st->data, fileid, len);
}

void st_data_shrink_hold(struct storage *st) { ds_shrink_hold(st->data); }

void st_data_shrink_release(struct storage *st) { ds_shrink_release(st->data); }

int st_data_remove(struct storage *st, uint64_t fileid) { return ds_remove(st->data, fileid); }

int st_data_stat(struct storage *st, uint64_t fileid, uint64_t *size, int64_t *mtime_ns)
{
	return ds_stat(st->data, fileid, size, mtime_ns);
}

int st_data_path(struct storage *st, uint64_t fileid, const struct wire_tag *tag, char *buf, size_t size)
{
	return ds_path(st->data, fileid, tag, buf, size);
}

int st_ns_walk(struct storage *st, ns_walk_fn fn, void *arg) { return ns_walk(st->ns, fn, arg); }

int st_adopt(struct storage *st, const char *path, const struct chfs_md *md)
{
	return ns_adopt(st->ns, path, md);
}

int st_data_open_tagged(struct storage *st, uint64_t fileid, const struct wire_tag *tag)
{
	return ds_open_tagged(st->data, fileid, tag);
}

int st_data_tag(struct storage *st, uint64_t fileid, struct wire_tag *tag)
{
	return ds_get_tag(st->data, fileid, tag);
}

int st_data_walk(struct storage *st, int (*fn)(void *arg, uint64_t fileid), void *arg)
{
	return ds_walk(st->data, fn, arg);
}

int st_data_usage(struct storage *st, uint64_t *files, uint64_t *bytes)
{
	return ds_usage(st->data, files, bytes);
}

int st_data_punch(struct storage *st, uint64_t fileid, uint64_t off, uint64_t len)
{
	return ds_punch(st->data, fileid, off, len);
}
