/*
 * ns_journal.c — snapshot and journal files of the namespace (see ns_journal.h).
 *
 * Both files start with a 24-byte header: an 8-byte magic ("CHFSNSS1" snapshot, "CHFSNSJ1"
 * journal), a u64 generation, the CRC32C of those 16 bytes and 4 zero bytes. Then frames, all
 * integers little endian:
 *
 *    u32 len      payload length (at most FRAME_MAX)
 *    u32 crc      CRC32C (Castagnoli) of the payload
 *    payload:     u8 op, u8 more, u16 path_len, path bytes (no NUL), then for NSJ_PUT the
 *                 record (record_codec.c) up to len; NSJ_DEL has nothing after the path
 *
 * more = 1 ties a frame to the next one: a group (a rename's PUT of the new name and DEL of
 * the old, written with one pwrite) is applied whole or not at all.
 *
 * A snapshot ends with an END frame (op 3, empty path, u64 number of PUT frames), so a cut
 * snapshot is told from a whole one; a snapshot that does not check is an error, never half
 * loaded. A journal simply stops: its first frame that is cut short, fails its CRC or does not
 * decode ends the replay (with the incomplete group before it, if any), and the file is
 * truncated there so later appends follow valid frames. Frames only set or delete one path's record, so replaying them in order rebuilds
 * the state whatever point a crash interrupted.
 *
 * Generations tie the journal to the snapshot it continues. Compaction writes the whole
 * namespace to ns.snap.tmp with generation g+1, fsyncs it, renames it over ns.snap, fsyncs the
 * directory, and only then truncates the journal and writes a g+1 header. A crash between the
 * rename and the truncation leaves a generation-g journal beside a g+1 snapshot: it is
 * recognised as already included and discarded, never replayed twice. A journal with a newer
 * generation than the snapshot means the snapshot was lost: -EIO rather than a silently
 * partial namespace.
 *
 * Durability: a frame is written with one pwrite (through the storage I/O engine, io_engine.h:
 * io_uring or pwrite) before the change is applied in memory or
 * acknowledged, and never fsynced — the guarantee chfsd has always given its namespace (the
 * one-file-per-entry store renamed records into place without fsync): a change acknowledged
 * to a client survives a crash or kill of chfsd (the bytes are in the kernel's page cache),
 * not a crash of the machine. The snapshot is fsynced because compaction then throws the
 * journal away. Compaction runs when the journal exceeds both compact_bytes (16 MiB) and the
 * snapshot's size, so its cost stays proportional to the changes it absorbs.
 */
#define _GNU_SOURCE
#include "ns_journal.h"
#include "le.h"
#include "io_engine.h"

#include "path.h"
#include "record_codec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h> /* renameat */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP "ns.snap"
#define SNAP_TMP "ns.snap.tmp"
#define JOURNAL "ns.journal"
#define HDR_LEN 24
#define FRAME_HDR 8
#define PAYLOAD_HDR 4
#define NSJ_END 3
#define FRAME_MAX (PAYLOAD_HDR + CHFS_PATH_MAX + RECORD_MAX_LEN)
#define SNAP_BUF (1 << 20)
#define COMPACT_BYTES_DEFAULT (16u << 20)

static const char snap_magic[8] = "CHFSNSS1", jour_magic[8] = "CHFSNSJ1";

struct nsj {
	int rootfd, jfd;
	int broken; /* the journal could not be restarted after a compaction: refuse appends */
	uint64_t gen, joff, snap_bytes, compact_bytes;
	size_t staged;                                          /* bytes of a group in frame[] */
	uint8_t frame[NSJ_GROUP_MAX * (FRAME_HDR + FRAME_MAX)]; /* room for a group's frames */
};

/* ---- CRC32C (reflected polynomial 0x82F63B78), one table lookup per byte ---- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t nsj_crc32c(uint32_t crc, const void *buf, size_t n)
{
	pthread_once(&crc_once, crc_init);
	const uint8_t *p = buf;
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static void hdr_encode(uint8_t *hdr, const char *magic, uint64_t gen)
{
	memcpy(hdr, magic, 8);
	put_le(hdr + 8, gen, 8);
	put_le(hdr + 16, nsj_crc32c(0, hdr, 16), 4);
	put_le(hdr + 20, 0, 4);
}

/* 1 if buf (n bytes) starts with a whole header with this magic. */
static int hdr_ok(const uint8_t *buf, size_t n, const char *magic)
{
	return n >= HDR_LEN && memcmp(buf, magic, 8) == 0 && get_le(buf + 16, 4) == nsj_crc32c(0, buf, 16) &&
	       get_le(buf + 20, 4) == 0;
}

/* Encode a frame into out (capacity FRAME_HDR + FRAME_MAX); its length, or -errno. */
static int frame_encode(uint8_t *out, int op, int more, const char *path, const uint8_t *rec, size_t rlen)
{
	size_t pl = strlen(path);
	if (pl >= CHFS_PATH_MAX || rlen > RECORD_MAX_LEN)
		return -ENAMETOOLONG;
	uint8_t *p = out + FRAME_HDR;
	p[0] = (uint8_t)op;
	p[1] = (uint8_t)more;
	put_le(p + 2, pl, 2);
	memcpy(p + PAYLOAD_HDR, path, pl);
	if (rlen)
		memcpy(p + PAYLOAD_HDR + pl, rec, rlen); /* DEL: rec may be NULL */
	size_t len = PAYLOAD_HDR + pl + rlen;
	put_le(out, len, 4);
	put_le(out + 4, nsj_crc32c(0, p, len), 4);
	return (int)(FRAME_HDR + len);
}

/* Check the frame at buf (n bytes available) and hand it to apply (unless NULL: checking
 * only). Its length, 0 for a bad or cut frame, or -errno from apply. *op gets the op (END
 * frames are not applied), *more its group flag. */
static long frame_replay(const uint8_t *buf, size_t n, nsj_apply_fn apply, void *arg, int *op, int *more,
                         uint64_t *count)
{
	if (n < FRAME_HDR)
		return 0;
	size_t len = (size_t)get_le(buf, 4);
	const uint8_t *p = buf + FRAME_HDR;
	if (len < PAYLOAD_HDR || len > FRAME_MAX || len > n - FRAME_HDR ||
	    get_le(buf + 4, 4) != nsj_crc32c(0, p, len))
		return 0;
	size_t pl = (size_t)get_le(p + 2, 2);
	if (p[1] > 1 || pl >= CHFS_PATH_MAX || PAYLOAD_HDR + pl > len || memchr(p + PAYLOAD_HDR, '\0', pl))
		return 0;
	*more = p[1];
	const uint8_t *rec = p + PAYLOAD_HDR + pl;
	size_t rlen = len - PAYLOAD_HDR - pl;
	*op = p[0];
	if (*op == NSJ_END) {
		if (pl != 0 || rlen != 8)
			return 0;
		*count = get_le(rec, 8);
		return (long)(FRAME_HDR + len);
	}
	if (pl == 0 || (*op == NSJ_DEL && rlen != 0) || (*op != NSJ_DEL && *op != NSJ_PUT))
		return 0;
	if (*op == NSJ_PUT) {
		struct chfs_md *md = malloc(sizeof *md);
		int bad = !md || record_decode(rec, rlen, md) != 0;
		free(md);
		if (bad)
			return 0;
	}
	if (!apply)
		return (long)(FRAME_HDR + len);
	PATH_BUF(path, 1); /* (a NUL-terminated copy for apply) */
	if (!path)
		return -ENOMEM;
	memcpy(path, p + PAYLOAD_HDR, pl);
	path[pl] = '\0';
	int rc = apply(arg, *op, path, rec, rlen);
	return rc < 0 ? rc : (long)(FRAME_HDR + len);
}

/* The whole file fd in a new buffer (*n bytes); NULL with errno on failure. */
static uint8_t *read_all(int fd, size_t *n)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return NULL;
	uint8_t *buf = malloc((size_t)sb.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)sb.st_size) {
		ssize_t r = pread(fd, buf + got, (size_t)sb.st_size - got, (off_t)got);
		if (r <= 0) {
			free(buf);
			errno = r < 0 ? errno : EIO;
			return NULL;
		}
		got += (size_t)r;
	}
	*n = got;
	return buf;
}

int nsj_has_snapshot(int rootfd)
{
	if (faccessat(rootfd, SNAP, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

static int load_snapshot(struct nsj *j, nsj_apply_fn apply, void *arg)
{
	int fd = openat(j->rootfd, SNAP, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	size_t n = 0;
	uint8_t *buf = read_all(fd, &n);
	int rc = buf ? -EIO : -errno;
	close(fd);
	if (!buf)
		return rc;
	if (hdr_ok(buf, n, snap_magic)) {
		j->gen = get_le(buf + 8, 8);
		uint64_t puts = 0, count = 0;
		size_t off = HDR_LEN;
		while (off < n) {
			int op = 0, more = 0;
			long fl = frame_replay(buf + off, n - off, apply, arg, &op, &more, &count);
			if (fl <= 0 || more) {
				rc = fl < 0 ? (int)fl : -EIO;
				break;
			}
			off += (size_t)fl;
			if (op == NSJ_END) {
				rc = off == n && count == puts ? 0 : -EIO;
				break;
			}
			puts++;
		}
	}
	free(buf);
	j->snap_bytes = n;
	return rc;
}

/* Empty the journal and write the header of the current generation. */
static int journal_reset(struct nsj *j)
{
	uint8_t hdr[HDR_LEN];
	hdr_encode(hdr, jour_magic, j->gen);
	if (ftruncate(j->jfd, 0) < 0 || pwrite(j->jfd, hdr, HDR_LEN, 0) != HDR_LEN)
		return errno ? -errno : -EIO;
	j->joff = HDR_LEN;
	return 0;
}

static int load_journal(struct nsj *j, nsj_apply_fn apply, void *arg, uint64_t *dropped)
{
	size_t n = 0;
	uint8_t *buf = read_all(j->jfd, &n);
	if (!buf)
		return -errno;
	int rc = 0;
	if (!hdr_ok(buf, n, jour_magic)) {
		/* Empty, or a header torn while a compaction restarted it: nothing beyond the
		 * snapshot. */
		*dropped = n;
		rc = journal_reset(j);
	} else if (get_le(buf + 8, 8) < j->gen) {
		rc = journal_reset(j); /* already in the snapshot */
	} else if (get_le(buf + 8, 8) > j->gen) {
		rc = -EIO; /* the snapshot it continues is gone */
	} else {
		/* First the extent of whole groups of valid frames, then apply exactly those. */
		size_t off = HDR_LEN, end = HDR_LEN;
		uint64_t count;
		while (off < n) {
			int op = 0, more = 0;
			long fl = frame_replay(buf + off, n - off, NULL, NULL, &op, &more, &count);
			if (fl <= 0 || op == NSJ_END)
				break;
			off += (size_t)fl;
			if (!more)
				end = off;
		}
		for (off = HDR_LEN; rc == 0 && off < end;) {
			int op = 0, more = 0;
			long fl = frame_replay(buf + off, end - off, apply, arg, &op, &more, &count);
			if (fl <= 0)
				rc = fl < 0 ? (int)fl : -EIO;
			else
				off += (size_t)fl;
		}
		off = end;
		if (rc == 0 && off < n) {
			*dropped = n - off;
			if (ftruncate(j->jfd, (off_t)off) < 0)
				rc = -errno;
		}
		j->joff = off;
	}
	free(buf);
	return rc;
}

int nsj_open(int rootfd, nsj_apply_fn apply, void *arg, struct nsj **out, uint64_t *dropped)
{
	struct nsj *j = calloc(1, sizeof *j);
	if (!j)
		return -ENOMEM;
	*dropped = 0;
	j->rootfd = rootfd;
	j->compact_bytes = COMPACT_BYTES_DEFAULT;
	unlinkat(rootfd, SNAP_TMP, 0); /* a compaction that did not finish */
	int rc = load_snapshot(j, apply, arg);
	if (rc == 0) {
		j->jfd = openat(rootfd, JOURNAL, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		rc = j->jfd < 0 ? -errno : load_journal(j, apply, arg, dropped);
		if (rc && j->jfd >= 0)
			close(j->jfd);
	}
	if (rc) {
		free(j);
		return rc;
	}
	*out = j;
	return 0;
}

void nsj_close(struct nsj *j)
{
	if (!j)
		return;
	close(j->jfd);
	free(j);
}

/* Write n bytes of j->frame at the end of the journal. */
static int append_frames(struct nsj *j, int n)
{
	int rc = ioe_pwrite(j->jfd, j->frame, (size_t)n, j->joff); /* io_engine.h */
	if (rc < 0) {
		if (ftruncate(j->jfd, (off_t)j->joff) < 0) /* no torn frame before the next one */
			j->broken = 1;
		return rc;
	}
	j->joff += (uint64_t)n;
	return 0;
}

int nsj_append(struct nsj *j, int op, const char *path, const uint8_t *rec, size_t len)
{
	if (j->broken)
		return -EIO;
	int n = frame_encode(j->frame, op, 0, path, rec, len);
	return n < 0 ? n : append_frames(j, n);
}

int nsj_append_move(struct nsj *j, const char *to, const uint8_t *rec, size_t len, const char *from)
{
	if (j->broken)
		return -EIO;
	int n = frame_encode(j->frame, NSJ_PUT, 1, to, rec, len);
	if (n < 0)
		return n;
	int m = frame_encode(j->frame + n, NSJ_DEL, 0, from, NULL, 0);
	return m < 0 ? m : append_frames(j, n + m);
}

int nsj_stage(struct nsj *j, int op, int more, const char *path, const uint8_t *rec, size_t len)
{
	int n = j->broken ? -EIO : j->staged + FRAME_HDR + FRAME_MAX > sizeof j->frame ? -E2BIG : 0;
	if (n == 0)
		n = frame_encode(j->frame + j->staged, op, more, path, rec, len);
	if (n < 0) {
		j->staged = 0;
		return n;
	}
	j->staged += (size_t)n;
	return 0;
}

int nsj_commit(struct nsj *j)
{
	int n = (int)j->staged;
	j->staged = 0;
	return n ? append_frames(j, n) : 0;
}

uint64_t nsj_journal_bytes(const struct nsj *j) { return j->joff; }
uint64_t nsj_empty_bytes(void) { return HDR_LEN; }
void nsj_set_compact_bytes(struct nsj *j, uint64_t bytes) { j->compact_bytes = bytes; }

int nsj_should_compact(const struct nsj *j)
{
	if (j->compact_bytes == 0)
		return j->joff > HDR_LEN;
	return j->joff > j->compact_bytes && j->joff > j->snap_bytes;
}

/* ---- compaction: the snapshot is written through a buffer ---- */

struct snap_writer {
	int fd, err;
	size_t used;
	uint64_t puts, bytes;
	uint8_t *buf;
	uint8_t frame[FRAME_HDR + FRAME_MAX];
};

static int sw_flush(struct snap_writer *w)
{
	size_t off = 0;
	while (off < w->used) {
		ssize_t r = write(w->fd, w->buf + off, w->used - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return w->err = r < 0 ? -errno : -EIO;
		off += (size_t)r;
	}
	w->bytes += w->used;
	w->used = 0;
	return 0;
}

static int sw_add(struct snap_writer *w, const uint8_t *p, size_t n)
{
	if (w->used + n > SNAP_BUF && sw_flush(w) < 0)
		return w->err;
	memcpy(w->buf + w->used, p, n);
	w->used += n;
	return 0;
}

static int sw_emit(void *ectx, const char *path, const uint8_t *rec, size_t len)
{
	struct snap_writer *w = ectx;
	int n = frame_encode(w->frame, NSJ_PUT, 0, path, rec, len);
	if (n < 0)
		return w->err = n;
	w->puts++;
	return sw_add(w, w->frame, (size_t)n);
}

int nsj_compact(struct nsj *j, nsj_source_fn src, void *arg)
{
	struct snap_writer *w = calloc(1, sizeof *w);
	if (!w || !(w->buf = malloc(SNAP_BUF))) {
		free(w);
		return -ENOMEM;
	}
	int rc;
	w->fd = openat(j->rootfd, SNAP_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		rc = -errno;
		goto out;
	}
	uint8_t hdr[HDR_LEN], cnt[8];
	hdr_encode(hdr, snap_magic, j->gen + 1);
	if ((rc = sw_add(w, hdr, HDR_LEN)) == 0 && (rc = src(arg, sw_emit, w)) == 0 && (rc = w->err) == 0) {
		put_le(cnt, w->puts, 8);
		int n = frame_encode(w->frame, NSJ_END, 0, "", cnt, sizeof cnt);
		if ((rc = sw_add(w, w->frame, (size_t)n)) == 0 && (rc = sw_flush(w)) == 0 && fsync(w->fd) < 0)
			rc = -errno;
	}
	close(w->fd);
	if (rc == 0 && renameat(j->rootfd, SNAP_TMP, j->rootfd, SNAP) < 0)
		rc = -errno;
	if (rc) {
		unlinkat(j->rootfd, SNAP_TMP, 0);
		goto out;
	}
	fsync(j->rootfd); /* the rename, before the journal it replaces is emptied */
	j->gen++;
	j->snap_bytes = w->bytes;
	if ((rc = journal_reset(j)) < 0)
		j->broken = 1; /* appends to a stale-generation journal would be discarded on replay */
out:
	free(w->buf);
	free(w);
	return rc;
}
