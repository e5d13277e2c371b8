/*
 * rebalance.c — the taking side of a rebalance and the previous owner's MIG_* handlers (see
 * rebalance.h for the protocol). State: the two rings of the last change, which previous
 * members said DONE, the set of keys already taken (or found absent) during this change, the
 * data operations that cut what is taken later, and counters for `chlist -s`. The state that
 * must survive a restart (ring epoch, previous list, DONE members, whether this server still
 * has keys to hand over, the data operations that cut what is taken later) is kept in
 * DIR/rebalance, written whole through statefile.c.
 */
#define _GNU_SOURCE
#include "rebalance.h"
#include "chfsd.h"

#include "log.h"
#include "backend.h"
#include "placement.h"
#include "statefile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAKE_LOCKS 256
#define MIG_TIMEOUT_MS 10000

struct fence {
	uint64_t fileid, len; /* len UINT64_MAX: removed */
};

struct rebalance {
	pthread_mutex_t lock; /* everything below except the take locks and counters */
	uint64_t ring_epoch;
	struct ring *prev_ring;
	struct wire_member *prev; /* previous members, ring index order */
	unsigned char *done;      /* per previous member: said DONE (or is this server) */
	unsigned nprev;
	int self_prev;   /* index of this server in prev, -1 if new */
	int in_open;     /* some previous member has not said DONE */
	uint64_t *taken; /* open-addressing set of key hashes, 0 = empty */
	size_t ntaken, captaken;
	struct fence *fences;
	size_t nfences, capfences;
	pthread_mutex_t take[TAKE_LOCKS];
	atomic_uint_fast64_t entries_in, chunks_in, bytes_in, entries_out, chunks_out, bytes_out;
};

/* ---- persistence: DIR/rebalance = "ring_epoch\nprev list\ndone ids\nout_pending\nfences\n" ----
 * fences: "fileid:len" (hex, decimal; len "-": removed), comma-joined: the data operations of
 * the open window, which cut what is taken later also after a restart (a chunk a truncate cut
 * or a remove dropped must not come back from its previous owner). */

static int put_state(FILE *f, void *arg)
{
	struct chfsd *d = arg;
	struct rebalance *rb = d->rb;
	fprintf(f, "%llu\n", (unsigned long long)rb->ring_epoch);
	for (unsigned i = 0; i < rb->nprev; i++)
		fprintf(f, "%s%s=%s", i ? "," : "", rb->prev[i].id, rb->prev[i].addr);
	fputc('\n', f);
	for (unsigned i = 0, k = 0; i < rb->nprev; i++)
		if (rb->done[i] && (int)i != rb->self_prev)
			fprintf(f, "%s%s", k++ ? "," : "", rb->prev[i].id);
	fprintf(f, "\n%d\n", atomic_load(&d->handover_pending));
	for (size_t i = 0; i < rb->nfences; i++) {
		const struct fence *c = &rb->fences[i];
		fprintf(f, "%s%" PRIx64 ":", i ? "," : "", c->fileid);
		if (c->len == UINT64_MAX)
			fputc('-', f);
		else
			fprintf(f, "%" PRIu64, c->len);
	}
	fputc('\n', f);
	return 0;
}

/* DIR/rebalance (rb->lock held). */
static void save(struct chfsd *d) { statefile_write(st_rootfd(d->st), "rebalance", 0, put_state, d); }

/* What DIR/rebalance said at start-up, applied when the pool's ring epoch matches it. */
static struct {
	uint64_t ring_epoch;
	char *done;
	int out_pending;
	struct fence *fences;
	size_t nfences;
} saved;

/* The fences line of DIR/rebalance into saved (a malformed item ends it). */
static void load_fences(const char *line)
{
	size_t n = *line != '\0';
	for (const char *c = line; *c; c++)
		n += *c == ',';
	if (!n || !(saved.fences = calloc(n, sizeof *saved.fences)))
		return;
	for (const char *c = line; *c && *c != '\n';) {
		char *end;
		struct fence fc = {.fileid = strtoull(c, &end, 16)};
		if (*end != ':')
			break;
		c = end + 1;
		if (*c == '-') {
			fc.len = UINT64_MAX;
			end = (char *)c + 1;
		} else {
			fc.len = strtoull(c, &end, 10);
			if (end == c)
				break;
		}
		saved.fences[saved.nfences++] = fc;
		if (*end != ',')
			break;
		c = end + 1;
	}
}

static void load(struct chfsd *d)
{
	FILE *f = NULL;
	int fd = openat(st_rootfd(d->st), "rebalance", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !(f = fdopen(fd, "r")))
		close(fd);
	if (!f)
		return;
	char *line = NULL;
	size_t cap = 0;
	if (getline(&line, &cap, f) > 0)
		saved.ring_epoch = strtoull(line, NULL, 10);
	ssize_t n = getline(&line, &cap, f); /* previous list: comes with the pool's list */
	if (n >= 0 && (n = getline(&line, &cap, f)) >= 0) {
		line[strcspn(line, "\n")] = '\0';
		saved.done = strdup(line);
		if (getline(&line, &cap, f) > 0)
			saved.out_pending = atoi(line);
		if (getline(&line, &cap, f) > 0)
			load_fences(line);
	}
	free(line);
	fclose(f);
}

int rebalance_init(struct chfsd *d)
{
	struct rebalance *rb = calloc(1, sizeof *rb);
	if (!rb)
		return -ENOMEM;
	pthread_mutex_init(&rb->lock, NULL);
	for (int i = 0; i < TAKE_LOCKS; i++)
		pthread_mutex_init(&rb->take[i], NULL);
	rb->self_prev = -1;
	d->rb = rb;
	load(d);
	return 0;
}

/* ---- the set of keys taken during this change ---- */

static uint64_t entry_key(const char *path) { return chfs_hash_str(path) | 1; }

static uint64_t chunk_key(uint64_t fileid, uint64_t index)
{
	uint64_t v[2] = {fileid, index};
	return chfs_hash(v, sizeof v) | 1;
}

static int taken_has(struct rebalance *rb, uint64_t k)
{
	if (!rb->captaken)
		return 0;
	for (size_t i = k % rb->captaken;; i = (i + 1) % rb->captaken) {
		if (rb->taken[i] == k)
			return 1;
		if (rb->taken[i] == 0)
			return 0;
	}
}

static void taken_add(struct rebalance *rb, uint64_t k)
{
	if (2 * (rb->ntaken + 1) > rb->captaken) {
		size_t nc = rb->captaken ? 2 * rb->captaken : 1024;
		uint64_t *nt = calloc(nc, sizeof *nt);
		if (!nt)
			return; /* not remembered: asked for again, which is harmless */
		for (size_t i = 0; i < rb->captaken; i++)
			if (rb->taken[i])
				for (size_t j = rb->taken[i] % nc;; j = (j + 1) % nc)
					if (!nt[j]) {
						nt[j] = rb->taken[i];
						break;
					}
		free(rb->taken);
		rb->taken = nt;
		rb->captaken = nc;
	}
	for (size_t i = k % rb->captaken;; i = (i + 1) % rb->captaken) {
		if (rb->taken[i] == k)
			return;
		if (!rb->taken[i]) {
			rb->taken[i] = k;
			rb->ntaken++;
			return;
		}
	}
}

/* ---- the rings ---- */

static int build_ring(const struct wire_member *m, unsigned n, unsigned vnodes, struct ring **out)
{
	const char **ids = calloc(n ? n : 1, sizeof *ids);
	if (!ids)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		ids[i] = m[i].id;
	int rc = ring_build(ids, n, vnodes, out);
	free(ids);
	return rc;
}

static void close_window(struct chfsd *d)
{
	struct rebalance *rb = d->rb;
	rb->in_open = 0;
	free(rb->taken);
	rb->taken = NULL;
	rb->ntaken = rb->captaken = 0;
	free(rb->fences);
	rb->fences = NULL;
	rb->nfences = rb->capfences = 0;
}

static int all_done(const struct rebalance *rb)
{
	for (unsigned i = 0; i < rb->nprev; i++)
		if (!rb->done[i])
			return 0;
	return 1;
}

void rebalance_ring_changed(struct chfsd *d)
{
	struct rebalance *rb = d->rb;
	uint64_t ring_epoch;
	unsigned vnodes;
	char *prev = malloc(WIRE_LIST_MAX);
	if (!prev)
		return;
	members_get_ring(&d->mem, &ring_epoch, prev, WIRE_LIST_MAX, &vnodes);
	pthread_mutex_lock(&rb->lock);
	if (ring_epoch == rb->ring_epoch) {
		pthread_mutex_unlock(&rb->lock);
		free(prev);
		return;
	}
	if (rb->in_open || atomic_load(&d->handover_pending))
		log_warn("rebalance: the ring changed again (epoch %llu) before the last rebalance "
		         "finished; keys not yet moved stay where they are",
		         (unsigned long long)ring_epoch);
	close_window(d);
	ring_free(rb->prev_ring);
	rb->prev_ring = NULL;
	free(rb->prev);
	free(rb->done);
	rb->prev = NULL;
	rb->done = NULL;
	rb->nprev = 0;
	rb->self_prev = -1;
	rb->ring_epoch = ring_epoch;
	int n = *prev ? wire_list_parse(prev, strlen(prev), NULL, WIRE_LIST_MAX) : 0;
	if (n > 0 && (rb->prev = calloc((size_t)n, sizeof *rb->prev)) && (rb->done = calloc((size_t)n, 1)) &&
	    wire_list_parse(prev, strlen(prev), rb->prev, (unsigned)n) == n &&
	    build_ring(rb->prev, (unsigned)n, vnodes, &rb->prev_ring) == 0) {
		rb->nprev = (unsigned)n;
		for (unsigned i = 0; i < rb->nprev; i++)
			if (strcmp(rb->prev[i].id, d->id) == 0) {
				rb->self_prev = (int)i;
				rb->done[i] = 1;
			}
		int resumed = saved.ring_epoch == ring_epoch;
		if (resumed && saved.done)
			for (unsigned i = 0; i < rb->nprev; i++)
				if (strstr(saved.done, rb->prev[i].id))
					rb->done[i] = 1;
		if (resumed && saved.nfences) { /* the window this server was restarted in */
			rb->fences = saved.fences;
			rb->nfences = rb->capfences = saved.nfences;
			saved.fences = NULL;
			saved.nfences = 0;
		}
		char *cur = malloc(WIRE_LIST_MAX);
		unsigned vn;
		if (cur)
			members_get(&d->mem, cur, WIRE_LIST_MAX, &vn);
		/* A server that left takes nothing. */
		rb->in_open = cur && strstr(cur, d->id) && !all_done(rb);
		free(cur);
		atomic_store(&d->handover_pending, rb->self_prev >= 0 && (!resumed || saved.out_pending));
		log_notice("rebalance: ring epoch %llu, %u previous members; %s%s",
		           (unsigned long long)ring_epoch, rb->nprev, rb->in_open ? "taking over keys" : "",
		           atomic_load(&d->handover_pending)
		                   ? (rb->in_open ? ", handing over keys" : "handing over keys")
		                   : "");
	} else {
		free(rb->prev);
		free(rb->done);
		rb->prev = NULL;
		rb->done = NULL;
		atomic_store(&d->handover_pending, 0);
	}
	save(d);
	int open = rb->in_open;
	pthread_mutex_unlock(&rb->lock);
	free(prev);
	fastpath_publish(ring_epoch, open); /* no direct access with the old ring runs after this */
	handover_kick(d);
}

void rebalance_publish(struct chfsd *d)
{
	pthread_mutex_lock(&d->rb->lock);
	int open = d->rb->in_open;
	pthread_mutex_unlock(&d->rb->lock);
	fastpath_publish(members_ring_epoch(&d->mem), open);
}

int rebalance_active(struct chfsd *d)
{
	pthread_mutex_lock(&d->rb->lock);
	int a = d->rb->in_open;
	pthread_mutex_unlock(&d->rb->lock);
	return a || atomic_load(&d->handover_pending);
}

int rebalance_set_done(struct chfsd *d, uint64_t ring_epoch, const char *id)
{
	struct rebalance *rb = d->rb;
	pthread_mutex_lock(&rb->lock);
	if (ring_epoch > rb->ring_epoch) {
		/* From a ring this server has not installed yet (it is still joining): the sender
		 * tries again. */
		pthread_mutex_unlock(&rb->lock);
		return -EAGAIN;
	}
	if (ring_epoch == rb->ring_epoch) {
		for (unsigned i = 0; i < rb->nprev; i++)
			if (strcmp(rb->prev[i].id, id) == 0 && !rb->done[i]) {
				rb->done[i] = 1;
				log_info("rebalance: %s handed over everything", rb->prev[i].addr);
			}
		if (rb->in_open && all_done(rb)) {
			close_window(d);
			fastpath_publish(ring_epoch, 0);
			log_notice("rebalance: took over every key of ring epoch %llu (%llu entries, %llu "
			           "chunks, %llu bytes in so far)",
			           (unsigned long long)ring_epoch,
			           (unsigned long long)atomic_load(&rb->entries_in),
			           (unsigned long long)atomic_load(&rb->chunks_in),
			           (unsigned long long)atomic_load(&rb->bytes_in));
		}
		save(d);
	}
	pthread_mutex_unlock(&rb->lock);
	return 0;
}

void rebalance_saved(struct chfsd *d)
{
	pthread_mutex_lock(&d->rb->lock);
	save(d);
	pthread_mutex_unlock(&d->rb->lock);
}

/* "ADDR(ID)" of the first previous member that has not said DONE (",+N" more), else of the
 * member this server's handover is stuck at; "" if none. */
static void waiting_for(struct chfsd *d, char *buf, size_t size)
{
	struct rebalance *rb = d->rb;
	unsigned more = 0;
	buf[0] = '\0';
	pthread_mutex_lock(&rb->lock);
	for (unsigned i = 0; rb->in_open && i < rb->nprev; i++)
		if (rb->done[i])
			continue;
		else if (!buf[0])
			snprintf(buf, size, "%s(%s)", rb->prev[i].addr, rb->prev[i].id);
		else
			more++;
	pthread_mutex_unlock(&rb->lock);
	size_t n = strlen(buf);
	if (more)
		snprintf(buf + n, size - n, ",+%u", more);
	else if (!n && atomic_load(&d->handover_pending))
		handover_blocked(buf, size);
}

void rebalance_status(struct chfsd *d, char *buf, size_t size)
{
	struct rebalance *rb = d->rb;
	int active = rebalance_active(d);
	pthread_mutex_lock(&rb->lock);
	unsigned long long ring_epoch = rb->ring_epoch;
	pthread_mutex_unlock(&rb->lock);
	char who[WIRE_ADDR_MAX + WIRE_ID_LEN + 16];
	waiting_for(d, who, sizeof who);
	snprintf(buf, size,
	         "id=%s epoch=%llu ring_epoch=%llu rebalance=%s entries_in=%llu chunks_in=%llu bytes_in=%llu "
	         "entries_out=%llu chunks_out=%llu bytes_out=%llu",
	         d->id, (unsigned long long)members_epoch(&d->mem), ring_epoch, active ? "active" : "idle",
	         (unsigned long long)atomic_load(&rb->entries_in),
	         (unsigned long long)atomic_load(&rb->chunks_in),
	         (unsigned long long)atomic_load(&rb->bytes_in),
	         (unsigned long long)atomic_load(&rb->entries_out),
	         (unsigned long long)atomic_load(&rb->chunks_out),
	         (unsigned long long)atomic_load(&rb->bytes_out));
	size_t n = strlen(buf);
	if (who[0])
		snprintf(buf + n, size - n, " waiting_for=%s", who);
}

/* Previous owner of key if a take is needed: its address into addr and 1, else 0; -EIO if
 * that owner is known down (the request fails at once instead of waiting for a timeout). */
static int prev_owner(struct chfsd *d, uint64_t ringkey, char *addr, size_t size)
{
	struct rebalance *rb = d->rb;
	char id[WIRE_ID_LEN + 1] = "";
	int need = 0;
	pthread_mutex_lock(&rb->lock);
	if (rb->in_open && rb->prev_ring) {
		unsigned o = ring_owner(rb->prev_ring, ringkey);
		if (!rb->done[o]) {
			snprintf(addr, size, "%s", rb->prev[o].addr);
			snprintf(id, sizeof id, "%s", rb->prev[o].id);
			need = 1;
		}
	}
	pthread_mutex_unlock(&rb->lock);
	if (need && members_is_down(&d->mem, id)) {
		log_info("rebalance: %s, the previous owner of a key, is down", addr);
		return -EIO;
	}
	return need;
}

static int is_taken(struct rebalance *rb, uint64_t k)
{
	pthread_mutex_lock(&rb->lock);
	int t = !rb->in_open || taken_has(rb, k);
	pthread_mutex_unlock(&rb->lock);
	return t;
}

static void mark_taken(struct rebalance *rb, uint64_t k)
{
	pthread_mutex_lock(&rb->lock);
	if (rb->in_open)
		taken_add(rb, k);
	pthread_mutex_unlock(&rb->lock);
}

/* ---- taking an entry ---- */

int rebalance_take_entry(struct chfsd *d, const char *path)
{
	struct rebalance *rb = d->rb;
	char addr[WIRE_ADDR_MAX];
	int need =
	        *path ? prev_owner(d, placement_chunk_key(placement_new_key(path), 0), addr, sizeof addr) : 0;
	if (need <= 0)
		return need;
	uint64_t k = entry_key(path);
	pthread_mutex_t *l = &rb->take[k % TAKE_LOCKS];
	pthread_mutex_lock(l);
	int rc = 0;
	if (!is_taken(rb, k)) {
		size_t cap = WIRE_HDR_LEN + 2 * CHFS_PATH_MAX + 1024;
		uint8_t *msg = malloc(2 * cap), *rep = msg + cap;
		struct chfs_md *md = malloc(sizeof *md);
		struct wenc e;
		struct wdec b;
		rc = msg && md ? 0 : -ENOMEM;
		if (rc == 0) {
			wenc_init(&e, msg, cap);
			chfsd_req_hdr(d, &e, WOP_MIG_GET_ENTRY);
			wenc_str(&e, path);
			rc = chfsd_call(d, addr, &e, rep, cap, &b, MIG_TIMEOUT_MS);
		}
		uint32_t found = 0;
		if (rc == 0) {
			found = wdec_u32(&b);
			if (found)
				wdec_md(&b, md);
			rc = wdec_finish(&b) ? -EIO : 0;
		}
		if (rc == 0 && found) {
			rc = st_adopt(d->st, path, md);
			if (rc == -EEXIST)
				rc = 0; /* taken before, its DROP got lost: the copy here is the one */
			if (rc == 0) {
				wenc_init(&e, msg, cap);
				chfsd_req_hdr(d, &e, WOP_MIG_DROP_ENTRY);
				wenc_str(&e, path);
				wenc_u64(&e, md->fileid);
				rc = chfsd_call(d, addr, &e, rep, cap, NULL, MIG_TIMEOUT_MS);
			}
			if (rc == 0)
				atomic_fetch_add(&rb->entries_in, 1);
		}
		if (rc == 0)
			mark_taken(rb, k);
		else
			log_err("rebalance: cannot take /%s from %s: %s", path, addr,
			        strerror(rc < 0 ? -rc : EIO));
		free(msg);
		free(md);
	}
	pthread_mutex_unlock(l);
	return rc ? -EIO : 0;
}

/* ---- taking a chunk ---- */

/* Cut applied to data taken for fileid (UINT64_MAX: none; 0 with removed: take nothing). */
static uint64_t fence_of(struct rebalance *rb, uint64_t fileid, int *removed)
{
	uint64_t len = UINT64_MAX;
	*removed = 0;
	pthread_mutex_lock(&rb->lock);
	for (size_t i = 0; i < rb->nfences; i++)
		if (rb->fences[i].fileid == fileid) {
			if (rb->fences[i].len == UINT64_MAX)
				*removed = 1;
			else if (rb->fences[i].len < len)
				len = rb->fences[i].len;
		}
	pthread_mutex_unlock(&rb->lock);
	return len;
}

/* Store a piece taken from the previous owner at off of the local backing file. A piece of
 * zeros is a hole there (never written, or punched when this server took the chunk before):
 * it only extends the file. Writing it would wipe what a client wrote here since that take
 * when the take is asked again — the set of taken keys does not survive a restart, so a server
 * restarted while its rebalance is open takes every chunk it touches once more. Data here is
 * never older than a hole there: a chunk is written here only after it was taken (and
 * punched there), and the previous owner writes no chunk after it installed the new ring. */
static int store_piece(int fd, const uint8_t *data, uint64_t n, uint64_t off)
{
	if (n && !data[0] && !memcmp(data, data + 1, (size_t)n - 1)) {
		struct stat sb;
		if (fstat(fd, &sb) != 0)
			return -errno;
		if ((uint64_t)sb.st_size < off + n && ftruncate(fd, (off_t)(off + n)) != 0)
			return -errno;
		return 0;
	}
	for (uint64_t w = 0; w < n;) {
		ssize_t k = pwrite(fd, data + w, (size_t)(n - w), (off_t)(off + w));
		if (k < 0)
			return -errno;
		w += (uint64_t)k;
	}
	return 0;
}

static int take_chunk(struct chfsd *d, const char *addr, uint64_t fileid, const struct wire_tag *tag,
                      uint64_t index, uint8_t *msg, size_t cap)
{
	struct rebalance *rb = d->rb;
	uint8_t *rep = msg + cap;
	uint64_t start = index * tag->chunk_size, end = start + tag->chunk_size;
	int removed, fd = -1, rc = 0, any = 0;
	uint64_t cut = fence_of(rb, fileid, &removed), moved = 0;
	for (uint64_t off = start; off < end && rc == 0;) {
		uint64_t want = end - off < WIRE_MIG_PIECE ? end - off : WIRE_MIG_PIECE;
		struct wenc e;
		struct wdec b;
		wenc_init(&e, msg, cap);
		chfsd_req_hdr(d, &e, WOP_MIG_GET_DATA);
		wenc_u64(&e, fileid);
		wenc_u64(&e, off);
		wenc_u64(&e, want);
		if ((rc = chfsd_call(d, addr, &e, rep, cap, &b, MIG_TIMEOUT_MS)) != 0)
			break;
		uint32_t found = wdec_u32(&b);
		uint64_t fsize = wdec_u64(&b);
		size_t n = 0;
		const uint8_t *data = wdec_bytes(&b, WIRE_MIG_PIECE, &n);
		if (wdec_finish(&b) || n > want) {
			rc = -EIO;
			break;
		}
		if (!found)
			break; /* no file there, or nothing at or after off in this chunk */
		any = 1;
		uint64_t keep = n;
		if (removed)
			keep = 0;
		else if (cut != UINT64_MAX)
			keep = off >= cut ? 0 : (cut - off < keep ? cut - off : keep);
		if (keep) {
			if (fd < 0 && (fd = st_data_open_tagged(d->st, fileid, tag)) < 0) {
				rc = fd;
				break;
			}
			rc = store_piece(fd, data, keep, off);
			moved += keep;
		}
		if (n < want || off + n >= fsize)
			break; /* end of the previous owner's file */
		off += n;
	}
	/* No fsync before the previous owner drops it: like every write chfsd takes, the data is
	 * in this node's page cache and survives a chfsd crash, not a node crash. */
	if (fd >= 0)
		close(fd);
	if (rc == 0 && any && (tag->flags & MD_BACKEND))
		bcache_mark(d, fileid, index); /* held here now: never fetched over (backend_cache.c) */
	if (rc == 0 && any) {
		struct wenc e;
		wenc_init(&e, msg, cap);
		chfsd_req_hdr(d, &e, WOP_MIG_DROP_DATA);
		wenc_u64(&e, fileid);
		wenc_u64(&e, start);
		wenc_u64(&e, tag->chunk_size);
		rc = chfsd_call(d, addr, &e, rep, cap, NULL, MIG_TIMEOUT_MS);
		if (rc == 0) {
			atomic_fetch_add(&rb->chunks_in, 1);
			atomic_fetch_add(&rb->bytes_in, moved);
		}
	}
	return rc;
}

int rebalance_take_chunks(struct chfsd *d, uint64_t fileid, const struct wire_tag *tag,
                          const struct wire_seg *seg, uint32_t nseg)
{
	struct rebalance *rb = d->rb;
	if (tag->flags & MD_LOCAL)
		return 0;
	pthread_mutex_lock(&rb->lock);
	int open = rb->in_open;
	pthread_mutex_unlock(&rb->lock);
	if (!open)
		return 0;
	uint8_t *msg = NULL;
	size_t cap = WIRE_HDR_LEN + WIRE_MIG_PIECE + 1024;
	pthread_mutex_t *l = &rb->take[fileid % TAKE_LOCKS];
	int rc = 0;
	uint64_t last = UINT64_MAX;
	for (uint32_t s = 0; s < nseg && rc == 0; s++) {
		uint64_t first = seg[s].off / tag->chunk_size,
		         lastc = (seg[s].off + seg[s].len - 1) / tag->chunk_size;
		for (uint64_t i = first; i <= lastc && rc == 0; i++) {
			if (i == last)
				continue;
			last = i;
			char addr[WIRE_ADDR_MAX];
			int need = prev_owner(d, placement_chunk_key(tag->pkey, i), addr, sizeof addr);
			if (need < 0) {
				rc = need;
				break;
			}
			if (!need)
				continue;
			uint64_t k = chunk_key(fileid, i);
			pthread_mutex_lock(l);
			if (!is_taken(rb, k)) {
				if (!msg && !(msg = malloc(2 * cap)))
					rc = -ENOMEM;
				if (rc == 0)
					rc = take_chunk(d, addr, fileid, tag, i, msg, cap);
				if (rc == 0)
					mark_taken(rb, k);
				else
					log_err("rebalance: cannot take chunk %llu of file %016llx from %s: %s",
					        (unsigned long long)i, (unsigned long long)fileid, addr,
					        strerror(-rc));
			}
			pthread_mutex_unlock(l);
		}
	}
	free(msg);
	return rc ? -EIO : 0;
}

void rebalance_data_op_begin(struct chfsd *d, uint64_t fileid, uint64_t len, int remove)
{
	struct rebalance *rb = d->rb;
	pthread_mutex_lock(&rb->take[fileid % TAKE_LOCKS]);
	pthread_mutex_lock(&rb->lock);
	if (rb->in_open) {
		if (rb->nfences == rb->capfences) {
			size_t nc = rb->capfences ? 2 * rb->capfences : 64;
			struct fence *nf = realloc(rb->fences, nc * sizeof *nf);
			if (nf) {
				rb->fences = nf;
				rb->capfences = nc;
			}
		}
		if (rb->nfences < rb->capfences)
			rb->fences[rb->nfences++] = (struct fence){fileid, remove ? UINT64_MAX : len};
		save(d); /* before the operation: a restart must not forget the cut */
	}
	pthread_mutex_unlock(&rb->lock);
}

void rebalance_data_op_end(struct chfsd *d, uint64_t fileid)
{
	pthread_mutex_unlock(&d->rb->take[fileid % TAKE_LOCKS]);
}

/* ---- the previous owner's side ---- */

int rebalance_handle(struct chfsd *d, const struct wire_req *q, struct wenc *e)
{
	struct rebalance *rb = d->rb;
	struct chfs_md md;
	int rc;
	switch (q->h.op) {
	case WOP_MIG_GET_ENTRY:
		rc = st_lookup(d->st, q->path, &md);
		if (rc == -ENOENT || rc == -ENOTDIR) {
			wenc_u32(e, 0);
			return 0;
		}
		if (rc == 0) {
			wenc_u32(e, 1);
			wenc_md(e, &md);
		}
		return rc;
	case WOP_MIG_DROP_ENTRY:
		rc = st_remove_if(d->st, q->path, q->fileid);
		if (rc == 0)
			atomic_fetch_add(&rb->entries_out, 1);
		return rc == -ENOENT ? 0 : rc;
	case WOP_MIG_GET_DATA: {
		uint64_t off = q->seg[0].off, len = q->seg[0].len;
		if (len > WIRE_MIG_PIECE)
			return -EINVAL;
		bflush_file_now(d, q->fileid); /* dirty chunks reach the backend before they leave */
		int fd = bcache_holds(d, q->fileid, off) ? st_data_open(d->st, q->fileid, 0) : -ENOENT;
		struct stat sb;
		off_t data = -1;
		if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > off)
			data = lseek(fd, (off_t)off, SEEK_DATA);
		if (fd < 0 || data < 0 || (uint64_t)data >= off + len) {
			/* Absent, or a hole up to the end of this piece: say so, with the size. */
			wenc_u32(e, fd >= 0 && data >= 0 ? 1 : 0);
			wenc_u64(e, fd >= 0 && data >= 0 ? (uint64_t)sb.st_size : 0);
			if (fd >= 0 && data >= 0) { /* a hole in the middle: zeros (a full piece) */
				uint8_t *z = wenc_reserve(e, 4 + len);
				if (z) {
					memset(z, 0, 4 + len);
					for (int b = 0; b < 4; b++)
						z[b] = (uint8_t)(len >> (8 * b));
				}
			} else {
				wenc_u32(e, 0);
			}
			if (fd >= 0)
				close(fd);
			return fd == -ENOENT || fd >= 0 ? 0 : fd;
		}
		uint64_t n = (uint64_t)sb.st_size - off < len ? (uint64_t)sb.st_size - off : len;
		wenc_u32(e, 1);
		wenc_u64(e, (uint64_t)sb.st_size);
		uint8_t *p = wenc_reserve(e, 4 + n);
		rc = p ? 0 : -EMSGSIZE;
		if (p) {
			for (int b = 0; b < 4; b++)
				p[b] = (uint8_t)(n >> (8 * b));
			for (uint64_t got = 0; got < n && rc == 0;) {
				ssize_t k = pread(fd, p + 4 + got, (size_t)(n - got), (off_t)(off + got));
				if (k < 0)
					rc = -errno;
				else if (k == 0)
					memset(p + 4 + got, 0, (size_t)(n - got)), got = n;
				else
					got += (uint64_t)k;
			}
		}
		close(fd);
		if (rc == 0)
			atomic_fetch_add(&rb->bytes_out, n);
		return rc;
	}
	case WOP_MIG_DROP_DATA:
		rc = st_data_punch(d->st, q->fileid, q->seg[0].off, q->seg[0].len);
		if (rc == 0)
			atomic_fetch_add(&rb->chunks_out, 1);
		return rc;
	case WOP_MIG_DONE: return rebalance_set_done(d, q->ring_epoch, q->id);
	case WOP_MIG_HINT: return handover_take_hinted(d, q, e);
	}
	return -ENOSYS;
}
