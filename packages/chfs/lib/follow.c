/*
 * follow.c — chfs_follow: the name a file or directory has now, found by its identity (st_ino)
 * after another process renamed it or a directory above it.
 *
 * Every regular file and every directory made by mkdir carries a file id for life (the st_ino
 * this library reports), kept by renames; a server that takes a new name notes (file id ->
 * name) in its rename notes (server/moved.c). The syscall hook keeps a working directory and
 * directory descriptors by name, so when a call relative to one of them fails with ENOENT it
 * asks here whether that directory was moved, and if so goes on from its new name — as the
 * kernel's working directory and descriptors follow a rename. The notes are a bounded ring per
 * server and are not kept across a server restart: an old or forgotten rename is not followed
 * (ENOENT, as before).
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* 0 if cp (canonical) still names what has st_ino `ino`, else -ENOENT / -ESTALE / another
 * error. An entry without a file id has the hash of its name as st_ino (md_to_stat). */
static int names(struct srvlist *s, const char *cp, uint64_t ino, struct chfs_md *md)
{
	int rc = ns_lookup(s, cp, md);
	uint64_t id = rc == 0 && !md->fileid ? chfs_hash_str(cp) : md->fileid;
	return rc == 0 && id != ino ? -ESTALE : rc;
}

static int put_name(const char *cp, char *out, size_t size)
{
	size_t n = strlen(cp);
	if (n + 2 > size)
		return -ERANGE;
	out[0] = '/';
	memcpy(out + 1, cp, n + 1);
	return 0;
}

int chfs_follow(const char *path, ino_t ino, char *out, size_t size)
{
	char *cp = malloc(CHFS_PATH_MAX), *found = malloc(CHFS_PATH_MAX);
	struct chfs_md *md = malloc(sizeof *md);
	struct srvlist *s;
	int rc = cp && found && md ? 0 : -ENOMEM;
	if (rc == 0 && !out)
		rc = -EFAULT;
	if (rc == 0)
		rc = path ? path_canonical(path, cp) : -EFAULT;
	if (rc == 0 && ino == 0)
		rc = -ENOENT; /* no identity (a directory only a backend or old server has) */
	if (rc == 0)
		rc = client_begin(&s);
	if (rc == 0) {
		int here = names(s, cp, (uint64_t)ino, md);
		if (here == 0)
			rc = put_name(cp, out, size);
		else if (here != -ENOENT && here != -ESTALE && here != -ENOTDIR)
			rc = here;
		else if ((rc = ns_lookup_fileid(s, (uint64_t)ino, md, found)) == 0)
			rc = put_name(found, out, size);
	}
	free(cp);
	free(found);
	free(md);
	return set_err(rc);
}
