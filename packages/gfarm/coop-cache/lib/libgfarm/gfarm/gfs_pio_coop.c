/*
 * gfs_pio_coop.c - the cooperative cache in libgfarm's read/write path
 * (chfs-stack patch against Gfarm 2.7.20).
 *
 * Pages are keyed by (fs, incarnation, inode, generation); gfmd tells the
 * first two (GFM_PROTO_COOP_CACHE_KEY, see coop_cache_key.c), and no
 * cached byte is used or stored before it has.  KEY is the first cache
 * request a process sends on its working gfmd connection, so before it
 * (and any other) the process probes gfmd once on a throw-away connection
 * (GFM_PROTO_COOP_CACHE_HELLO, coop_gfmd_probe.c): a stock gfmd closes a
 * connection on an unknown request, so against one the cache stays off,
 * with one log line, and the working connection never sees a cache request.
 *
 * Read (gfs_pio_coop_pread, called for every storage read of a file opened
 * read-only):
 *   0. at the first read, gfmd's KEY answer gives the key, and says whether
 *      the generation is still current and nobody has the file open for
 *      writing; if not, this descriptor reads from gfsd only, as stock;
 *   1. this node's cache daemon (gfccd) - any cached prefix is returned;
 *   2. on a miss, gfmd names the best peer that may cache (ino, gen)
 *      (GFM_PROTO_COOP_CACHE_LOOKUP); we ask that peer's daemon for the
 *      range, store what it had locally, and report (requested,
 *      transferred) pages to gfmd (GFM_PROTO_COOP_CACHE_REPORT) and to
 *      our daemon's counters;
 *   3. what no peer had comes from gfsd as in stock Gfarm, and is stored
 *      only if a second KEY answer, after the read, still says the
 *      generation is current and nobody writes (else gfsd may have handed
 *      out bytes of the next generation).
 * A reader registers this node as a holder of (ino, gen) with gfmd
 * (GFM_PROTO_COOP_CACHE_REGISTER) only once the node's cache holds the
 * whole file: at a read that reaches the end of the file (gfmd's size,
 * asked once per descriptor) it asks gfccd how much of the file it holds
 * (COOP_OP_HAS), and registers if that is all of it - so gfmd never hands
 * a requester a node that is still reading the file or read only a part.
 * With GFARM_COOP_CACHE_PEERS=0 steps 2 and the registrations are skipped:
 * the node-local cache alone, the baseline of the published evaluation.
 * A page is stored partial only when it is the end of the file, so a short
 * cached page always means EOF; a gfsd read ending inside a page is
 * confirmed as EOF by a one-byte probe before its tail page is stored.
 * gfs_pio_recvfile (gfexport) and gfs_pio_sendfile (gfreg) are routed
 * through these read and write paths while the cache is on, since their
 * stock versions move data without passing through libgfarm's buffers.
 *
 * Write: the first write through a descriptor drops this node's pages of
 * the inode (writes invalidate), and written data are staged under a
 * staging generation of this descriptor's own (COOP_GEN_STAGING | random),
 * merged page by page in the order they reached gfsd.  At close, gfmd
 * returns the file's new generation.  The staged pages become that
 * generation's, and the writer registers as a holder, only if the file was
 * opened with O_TRUNC (so the written extent is the file), gfccd took
 * every write (one it missed - no answer in time, or bypassed - leaves an
 * older staged version of its pages), no write failed (gfsd may hold
 * bytes of a failed write, e.g. when it wrote them and its reply was
 * lost), no write went through O_APPEND's pwrite (gfsd wrote at its own
 * end of file, an offset libgfarm does not learn; gfs_pio_append's
 * offset comes from gfsd and is used), the close - its flush, the gfsd
 * close and gfmd's - succeeded, the new generation is the one after the
 * open's (no other
 * writer closed in between) and KEY says nobody else has the file open for
 * writing; otherwise this node's pages of the inode are dropped.  The
 * writer registers, as a reader does, only if gfccd then holds every page
 * of the written extent.
 * gfs_pio_sendfile (gfreg) from a regular file keeps stock Gfarm's
 * sendfile to gfsd and stages by reference: gfccd is handed the source
 * descriptor and reads the range itself (COOP_OP_PUT_REF), so the writer
 * copies nothing more, and gfccd reads while the writer sends to gfsd;
 * the staged pages are kept only if the source's size, mtime and ctime
 * did not change from before the send to after gfccd's read.  Files open for writing bypass the
 * cache on reads.  Any cache failure only costs the fallback to gfsd; a
 * peer that failed is skipped by this process for COOP_BAD_PEER_SECONDS
 * and reported to gfmd (GFM_PROTO_COOP_CACHE_FAILED), which drops it.
 */
#include <errno.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <gfarm/gfarm.h>
#include "gfutil.h"
#include "queue.h"
#include "msgdigest.h"
#include "gfp_xdr.h"
#include "gfm_proto.h"
#include "gfm_client.h"
#define GFARM_USE_GFS_PIO_INTERNAL_CKSUM_INFO
#include "gfs_io.h"
#include "gfs_proto.h"
#include "gfs_pio.h"
#include "gfs_pio_impl.h"
#include "coop_cache_wire.h"
#include "coop_cache_client.h"
#include "coop_gfmd_probe.h"
#include "gfs_pio_coop.h"

#define COOP_STATE_REGISTERED	1
#define COOP_STATE_STAGED	2	/* wrote: local pages invalidated */
#define COOP_STATE_NO_RETAG	4	/* truncated: extent unknown */
#define COOP_STATE_KEYED	8	/* gf->coop_fs, coop_inc are known */
#define COOP_STATE_BYPASS	16	/* generation not cacheable: gfsd only */
#define COOP_STATE_SIZED	32	/* gf->coop_size is known (reads) */

/* a peer that failed (refused, timed out) is skipped for a while, so a
 * hung peer costs one timeout per process, not one per read */
#define COOP_BAD_PEER_SECONDS	10

/* staging by reference covers at most this many COOP_MAX_IO requests
 * (512 MiB); a larger gfs_pio_sendfile is not cached */
#define COOP_MAX_REF_REQUESTS	64

static pthread_mutex_t bad_peer_mutex = PTHREAD_MUTEX_INITIALIZER;
static char bad_peer[COOP_ENDPOINT_MAX];
static time_t bad_peer_until;

static pthread_mutex_t self_mutex = PTHREAD_MUTEX_INITIALIZER;
static char self_endpoint[COOP_ENDPOINT_MAX];
static unsigned char self_secret[COOP_SECRET_LEN];
static int self_known;

/* our node's endpoint and secret; 0 once the local daemon answered */
static int
coop_self(char *ep, unsigned char *secret)
{
	int r = 0;

	pthread_mutex_lock(&self_mutex);
	if (!self_known) {
		r = coop_cache_hello(self_endpoint, sizeof(self_endpoint),
		    self_secret);
		self_known = r == 0;
	}
	if (r == 0) {
		memcpy(ep, self_endpoint, sizeof(self_endpoint));
		memcpy(secret, self_secret, sizeof(self_secret));
	}
	pthread_mutex_unlock(&self_mutex);
	return (r);
}

/* gfmd's holder token for (ino, gen): issued only if this client may read
 * that generation (caller frees) */
static char *
coop_admit(GFS_File gf, gfarm_uint64_t gen)
{
	char *token = NULL;
	gfarm_error_t e = gfm_client_rpc(gf->gfm_server, 0,
	    GFM_PROTO_COOP_CACHE_ADMIT, "ll/s", (gfarm_uint64_t)gf->ino, gen,
	    &token);

	if (e != GFARM_ERR_NO_ERROR) {
		gflog_debug(GFARM_MSG_UNFIXED, "coop cache admit %llu: %s",
		    (unsigned long long)gf->ino, gfarm_error_string(e));
		return (NULL);
	}
	return (token);
}

/* gfmd's KEY answer for (gf->ino, gen) into *k: its flags, or -1 if gfmd
 * did not answer (the cache stays unused).  Only called once
 * coop_gfmd_supported() said gfmd is patched. */
static int
coop_key(GFS_File gf, gfarm_uint64_t gen, struct coop_key *k)
{
	gfarm_uint64_t fs, inc;
	gfarm_int32_t flags;
	gfarm_error_t e = gfm_client_rpc(gf->gfm_server, 0,
	    GFM_PROTO_COOP_CACHE_KEY, "ll/lli", (gfarm_uint64_t)gf->ino, gen,
	    &fs, &inc, &flags);

	if (e != GFARM_ERR_NO_ERROR) {
		gflog_debug(GFARM_MSG_UNFIXED, "coop cache key %llu: %s",
		    (unsigned long long)gf->ino, gfarm_error_string(e));
		return (-1);
	}
	k->fs = fs;
	k->inc = inc;
	k->ino = gf->ino;
	k->gen = gen;
	return (flags);
}

/* the key of the generation this descriptor reads, or NULL when its reads
 * must not use the cache (asks gfmd at the first call) */
static const struct coop_key *
coop_read_key(GFS_File gf, struct coop_key *k)
{
	if ((gf->coop_state & COOP_STATE_KEYED) == 0) {
		gf->coop_state |= COOP_STATE_KEYED;
		if (coop_key(gf, gf->gen, k) != 0)
			gf->coop_state |= COOP_STATE_BYPASS;
		else {
			gf->coop_fs = k->fs;
			gf->coop_inc = k->inc;
		}
	}
	if ((gf->coop_state & COOP_STATE_BYPASS) != 0)
		return (NULL);
	k->fs = gf->coop_fs;
	k->inc = gf->coop_inc;
	k->ino = gf->ino;
	k->gen = gf->gen;
	return (k);
}

/* may bytes just read from gfsd be stored under *k? (see the top) */
static int
coop_still_current(GFS_File gf, const struct coop_key *k)
{
	struct coop_key now;

	if (coop_key(gf, k->gen, &now) == 0 && now.inc == k->inc &&
	    now.fs == k->fs)
		return (1);
	gf->coop_state |= COOP_STATE_BYPASS;
	return (0);
}

static void
coop_register(GFS_File gf, gfarm_uint64_t gen, const char *ep)
{
	char *token = coop_admit(gf, gen);
	gfarm_error_t e;

	if (token == NULL)
		return;
	e = gfm_client_rpc(gf->gfm_server, 0, GFM_PROTO_COOP_CACHE_REGISTER,
	    "llss/", (gfarm_uint64_t)gf->ino, gen, ep, token);
	free(token);
	if (e != GFARM_ERR_NO_ERROR)
		gflog_debug(GFARM_MSG_UNFIXED, "coop cache register %llu: %s",
		    (unsigned long long)gf->ino, gfarm_error_string(e));
}

/* register as a holder of k's generation if this node's cache holds all
 * of its `size' bytes (a holder that has only a prefix would be handed out
 * and fail its requesters' reads) */
static int
coop_register_whole(GFS_File gf, const struct coop_key *k,
	gfarm_off_t size, const char *ep)
{
	uint64_t have;

	if (size <= 0 || coop_cache_local_has(k, size, &have) < 0 ||
	    have != (uint64_t)size)
		return (0);
	coop_register(gf, k->gen, ep);
	return (1);
}

/* the file's size as gfmd has it (read-only descriptor, asked once), or
 * -1; KEY said nobody writes, so it is the size of the generation read */
static gfarm_off_t
coop_read_size(GFS_File gf)
{
	struct gfs_stat st;

	if ((gf->coop_state & COOP_STATE_SIZED) == 0) {
		gf->coop_state |= COOP_STATE_SIZED;
		gf->coop_size = -1;
		if (gfs_fstat(gf, &st) == GFARM_ERR_NO_ERROR) {
			gf->coop_size = st.st_size;
			gfs_stat_free(&st);
		}
	}
	return (gf->coop_size);
}

/* a read through gf ended at `end': once it reached the end of the file,
 * register if the node now holds all of it (see the top) */
static void
coop_read_done(GFS_File gf, const struct coop_key *k, gfarm_off_t end,
	const char *self)
{
	gfarm_off_t size;

	if (!coop_cache_config()->peers ||
	    (gf->coop_state & (COOP_STATE_REGISTERED | COOP_STATE_BYPASS)))
		return;
	size = coop_read_size(gf);
	if (size > 0 && end >= size && coop_register_whole(gf, k, size, self))
		gf->coop_state |= COOP_STATE_REGISTERED;
}

/* the holder gfmd named failed us (refused, timed out, failed the proof or
 * a MAC): gfmd drops it from (ino, gen)'s list, so no reader tries it
 * again until it registers anew */
static void
coop_holder_failed(GFS_File gf, const char *peer)
{
	char *token = coop_admit(gf, gf->gen);

	if (token == NULL)
		return;
	(void)gfm_client_rpc(gf->gfm_server, 0, GFM_PROTO_COOP_CACHE_FAILED,
	    "llss/", (gfarm_uint64_t)gf->ino, gf->gen, peer, token);
	free(token);
}

static int
peer_is_bad(const char *peer)
{
	int bad;

	pthread_mutex_lock(&bad_peer_mutex);
	bad = strcmp(peer, bad_peer) == 0 && time(NULL) < bad_peer_until;
	pthread_mutex_unlock(&bad_peer_mutex);
	return (bad);
}

static void
peer_failed(const char *peer)
{
	pthread_mutex_lock(&bad_peer_mutex);
	snprintf(bad_peer, sizeof(bad_peer), "%s", peer);
	bad_peer_until = time(NULL) + COOP_BAD_PEER_SECONDS;
	pthread_mutex_unlock(&bad_peer_mutex);
}

/* the best peer gfmd knows for (ino, gen), or NULL (caller frees) */
static char *
coop_lookup(GFS_File gf, const char *self)
{
	char *peer = NULL;
	gfarm_error_t e;

	e = gfm_client_rpc(gf->gfm_server, 0, GFM_PROTO_COOP_CACHE_LOOKUP,
	    "lls/s", (gfarm_uint64_t)gf->ino, gf->gen, self, &peer);
	if (e != GFARM_ERR_NO_ERROR || peer == NULL || peer[0] == '\0' ||
	    peer_is_bad(peer)) {
		free(peer);
		return (NULL);
	}
	return (peer);
}

/* tell gfmd (which re-sorts the holders) and our node's counters */
static void
coop_report(GFS_File gf, const char *peer, gfarm_uint64_t requested,
	gfarm_uint64_t transferred, gfarm_uint64_t gfsd_pages)
{
	if (peer != NULL && requested > 0)
		(void)gfm_client_rpc(gf->gfm_server, 0,
		    GFM_PROTO_COOP_CACHE_REPORT, "llsll/",
		    (gfarm_uint64_t)gf->ino, gf->gen, peer, requested,
		    transferred);
	(void)coop_cache_local_stat_add(requested > 0 ? requested : gfsd_pages,
	    0, peer != NULL ? requested : 0, transferred, gfsd_pages);
}

int
gfs_pio_coop_caches_writes(void)
{
	return (coop_cache_config() != NULL);
}

int
gfs_pio_coop_active(GFS_File gf)
{
	return (coop_cache_config() != NULL &&
	    (gf->mode & GFS_FILE_MODE_WRITE) == 0 && coop_cache_local_up() &&
	    coop_gfmd_supported(gf->gfm_server));
}

gfarm_error_t
gfs_pio_coop_pread(GFS_File gf, gfs_pio_coop_pread_fn storage_pread,
	char *buf, size_t size, gfarm_off_t off, size_t *lenp)
{
	char self[COOP_ENDPOINT_MAX], probe, *peer;
	unsigned char secret[COOP_SECRET_LEN];
	struct coop_key key;
	const struct coop_key *k;
	size_t got = 0, n;
	gfarm_uint64_t pages;
	gfarm_error_t e;
	int eof, r, peers;

	if (!gfs_pio_coop_active(gf) || size == 0 || off < 0 ||
	    coop_self(self, secret) < 0 || (k = coop_read_key(gf, &key)) == NULL)
		return ((*storage_pread)(gf, buf, size, off, lenp));
	if (size > COOP_MAX_IO)
		size = COOP_MAX_IO;
	peers = coop_cache_config()->peers;
	if (coop_cache_local_get(k, off, buf, size, &got) == 0 && got > 0) {
		pages = coop_cache_pages(off, got);
		(void)coop_cache_local_stat_add(pages, pages, 0, 0, 0);
		*lenp = got;
		coop_read_done(gf, k, off + got, self);
		return (GFARM_ERR_NO_ERROR);
	}
	peer = peers ? coop_lookup(gf, self) : NULL;
	if (peer != NULL &&
	    (r = coop_cache_peer_get(peer, secret, k, off, buf, size,
	    &got)) < 0) {
		gflog_debug(GFARM_MSG_UNFIXED, "coop cache peer %s: %s",
		    peer, strerror(-r));
		peer_failed(peer);
		coop_holder_failed(gf, peer);
		got = 0;
	}
	if (got > 0) {
		/* a short page from a peer is that file's last page */
		(void)coop_cache_local_put(k, off, buf, got, 1);
		pages = coop_cache_pages(off, got);
		coop_report(gf, peer, pages, pages, 0);
		free(peer);
		*lenp = got;
		coop_read_done(gf, k, off + got, self);
		return (GFARM_ERR_NO_ERROR);
	}
	e = (*storage_pread)(gf, buf, size, off, lenp);
	if (e == GFARM_ERR_NO_ERROR && *lenp > 0) {
		eof = 0;
		if ((off + *lenp) % COOP_PAGE_SIZE != 0)
			eof = (*storage_pread)(gf, &probe, 1, off + *lenp,
			    &n) == GFARM_ERR_NO_ERROR && n == 0;
		if (coop_still_current(gf, k))
			(void)coop_cache_local_put(k, off, buf, *lenp, eof);
		/* the peer was asked for what gfsd had to deliver */
		pages = coop_cache_pages(off, *lenp);
		coop_report(gf, peer, peer != NULL ? pages : 0, 0, pages);
	}
	if (e == GFARM_ERR_NO_ERROR)
		coop_read_done(gf, k, off + *lenp, self);
	free(peer);
	return (e);
}

static int
write_all(int fd, const char *p, size_t n, gfarm_off_t *w_off, int *seekable)
{
	while (n > 0) {
		ssize_t rv = *seekable ? pwrite(fd, p, n, *w_off) :
		    write(fd, p, n);

		if (rv < 0 && errno == ESPIPE && *seekable) {
			*seekable = 0;	/* a pipe, e.g. gfexport | ... */
			continue;
		}
		if (rv < 0 && errno == EINTR)
			continue;
		if (rv <= 0)
			return (rv < 0 ? errno : ENOSPC);
		p += rv;
		n -= rv;
		*w_off += rv;
	}
	return (0);
}

gfarm_error_t
gfs_pio_coop_recvfile(GFS_File gf, gfs_pio_coop_pread_fn storage_pread,
	gfarm_off_t r_off, int w_fd, gfarm_off_t w_off, gfarm_off_t len,
	EVP_MD_CTX *md_ctx, gfarm_off_t *recvp)
{
	/* a peer answers up to COOP_MAX_IO at once, gfsd 1 MiB: take 4 MiB
	 * per round so a peer hit costs a quarter of the gfmd/peer RPCs */
	size_t chunk = 4 * GFS_PROTO_MAX_IOSIZE, n;
	char *buf = malloc(chunk);
	gfarm_error_t e = GFARM_ERR_NO_ERROR;
	int seekable = 1, err;

	*recvp = 0;
	if (buf == NULL)
		return (GFARM_ERR_NO_MEMORY);
	while (len < 0 || *recvp < len) {
		size_t want = len >= 0 && len - *recvp < (gfarm_off_t)chunk ?
		    (size_t)(len - *recvp) : chunk;

		e = gfs_pio_coop_pread(gf, storage_pread, buf, want,
		    r_off + *recvp, &n);
		if (e != GFARM_ERR_NO_ERROR || n == 0)
			break;
		if ((err = write_all(w_fd, buf, n, &w_off, &seekable)) != 0) {
			e = gfarm_errno_to_error(err);
			break;
		}
		if (md_ctx != NULL)
			EVP_DigestUpdate(md_ctx, buf, n);
		*recvp += n;
	}
	free(buf);
	return (e);
}

gfarm_error_t
gfs_pio_coop_sendfile(GFS_File gf, gfs_pio_coop_pwrite_fn view_pwrite,
	gfarm_off_t w_off, int r_fd, gfarm_off_t r_off, gfarm_off_t len,
	gfarm_off_t *sentp)
{
	size_t chunk = GFS_PROTO_MAX_IOSIZE, done, n;
	char *buf = malloc(chunk);
	gfarm_error_t e = GFARM_ERR_NO_ERROR;
	int seekable = r_off >= 0;
	ssize_t rv;

	*sentp = 0;
	if (buf == NULL)
		return (GFARM_ERR_NO_MEMORY);
	while (len < 0 || *sentp < len) {
		size_t want = len >= 0 && len - *sentp < (gfarm_off_t)chunk ?
		    (size_t)(len - *sentp) : chunk;

		rv = seekable ? pread(r_fd, buf, want, r_off + *sentp) :
		    read(r_fd, buf, want);
		if (rv < 0 && errno == ESPIPE && seekable && r_off == 0) {
			seekable = 0;	/* stdin is a pipe */
			continue;
		}
		if (rv < 0 && errno == EINTR)
			continue;
		if (rv < 0) {
			e = gfarm_errno_to_error(errno);
			break;
		}
		if (rv == 0)
			break;
		for (done = 0; done < (size_t)rv; done += n) {
			e = (*view_pwrite)(gf, buf + done, rv - done,
			    w_off + *sentp + done, &n);
			if (e != GFARM_ERR_NO_ERROR)
				break;
		}
		*sentp += done;
		if (e != GFARM_ERR_NO_ERROR)
			break;
	}
	free(buf);
	return (e);
}

/* a staging generation no other descriptor uses */
static gfarm_uint64_t
coop_staging_id(void)
{
	static gfarm_uint64_t counter;
	gfarm_uint64_t id;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id))
		id = (gfarm_uint64_t)time(NULL) ^ (gfarm_uint64_t)getpid() << 32
		    ^ __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) << 48;
	return (COOP_GEN_STAGING | id);
}

static struct coop_key
coop_staging_key(GFS_File gf)
{
	struct coop_key k = { 0, 0, gf->ino, gf->coop_staging };

	return (k);
}

/* the staged pages no longer follow the file (a truncate, or a write that
 * was not staged): close publishes none of them */
static void
coop_stage_lost(GFS_File gf)
{
	gf->coop_state |= COOP_STATE_STAGED | COOP_STATE_NO_RETAG;
}

/* a write reached gfsd: 1 if its bytes are to be staged under *k */
static int
coop_stage_begin(GFS_File gf, struct coop_key *k)
{
	if ((gf->coop_state & COOP_STATE_STAGED) == 0) {
		gf->coop_state |= COOP_STATE_STAGED;
		gf->coop_staging = coop_staging_id();
		(void)coop_cache_local_inval(gf->ino);
	}
	*k = coop_staging_key(gf);
	return ((gf->coop_state & COOP_STATE_NO_RETAG) == 0);
}

void
gfs_pio_coop_written(GFS_File gf, const char *buf, gfarm_off_t off,
	size_t len)
{
	struct coop_key k;

	if (coop_cache_config() == NULL || len == 0 || !coop_stage_begin(gf, &k))
		return;
	if (off < 0) {	/* where gfsd put the bytes is not known */
		coop_stage_lost(gf);
		return;
	}
	/* a staged partial page is kept at close only if it ends the file;
	 * bytes gfccd did not take (it did not answer in time, or is
	 * bypassed) leave older staged bytes of their pages in place */
	if (len > COOP_MAX_IO ||
	    coop_cache_local_put(&k, off, buf, len, 1) != 0)
		coop_stage_lost(gf);
	else if (gf->coop_hi < off + (gfarm_off_t)len)
		gf->coop_hi = off + len;
}

void
gfs_pio_coop_write_failed(GFS_File gf)
{
	/* gfsd may hold some of the failed write's bytes (it wrote them and
	 * the reply was lost, or a retry after a failover went through),
	 * none of them staged: no older staged page may be published */
	gfs_pio_coop_truncated(gf);
}

int
gfs_pio_coop_stages_by_reference(GFS_File gf, int r_fd, gfarm_off_t r_off)
{
	const struct coop_cache_config *c = coop_cache_config();
	struct stat st;

	return (c != NULL && c->stage_by_reference && r_off >= 0 &&
	    (gf->open_flags & GFARM_FILE_APPEND) == 0 &&
	    fstat(r_fd, &st) == 0 && S_ISREG(st.st_mode));
}

static int
same_file_state(const struct stat *a, const struct stat *b)
{
	return (a->st_size == b->st_size &&
	    a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	    a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	    a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	    a->st_ctim.tv_nsec == b->st_ctim.tv_nsec);
}

gfarm_error_t
gfs_pio_coop_storage_sendfile(GFS_File gf, gfs_pio_coop_sendfile_fn send,
	gfarm_off_t w_off, int r_fd, gfarm_off_t r_off, gfarm_off_t len,
	EVP_MD_CTX *md_ctx, gfarm_off_t *sentp)
{
	struct stat before, after;
	struct coop_key k;
	gfarm_off_t want = 0;
	int conn = -1, nreq = 0, ok = 0;
	gfarm_error_t e;

	if (coop_cache_config() != NULL &&
	    gfs_pio_coop_stages_by_reference(gf, r_fd, r_off) &&
	    fstat(r_fd, &before) == 0 && before.st_size > r_off) {
		want = before.st_size - r_off;
		if (len >= 0 && len < want)
			want = len;
		/* gfccd reads the source while we send it to gfsd; all
		 * requests must fit in the socket's buffer at once */
		if (coop_stage_begin(gf, &k) &&
		    want <= COOP_MAX_REF_REQUESTS * (gfarm_off_t)COOP_MAX_IO)
			conn = coop_cache_local_put_ref_start(&k, w_off, r_fd,
			    r_off, want, &nreq);
	}
	e = (*send)(gf, w_off, r_fd, r_off, len, md_ctx, sentp);
	if (conn >= 0) {
		/* gfsd got exactly the bytes gfccd read, unless the source
		 * changed on the way (its size, mtime or ctime tell) */
		ok = coop_cache_local_put_ref_finish(conn, nreq) == 0 &&
		    e == GFARM_ERR_NO_ERROR && *sentp == want &&
		    fstat(r_fd, &after) == 0 && same_file_state(&before, &after);
		if (ok && gf->coop_hi < w_off + want)
			gf->coop_hi = w_off + want;
	}
	if (e != GFARM_ERR_NO_ERROR || (!ok && (conn >= 0 || *sentp > 0)))
		gfs_pio_coop_truncated(gf);	/* extent unknown */
	return (e);
}

void
gfs_pio_coop_truncated(GFS_File gf)
{
	if (coop_cache_config() == NULL)
		return;
	coop_stage_lost(gf);
	(void)coop_cache_local_inval(gf->ino);
}

int
gfs_pio_coop_needs_gen(GFS_File gf)
{
	return (coop_cache_config() != NULL &&
	    (gf->coop_state & COOP_STATE_STAGED) != 0);
}

void
gfs_pio_coop_closed(GFS_File gf, const gfarm_uint64_t *genp)
{
	char self[COOP_ENDPOINT_MAX];
	unsigned char secret[COOP_SECRET_LEN];
	struct coop_key staged, to;

	if (!gfs_pio_coop_needs_gen(gf))
		return;
	staged = coop_staging_key(gf);
	if (genp == NULL || (gf->coop_state & COOP_STATE_NO_RETAG) != 0 ||
	    (gf->open_flags & GFARM_FILE_TRUNC) == 0 ||
	    !coop_gfmd_supported(gf->gfm_server) ||
	    coop_self(self, secret) < 0 || *genp != gf->gen + 1 ||
	    coop_key(gf, *genp, &to) != 0) {
		/* the staged pages and every older page go */
		(void)coop_cache_local_inval(gf->ino);
		return;
	}
	if (coop_cache_local_retag(&staged, &to, gf->coop_hi) == 0 &&
	    coop_cache_config()->peers)
		(void)coop_register_whole(gf, &to, gf->coop_hi, self);
}
