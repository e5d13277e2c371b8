/*
 * readdir.c — directory listing. Every server returns, page by page (names after a cursor, in
 * name order, at most WIRE_READDIR_MAX bytes per reply), the entries it owns in that directory;
 * chfs_readdir asks all servers, chfs_readdir_index one. The filler gets "." and ".." first and
 * a struct stat with the type, permissions, size and mtime of each entry.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*filler_t)(void *, const char *, const struct stat *, off_t);

/* List server idx's part; 1 if the filler asked to stop. */
static int list_server(struct srvlist *s, unsigned idx, const char *cp, void *buf, filler_t filler)
{
	char cursor[CHFS_NAME_MAX + 1] = "", name[CHFS_NAME_MAX + 1];
	size_t cap = WIRE_HDR_LEN + WIRE_READDIR_MAX + 1024;
	uint8_t *rep = malloc(cap);
	if (!rep)
		return -ENOMEM;
	int rc = 0;
	for (;;) {
		RPC_DECL(r);
		rpc_begin(&r, WOP_READDIR);
		wenc_str(&r.e, cp);
		wenc_str(&r.e, cursor);
		r.rep = rep;
		r.repcap = cap;
		if ((rc = rpc_call(s, idx, &r)) < 0)
			break;
		uint32_t n = wdec_u32(&r.d), eof = wdec_u32(&r.d);
		for (uint32_t i = 0; i < n && rc == 0; i++) {
			struct stat st;
			memset(&st, 0, sizeof st);
			wdec_str(&r.d, name, sizeof name);
			st.st_mode = wdec_u32(&r.d);
			st.st_size = (off_t)wdec_u64(&r.d);
			int64_t mt = wdec_i64(&r.d);
			if (r.d.err || !name[0] || strchr(name, '/')) {
				rc = -EIO;
				break;
			}
			st.st_mtim.tv_sec = mt / 1000000000;
			st.st_mtim.tv_nsec = mt % 1000000000;
			st.st_nlink = S_ISDIR(st.st_mode) ? 2 : 1;
			memcpy(cursor, name, sizeof cursor);
			if (filler(buf, name, &st, 0))
				rc = 1;
		}
		if (rc || eof || n == 0)
			break;
	}
	free(rep);
	return rc;
}

static int readdir_common(const char *path, int index, void *buf, filler_t filler)
{
	char cp[CHFS_PATH_MAX];
	struct srvlist *s;
	struct chfs_md md;
	int rc = path ? path_canonical(path, cp) : -EFAULT;
	if (rc == 0)
		rc = client_begin(&s);
	if (rc == 0)
		rc = fd_sync_sizes(0);
	if (rc == 0)
		rc = ns_resolve(s, cp, cp, &md);
	if (rc == 0 && !S_ISDIR(md.mode))
		rc = -ENOTDIR;
	if (rc == 0 && index >= (int)s->n)
		rc = -EINVAL;
	if (rc)
		return set_err(rc);
	struct stat st;
	md_to_stat(&md, cp, &st);
	if (filler(buf, ".", &st, 0) || filler(buf, "..", &st, 0))
		return 0;
	if (index >= 0) {
		for (int attempt = 0;; attempt++) {
			rc = list_server(s, (unsigned)index, cp, buf, filler);
			if (rc != -ERESTART || attempt >= CLIENT_RETRIES || (unsigned)index >= s->n)
				break;
			s = client_list_retry(s, (unsigned)index, attempt);
		}
		return rc < 0 ? set_err(rpc_restart_failed(rc)) : 0;
	}
	/* A server whose member list is newer than ours refuses (-ERESTART) before listing
	 * anything: go on with the newer list, skipping the servers already listed. */
	char **listed = calloc(s->n + 1, sizeof *listed);
	unsigned nlisted = 0;
	if (!listed)
		return set_err(-ENOMEM);
	for (int attempt = 0; rc == 0 || (rc == -ERESTART && attempt < CLIENT_RETRIES); attempt++) {
		unsigned refused = 0;
		rc = 0;
		for (unsigned i = 0; i < s->n && rc == 0; i++) {
			int seen = 0;
			for (unsigned k = 0; k < nlisted && !seen; k++)
				seen = strcmp(listed[k], s->addrs[i]) == 0;
			if (seen)
				continue;
			if (client_server_down(s, i)) { /* list what the others hold, and say what is not */
				log_warn("listing /%s without server %s: it is down", cp, s->addrs[i]);
				continue;
			}
			rc = list_server(s, i, cp, buf, filler);
			if (rc == -ERESTART) {
				refused = i;
			} else if (rc == 0) {
				char **nl = realloc(listed, (nlisted + 2) * sizeof *listed);
				if (!nl || !(nl[nlisted] = strdup(s->addrs[i]))) {
					listed = nl ? nl : listed;
					rc = -ENOMEM;
					break;
				}
				listed = nl;
				nlisted++;
			}
		}
		if (rc != -ERESTART)
			break;
		s = client_list_retry(s, refused, attempt);
	}
	for (unsigned k = 0; k < nlisted; k++)
		free(listed[k]);
	free(listed);
	rc = rpc_restart_failed(rc);
	return rc < 0 ? set_err(rc) : 0;
}

int chfs_readdir(const char *path, void *buf, filler_t filler)
{
	return readdir_common(path, -1, buf, filler);
}

int chfs_readdir_index(const char *path, int index, void *buf, filler_t filler)
{
	if (index < 0)
		return set_err(-EINVAL);
	return readdir_common(path, index, buf, filler);
}
