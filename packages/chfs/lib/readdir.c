/*
 * readdir.c — directory listing. Every server returns, page by page (names after a cursor, in
 * name order, at most WIRE_READDIR_MAX bytes per reply), the entries it owns in that directory;
 * chfs_readdir asks all servers, chfs_readdir_index one. The filler gets "." and ".." first and
 * a struct stat with the type, permissions, size and mtime of each entry.
 *
 * The servers are asked in parallel (xprt_call_start): every server that has more to say has
 * one request in flight, at most RD_INFLIGHT at a time; replies are taken round robin and
 * handed to the filler on the calling thread, and that server's next page is asked for at once.
 * Memory is one page per request in flight. Entries come server after server interleaved by
 * pages, in no particular order overall (chfs.h promises none). Each server pages by its own
 * name cursor, so an entry that exists throughout the listing is listed exactly once.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*filler_t)(void *, const char *, const struct stat *, off_t);

#define RD_INFLIGHT 32
#define RD_REQ_CAP (WIRE_HDR_LEN + 16 + CHFS_PATH_MAX + CHFS_NAME_MAX)
#define RD_REP_CAP (WIRE_HDR_LEN + WIRE_READDIR_MAX + 1024)

struct rdserver {
	const char *addr; /* the server, across member lists (lists live until chfs_term) */
	unsigned idx;     /* its index in the current list */
	int done;         /* 1 listed, 2 skipped (down), -1 refused in this pass */
	char cursor[CHFS_NAME_MAX + 1];
	uint8_t *buf; /* request (RD_REQ_CAP) then reply (RD_REP_CAP) while a call is in flight */
	size_t replen;
	xprt_call_t *call;
};

struct rdlist {
	const char *cp;
	void *buf;
	filler_t filler;
	int stopped;
	struct rdserver *fs;
	unsigned n;
};

/* Ask f for its next page; 0 when the call is in flight (f->call). */
static int rd_start(struct srvlist *s, struct rdlist *l, struct rdserver *f)
{
	if (!f->buf && !(f->buf = malloc(RD_REQ_CAP + RD_REP_CAP)))
		return -ENOMEM;
	struct wenc e;
	wenc_init(&e, f->buf, RD_REQ_CAP);
	wenc_reserve(&e, WIRE_HDR_LEN);
	wenc_str(&e, l->cp);
	wenc_str(&e, f->cursor);
	if (e.err)
		return -ENAMETOOLONG;
	rpc_fill_hdr(f->buf, e.len, WOP_READDIR, s->epoch);
	uint8_t *rep = f->buf + RD_REQ_CAP;
	int rc = client_server_down(s, f->idx)
	                 ? -EHOSTDOWN
	                 : xprt_call_start(chfs_client.x, s->peers[f->idx], f->buf, e.len, rep, RD_REP_CAP,
	                                   rpc_timeout(), &f->call);
	if (rc) {
		f->call = NULL;
		return rpc_status(s, f->idx, rc, rep, 0, NULL);
	}
	return 0;
}

/* Hand one page to the filler; -EIO if malformed. */
static int rd_deliver(struct rdlist *l, struct rdserver *f, struct wdec *d)
{
	char name[CHFS_NAME_MAX + 1];
	uint32_t n = wdec_u32(d), eof = wdec_u32(d);
	for (uint32_t i = 0; i < n && !l->stopped; i++) {
		struct stat st;
		memset(&st, 0, sizeof st);
		wdec_str(d, name, sizeof name);
		st.st_mode = wdec_u32(d);
		st.st_size = (off_t)wdec_u64(d);
		int64_t mt = wdec_i64(d);
		if (d->err || !name[0] || strchr(name, '/'))
			return -EIO;
		st.st_mtim.tv_sec = mt / 1000000000;
		st.st_mtim.tv_nsec = mt % 1000000000;
		st.st_nlink = S_ISDIR(st.st_mode) ? 2 : 1;
		memcpy(f->cursor, name, sizeof f->cursor);
		if (l->filler(l->buf, name, &st, 0))
			l->stopped = 1;
	}
	f->done = eof || n == 0;
	return 0;
}

/* List every server of l not done yet over list s. The first error; -ERESTART if a server
 * refused (its member list is newer: *refused, the others went on), 0 when all are done or
 * the filler stopped. */
static int rd_pass(struct srvlist *s, struct rdlist *l, unsigned *refused)
{
	int first = 0, restart = 0;
	unsigned inflight = 0, next = 0;
	if (!l->n)
		return 0;
	for (unsigned i = 0;; i = (i + 1) % l->n) {
		/* start calls in order, from where the last start left off, up to the bound */
		for (unsigned k = 0; k < l->n && inflight < RD_INFLIGHT && !first && !l->stopped; k++) {
			struct rdserver *f = &l->fs[next];
			next = (next + 1) % l->n;
			if (f->done || f->call)
				continue;
			int rc = rd_start(s, l, f);
			if (rc == 0) {
				inflight++;
			} else if (rc == -ERESTART) {
				f->done = -1; /* not this pass */
				restart = 1, *refused = f->idx;
			} else {
				first = rc;
			}
		}
		if (!inflight)
			break;
		struct rdserver *f = &l->fs[i];
		if (!f->call)
			continue;
		struct wdec d;
		int rc = xprt_call_wait(f->call, &f->replen);
		f->call = NULL;
		inflight--;
		rc = rpc_status(s, f->idx, rc, f->buf + RD_REQ_CAP, f->replen, &d);
		if (rc == 0 && !first && !l->stopped)
			rc = rd_deliver(l, f, &d);
		if (rc == -ERESTART) {
			f->done = -1;
			restart = 1, *refused = f->idx;
		} else if (rc < 0 && !first) {
			first = rc;
		}
		if (f->done) {
			free(f->buf);
			f->buf = NULL;
		}
	}
	for (unsigned i = 0; i < l->n; i++) {
		free(l->fs[i].buf);
		l->fs[i].buf = NULL;
		if (l->fs[i].done < 0)
			l->fs[i].done = 0;
	}
	if (l->stopped)
		return 0;
	return first ? first : restart ? -ERESTART : 0;
}

/* Servers of list s to ask (all, or only index), keeping the progress of those listed over
 * an earlier list (by address): a server listed already is not listed again. */
static int rd_servers(struct srvlist *s, int index, struct rdlist *l)
{
	unsigned n = index >= 0 ? 1 : s->n;
	struct rdserver *fs = calloc(n ? n : 1, sizeof *fs);
	if (!fs)
		return -ENOMEM;
	for (unsigned k = 0; k < n; k++) {
		struct rdserver *f = &fs[k];
		f->idx = index >= 0 ? (unsigned)index : k;
		f->addr = s->addrs[f->idx];
		for (unsigned j = 0; j < l->n; j++)
			if (strcmp(l->fs[j].addr, f->addr) == 0) {
				f->done = l->fs[j].done == 1;
				memcpy(f->cursor, l->fs[j].cursor, sizeof f->cursor);
			}
		if (index < 0 && !f->done && client_server_down(s, f->idx)) {
			/* list what the others hold, and say what is not */
			log_warn("listing /%s without server %s: it is down", l->cp, f->addr);
			f->done = 2;
		}
	}
	free(l->fs);
	l->fs = fs;
	l->n = n;
	return 0;
}

static int readdir_common(const char *path, int index, void *buf, filler_t filler)
{
	PATH_BUF(cp, 1);
	struct srvlist *s;
	struct chfs_md md;
	int rc = !path ? -EFAULT : !cp ? -ENOMEM : path_canonical(path, cp);
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
		return rc;
	struct stat st;
	md_to_stat(&md, cp, &st);
	if (filler(buf, ".", &st, 0) || filler(buf, "..", &st, 0))
		return 0;
	/* A server whose member list is newer than ours refuses (-ERESTART): go on with the
	 * newer list, each server from where it was. */
	struct rdlist l = {.cp = cp, .buf = buf, .filler = filler};
	for (int attempt = 0;; attempt++) {
		unsigned refused = 0;
		if ((rc = rd_servers(s, index, &l)) != 0 || (rc = rd_pass(s, &l, &refused)) != -ERESTART ||
		    attempt >= CLIENT_RETRIES)
			break;
		s = client_list_retry(s, refused, attempt);
		if (index >= (int)s->n)
			break;
	}
	free(l.fs);
	rc = rpc_restart_failed(rc);
	return rc < 0 ? rc : 0;
}

int readdir_all(const char *path, void *buf, filler_t filler)
{
	return readdir_common(path, -1, buf, filler);
}

int chfs_readdir(const char *path, void *buf, filler_t filler)
{
	return set_err(readdir_common(path, -1, buf, filler));
}

int chfs_readdir_index(const char *path, int index, void *buf, filler_t filler)
{
	if (index < 0)
		return set_err(-EINVAL);
	return set_err(readdir_common(path, index, buf, filler));
}
