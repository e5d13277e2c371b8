/*
 * data_bcast.c — requests every server that may hold chunks of a file takes (its home alone for
 * a local-placement file): cut them (truncate), drop them (the file is gone), forget the name
 * they would be flushed under (the last name went while descriptors keep the data). Each is
 * placed again with a newer list while a server says the list changed (they are idempotent).
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Servers that may hold chunks of md's file. */
static unsigned data_servers(struct srvlist *s, const struct chfs_md *md, unsigned *idx)
{
	if (md->flags & MD_LOCAL) {
		int h = client_server_index(s, md->home);
		if (h < 0)
			return 0;
		idx[0] = (unsigned)h;
		return 1;
	}
	for (unsigned i = 0; i < s->n; i++)
		idx[i] = i;
	return s->n;
}

/* A truncate cuts every server's chunks or none: a server down would keep its chunks past the
 * new size, and a later extension of the file would show them in the hole; one that fails after
 * the others cut would leave the bytes past the new size gone with the size unchanged. So a cut
 * over several servers first checks that each answers (DATA_STAT: reads, changes nothing): one
 * known down, or silent within the RPC timeout, fails the truncate (EIO) before any server cut,
 * and the caller changes no size (set_size cuts first). A truncate to the end its caller knows
 * (the owner's size, this process's writes) or past it skips the round: only bytes another
 * process wrote meanwhile can be past it. The client's list alone is not enough:
 * it comes from any member, which may not have found a dead server down yet. Left: a server
 * that dies between its answer and the cut (microseconds, not the detector's second or two). */
static int cut_needs_all(struct srvlist *s, struct rpc_fanout *f, unsigned op, const struct chfs_md *md,
                         uint64_t len, uint64_t known_end)
{
	if (op != WOP_DATA_TRUNCATE)
		return 0;
	for (unsigned i = 0; i < f->n; i++)
		if (client_server_down(s, f->idx[i])) {
			log_err("truncate: server %s is down: nothing cut, size unchanged",
			        s->addrs[f->idx[i]]);
			return -EIO;
		}
	if (f->n < 2 || len >= known_end)
		return 0; /* one server cuts or fails alone; no byte known is past len */
	uint8_t msg[WIRE_HDR_LEN + 32];
	struct wenc e;
	wenc_init(&e, msg, sizeof msg);
	wenc_reserve(&e, WIRE_HDR_LEN);
	wenc_u64(&e, md->fileid);
	wenc_u64(&e, 0); /* size, mtime, ctime of the metadata: none, only the answer counts */
	wenc_i64(&e, 0);
	wenc_i64(&e, 0);
	int rc = rpc_fanout_call(s, f, msg, e.len, WOP_DATA_STAT);
	for (unsigned i = 0; rc && rc != -ENOMEM && i < f->n; i++)
		if (f->rcs[i]) {
			log_err("truncate: server %s did not answer (%s): nothing cut, size unchanged",
			        s->addrs[f->idx[i]], strerror(-f->rcs[i]));
			return -EIO;
		}
	return rc;
}

/* A removal (or the loss of the last name) that did not reach a server holding chunks of a
 * file with a backend: that server keeps them dirty under the removed name and, once restarted
 * or resumed, would flush them there, over whatever file has the name by then. A server that
 * got it is told (WOP_UNNAMED_OWED) and owes that one the file's empty backend name, delivered
 * before it flushes again (server/relink_owed.c). */
static int owe_unnamed(struct srvlist *s, unsigned witness, uint64_t fileid, const char *addr)
{
	RPC_DECL(r);
	rpc_begin(&r, WOP_UNNAMED_OWED);
	wenc_u64(&r.e, fileid);
	wenc_str(&r.e, addr);
	return rpc_call(s, witness, &r);
}

static int asked(const struct rpc_fanout *f, unsigned idx)
{
	for (unsigned i = 0; i < f->n; i++)
		if (f->idx[i] == idx)
			return 1;
	return 0;
}

/* A server that got f's request (or, for a local file whose home missed it, one up that was
 * not asked); -1 if none. */
static int witness_of(struct srvlist *s, const struct rpc_fanout *f)
{
	for (unsigned i = 0; i < f->n; i++)
		if (f->rcs[i] == 0)
			return (int)f->idx[i];
	for (unsigned i = 0; i < s->n; i++)
		if (!client_server_down(s, i) && !asked(f, i))
			return (int)i;
	return -1;
}

static void tell_missed(struct srvlist *s, const struct chfs_md *md, const struct rpc_fanout *f)
{
	int witness = witness_of(s, f);
	for (unsigned i = 0; i < f->n; i++) {
		if (f->rcs[i] == 0)
			continue;
		const char *addr = s->addrs[f->idx[i]];
		int rc = witness < 0 ? -EHOSTDOWN : owe_unnamed(s, (unsigned)witness, md->fileid, addr);
		if (rc)
			log_err("file %016llx lost its last name: server %s did not get it, and no other server "
			        "noted it for that one (%s); %s may flush the file's chunks to the backend under "
			        "the removed name",
			        (unsigned long long)md->fileid, addr, strerror(-rc), addr);
	}
}

/* A DATA_REMOVE that missed a server leaves the file's chunks there (a killed server keeps
 * them on its disk across a restart): a server that got it lists the file as an orphan due at
 * once, and sends DATA_REMOVE to every member until all removed it (server/orphans.c). */
static void owe_removal(struct srvlist *s, const struct chfs_md *md, const struct rpc_fanout *f)
{
	int witness = witness_of(s, f), rc = -EHOSTDOWN;
	if (witness >= 0) {
		RPC_DECL(r);
		rpc_begin(&r, WOP_ORPHAN_DUE);
		wenc_u64(&r.e, md->fileid);
		wenc_u64(&r.e, md->size);
		rc = rpc_call(s, (unsigned)witness, &r);
	}
	for (unsigned i = 0; i < f->n; i++)
		if (f->rcs[i])
			chfs_log(rc ? LOG_ERR : LOG_INFO,
			         "file %016llx removed: server %s did not get it (%s); %s",
			         (unsigned long long)md->fileid, s->addrs[f->idx[i]], strerror(-f->rcs[i]),
			         rc ? "no other server noted it either: its chunks there stay"
			            : "another server removes them there when it is back");
}

/* last: no attempt follows, so servers that said ERESTART missed the request for good. */
static int data_bcast_once(struct srvlist *s, const struct chfs_md *md, unsigned op, uint64_t len,
                           uint64_t known_end, int last, unsigned *refused)
{
	struct rpc_fanout f;
	int rc = rpc_fanout_init(&f, s, WIRE_HDR_LEN + 64);
	if (rc == 0) {
		uint8_t msg[WIRE_HDR_LEN + 32];
		struct wenc e;
		wenc_init(&e, msg, sizeof msg);
		wenc_reserve(&e, WIRE_HDR_LEN);
		wenc_u64(&e, md->fileid);
		if (op == WOP_DATA_TRUNCATE)
			wenc_u64(&e, len);
		if (op == WOP_DATA_UNNAMED) { /* the placement tag: a server without an entry makes one */
			wenc_u32(&e, md->pkey);
			wenc_u32(&e, md->chunk_size);
			wenc_u32(&e, md->flags & MD_FLAGS_ALL);
		}
		f.n = data_servers(s, md, f.idx);
		rc = f.n ? cut_needs_all(s, &f, op, md, len, known_end) : -EIO;
		if (rc == 0)
			rc = rpc_fanout_call(s, &f, msg, e.len, op);
		*refused = rpc_multi_refused(f.idx, f.n, f.rcs);
		int missed = rc && (rc != -ERESTART || last) && f.n; /* (-ERESTART: sent again) */
		if (missed && (md->flags & MD_FLUSH) && (op == WOP_DATA_REMOVE || op == WOP_DATA_UNNAMED))
			tell_missed(s, md, &f);
		if (missed && op == WOP_DATA_REMOVE)
			owe_removal(s, md, &f);
	}
	rpc_fanout_free(&f);
	return rc;
}

/* Placed again with the newer list while a server says the list changed (idempotent). */
static int data_bcast(struct srvlist *s, const struct chfs_md *md, unsigned op, uint64_t len,
                      uint64_t known_end)
{
	int rc = -ERESTART;
	for (int attempt = 0; attempt < CLIENT_RETRIES && rc == -ERESTART; attempt++) {
		unsigned refused = 0;
		int last = attempt == CLIENT_RETRIES - 1;
		if ((rc = data_bcast_once(s, md, op, len, known_end, last, &refused)) == -ERESTART)
			s = client_list_retry(s, refused, attempt);
	}
	return rpc_restart_failed(rc);
}

int data_truncate_all(struct srvlist *s, const struct chfs_md *md, uint64_t len, uint64_t known_end)
{
	return data_bcast(s, md, WOP_DATA_TRUNCATE, len, known_end);
}

int data_remove_all(struct srvlist *s, const struct chfs_md *md)
{
	return data_bcast(s, md, WOP_DATA_REMOVE, 0, 0);
}

int data_unnamed_all(struct srvlist *s, const struct chfs_md *md)
{
	return data_bcast(s, md, WOP_DATA_UNNAMED, 0, 0);
}
