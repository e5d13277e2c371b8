/*
 * record_codec.c — encoder and decoder of the on-disk namespace record.
 *
 * A record is the whole content of a record file (ns/.../_name, or a directory's .meta). All
 * integers are little endian, fields at fixed offsets:
 *
 *    off  size  field
 *      0     4  magic        0x52534643, the bytes "CFSR"
 *      4     2  version      RECORD_VERSION (1); any other value is rejected
 *      6     2  nlink        an inode record's count of names (flags has MD_LINKED); 0 for
 *                           every other record (was "reserved, 0": old records read as 0)
 *      8     4  mode         S_IFMT type bits and permission bits
 *     12     4  uid
 *     16     4  gid
 *     20     4  flags        MD_* (MD_LOCAL: every chunk on `home`)
 *     24     4  chunk_size
 *     28     4  pkey         placement key of a striped file's chunks
 *     32     8  size
 *     40     8  fileid       names the backing file data/<fileid>
 *     48     8  atime_ns     signed
 *     56     8  mtime_ns     signed
 *     64     8  ctime_ns     signed
 *     72     2  link_len     symlink target length, at most CHFS_LINK_MAX - 1
 *     74     2  home_len     home address length, at most WIRE_ADDR_MAX - 1
 *     76     -  link bytes, then home bytes (no NULs, no terminator)
 *
 * The record ends exactly after the home bytes: a short file (a torn or truncated record) and
 * trailing bytes are both errors. Fixed offsets rather than the wire's length-prefixed stream
 * keep the format readable with a hex dump and decodable without the wire module; the explicit
 * version lets a future server tell an old record from garbage instead of misreading it.
 */
#define _GNU_SOURCE /* strnlen */
#include "record_codec.h"
#include "le.h"

#include <errno.h>
#include <string.h>

int record_encode(const struct chfs_md *md, uint8_t *buf, size_t cap, size_t *len)
{
	size_t ll = strnlen(md->link, sizeof md->link), hl = strnlen(md->home, sizeof md->home);
	if (ll >= sizeof md->link || hl >= sizeof md->home)
		return -ENAMETOOLONG;
	size_t total = RECORD_FIXED_LEN + ll + hl;
	if (total > cap)
		return -EMSGSIZE;
	put_le(buf + 0, RECORD_MAGIC, 4);
	put_le(buf + 4, RECORD_VERSION, 2);
	if (md->nlink > 0xffff || (md->nlink && !(md->flags & MD_LINKED)))
		return -EINVAL;
	put_le(buf + 6, md->nlink, 2);
	put_le(buf + 8, md->mode, 4);
	put_le(buf + 12, md->uid, 4);
	put_le(buf + 16, md->gid, 4);
	put_le(buf + 20, md->flags, 4);
	put_le(buf + 24, md->chunk_size, 4);
	put_le(buf + 28, md->pkey, 4);
	put_le(buf + 32, md->size, 8);
	put_le(buf + 40, md->fileid, 8);
	put_le(buf + 48, (uint64_t)md->atime_ns, 8);
	put_le(buf + 56, (uint64_t)md->mtime_ns, 8);
	put_le(buf + 64, (uint64_t)md->ctime_ns, 8);
	put_le(buf + 72, ll, 2);
	put_le(buf + 74, hl, 2);
	memcpy(buf + RECORD_FIXED_LEN, md->link, ll);
	memcpy(buf + RECORD_FIXED_LEN + ll, md->home, hl);
	*len = total;
	return 0;
}

int record_decode(const uint8_t *buf, size_t n, struct chfs_md *md)
{
	if (n < RECORD_FIXED_LEN || get_le(buf, 4) != RECORD_MAGIC || get_le(buf + 4, 2) != RECORD_VERSION)
		return -EBADMSG;
	uint32_t nlink = (uint32_t)get_le(buf + 6, 2);
	if (nlink && !(get_le(buf + 20, 4) & MD_LINKED))
		return -EBADMSG;
	size_t ll = (size_t)get_le(buf + 72, 2), hl = (size_t)get_le(buf + 74, 2);
	if (ll >= sizeof md->link || hl >= sizeof md->home || n != RECORD_FIXED_LEN + ll + hl)
		return -EBADMSG;
	const uint8_t *link = buf + RECORD_FIXED_LEN, *home = link + ll;
	if (memchr(link, '\0', ll) || memchr(home, '\0', hl))
		return -EBADMSG;
	md->mode = (uint32_t)get_le(buf + 8, 4);
	md->uid = (uint32_t)get_le(buf + 12, 4);
	md->gid = (uint32_t)get_le(buf + 16, 4);
	md->flags = (uint32_t)get_le(buf + 20, 4);
	md->nlink = nlink;
	md->chunk_size = (uint32_t)get_le(buf + 24, 4);
	md->pkey = (uint32_t)get_le(buf + 28, 4);
	md->size = get_le(buf + 32, 8);
	md->fileid = get_le(buf + 40, 8);
	md->atime_ns = (int64_t)get_le(buf + 48, 8);
	md->mtime_ns = (int64_t)get_le(buf + 56, 8);
	md->ctime_ns = (int64_t)get_le(buf + 64, 8);
	memcpy(md->link, link, ll);
	md->link[ll] = '\0';
	memcpy(md->home, home, hl);
	md->home[hl] = '\0';
	return 0;
}

uint32_t record_mode(const uint8_t *buf) { return (uint32_t)get_le(buf + 8, 4); }
