/*
 * find.c — chfs_find: find(1) evaluated on the servers (WOP_FIND, server/find.c).
 *
 * The client parses the expression once (common/findpred.h; -newer FILE becomes FILE's mtime
 * here), tests the start path itself, then asks every server it was given for the matching
 * entries it owns below the start. The servers work in parallel: each round starts one
 * request per server that has more to say and then waits for all of them, so a query whose
 * result fits in one reply per server costs one round trip to each, concurrently; larger
 * results page on (session + cursor, see server/find_session.h). Replies are handed to the
 * caller's function on the calling thread only. A server that fails is reported (one line)
 * and the others go on; the call then fails with that error after delivering what it found.
 *
 * Entry sizes are the owners' metadata: the writes of other processes count once they are
 * reported (close, fsync), this process's own are reported first (fd_sync_sizes); a
 * local-placement file written through its backing file shows the size last reported.
 */
#define _GNU_SOURCE
#include "client.h"
#include "findpred.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FIND_REQ_CAP (WIRE_HDR_LEN + 3 * 4 + 8 + 2 * CHFS_PATH_MAX + FINDPRED_WIRE_MAX)
#define FIND_REP_CAP (WIRE_HDR_LEN + WIRE_FIND_MAX + 1024)

typedef int (*find_fn)(void *arg, const char *path, const struct stat *st);

struct fserver {
	unsigned idx;
	uint64_t session;
	char cursor[CHFS_PATH_MAX];
	uint8_t req[FIND_REQ_CAP];
	uint8_t rep[FIND_REP_CAP];
	size_t replen;
	xprt_call_t *call;
	int done;
};

struct fquery {
	const char *cp;      /* canonical start */
	const uint8_t *pred; /* encoded */
	size_t predlen;
	const char *prefix; /* the start as the caller wrote it */
	char *out;          /* prefix + "/" + relative path */
	find_fn fn;
	void *arg;
	int stopped;
	struct chfs_find_count *counts;
	int ncounts;
};

static int newer_of(void *arg, const char *file, int64_t *ns)
{
	(void)arg;
	struct stat st;
	if (chfs_stat(file, &st) < 0) {
		if (errno != ENOENT && errno != EINVAL)
			return -errno;
		if (stat(file, &st) < 0)
			return -errno;
	}
	*ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	return 0;
}

static size_t build_request(struct srvlist *s, const struct fquery *q, struct fserver *f)
{
	struct wenc e;
	wenc_init(&e, f->req, sizeof f->req);
	wenc_reserve(&e, WIRE_HDR_LEN);
	wenc_str(&e, q->cp);
	wenc_u64(&e, f->session);
	wenc_str(&e, f->cursor);
	wenc_bytes(&e, q->pred, q->predlen);
	rpc_fill_hdr(f->req, e.len, WOP_FIND, s->epoch);
	return e.err ? 0 : e.len;
}

/* Hand the entries of one reply to the caller; -EIO if the reply is malformed. */
static int deliver(struct fquery *q, struct fserver *f, struct wdec *d)
{
	f->session = wdec_u64(d);
	uint32_t n = wdec_u32(d), eof = wdec_u32(d);
	uint64_t visited = wdec_u64(d);
	if (d->err)
		return -EIO;
	if (q->counts && (int)f->idx < q->ncounts) {
		q->counts[f->idx].matched += n;
		q->counts[f->idx].visited += visited;
	}
	size_t plen = strlen(q->prefix);
	int slash = plen == 0 || q->prefix[plen - 1] != '/';
	if (slash)
		q->out[plen] = '/';
	for (uint32_t i = 0; i < n; i++) {
		char *rel = q->out + plen + (size_t)slash;
		wdec_str(d, rel, CHFS_PATH_MAX);
		struct stat st;
		memset(&st, 0, sizeof st);
		st.st_mode = wdec_u32(d);
		st.st_size = (off_t)wdec_u64(d);
		int64_t mt = wdec_i64(d);
		if (d->err || path_check_canonical(rel, strlen(rel), 0) || strcmp(rel, f->cursor) <= 0)
			return -EIO; /* not a path below the start, or not after the cursor: no progress */
		st.st_mtim.tv_sec = mt / 1000000000;
		st.st_mtim.tv_nsec = mt % 1000000000;
		st.st_nlink = S_ISDIR(st.st_mode) ? 2 : 1;
		strcpy(f->cursor, rel);
		if (!q->stopped && q->fn(q->arg, q->out, &st))
			q->stopped = 1;
	}
	if (wdec_finish(d))
		return -EIO;
	f->done = eof || q->stopped;
	if (!f->done && n == 0)
		return -EIO; /* a server that neither ends nor moves on would loop forever */
	return 0;
}

/* Ask servers fs[0..n) in rounds until each has said everything; the first error. */
static int ask_servers(struct srvlist *s, struct fquery *q, struct fserver *fs, unsigned n)
{
	int first = 0;
	for (;;) {
		unsigned started = 0;
		for (unsigned i = 0; i < n; i++) {
			struct fserver *f = &fs[i];
			f->call = NULL;
			if (f->done)
				continue;
			size_t len = build_request(s, q, f);
			int rc = len ? xprt_call_start(chfs_client.x, s->peers[f->idx], f->req, len, f->rep,
			                               sizeof f->rep, rpc_timeout(), &f->call)
			             : -ENAMETOOLONG;
			if (rc) {
				f->call = NULL;
				f->done = 1;
				rc = rpc_status(s, f->idx, rc, f->rep, 0, NULL);
				first = first ? first : rc;
				continue;
			}
			started++;
		}
		if (!started)
			return first;
		for (unsigned i = 0; i < n; i++) {
			struct fserver *f = &fs[i];
			if (!f->call)
				continue;
			struct wdec d;
			int rc = xprt_call_wait(f->call, &f->replen);
			rc = rpc_status(s, f->idx, rc, f->rep, f->replen, &d);
			if (rc == 0)
				rc = deliver(q, f, &d);
			if (rc) {
				if (rc == -EIO)
					log_err("chfind: server %s failed or sent a malformed reply",
					        s->addrs[f->idx]);
				f->done = 1;
				first = first ? first : rc;
			}
		}
	}
}

/* Test the start itself (its basename as written, "/" for the root). */
static int test_start(struct fquery *q, const struct findpred *p, const struct stat *st)
{
	size_t len = strlen(q->prefix);
	while (len > 1 && q->prefix[len - 1] == '/')
		len--;
	const char *name = q->prefix;
	char base[CHFS_NAME_MAX + 2];
	if (len > 1 || q->prefix[0] != '/') {
		size_t b = len;
		while (b > 0 && q->prefix[b - 1] != '/')
			b--;
		if (len - b >= sizeof base)
			return 0;
		memcpy(base, q->prefix + b, len - b);
		base[len - b] = '\0';
		name = base;
	}
	int64_t mt = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	if (findpred_match(p, name, st->st_mode, (uint64_t)st->st_size, mt) && q->fn(q->arg, q->prefix, st))
		q->stopped = 1;
	return 0;
}

static int find_run(const char *path, int argc, char *const argv[], int rank, int nranks, struct fquery *q,
                    struct findpred *p, uint8_t *pred, char *cp)
{
	const char *bad = NULL;
	int rc = findpred_parse(argc, argv, newer_of, NULL, p, &bad);
	if (rc) {
		if (bad && rc == -EINVAL)
			log_err("chfind: %s%s: unknown test or malformed value",
			        bad[0] ? "" : "missing value after ", bad[0] ? bad : argv[argc - 1]);
		else if (bad)
			log_err("chfind: %s: %s", bad, strerror(-rc));
		return rc == -ENOENT ? -ENOENT : rc;
	}
	int len = findpred_encode(p, pred, FINDPRED_WIRE_MAX);
	if (len < 0)
		return len;
	struct stat st;
	if ((rc = path_canonical(path, cp)) || chfs_lstat(path, &st) < 0)
		return rc ? rc : -errno;
	q->cp = cp;
	q->pred = pred;
	q->predlen = (size_t)len;
	q->prefix = path;
	if (rank == 0)
		test_start(q, p, &st);
	if (!S_ISDIR(st.st_mode) || q->stopped)
		return 0;
	strcpy(q->out, path);
	struct srvlist *s;
	if ((rc = client_begin(&s)) || (rc = fd_sync_sizes(0)))
		return rc;
	unsigned n = 0;
	struct fserver *fs = calloc(s->n ? s->n : 1, sizeof *fs);
	if (!fs)
		return -ENOMEM;
	int first = 0;
	for (unsigned i = 0; i < s->n; i++) {
		if (i % (unsigned)nranks != (unsigned)rank)
			continue;
		if (client_server_down(s, i)) {
			log_err("chfind: server %s is down: its entries are missing", s->addrs[i]);
			first = first ? first : -EIO;
			continue;
		}
		fs[n++].idx = i;
	}
	rc = ask_servers(s, q, fs, n);
	free(fs);
	return rc ? rc : first;
}

int chfs_find(const char *path, int argc, char *const argv[], int rank, int nranks, find_fn fn, void *arg,
              struct chfs_find_count *counts, int ncounts)
{
	if (!path || !fn || argc < 0 || (argc && !argv) || nranks < 1 || rank < 0 || rank >= nranks)
		return set_err(-EINVAL);
	struct findpred *p = malloc(sizeof *p);
	uint8_t *pred = malloc(FINDPRED_WIRE_MAX);
	char *cp = malloc(CHFS_PATH_MAX);
	struct fquery q = {.fn = fn, .arg = arg, .counts = counts, .ncounts = counts ? ncounts : 0};
	q.out = malloc(strlen(path) + 2 + CHFS_PATH_MAX);
	int rc = -ENOMEM;
	if (counts && ncounts > 0)
		memset(counts, 0, (size_t)ncounts * sizeof *counts);
	if (p && pred && cp && q.out)
		rc = find_run(path, argc, argv, rank, nranks, &q, p, pred, cp);
	free(p);
	free(pred);
	free(cp);
	free(q.out);
	return set_err(rc);
}
