/*
 * wire.h — the CHFS RPC wire format (version 7: the directory fence, DIR_EMPTY's fence and the
 * parent id of name-adding requests; version 5: nlink in the metadata and the hard-link ops;
 * version 4: owner and group in SETATTR; version 3 brought the membership epoch in every header, the placement tag in data requests and the rebalance ops),
 * shared by libchfs and chfsd.
 *
 * Every message = a fixed 64-byte header + a body. Header (little endian):
 *   u32 magic 'CHFS' | u16 version | u16 op | u64 request id | u8 secret[32] | u32 body length |
 *   i32 status (replies: 0 or -errno; requests: 0) | u64 epoch (requests: the member-list epoch
 *   the sender placed the request with, 0 = none; replies: the server's epoch)
 * A server whose epoch is newer than a request's answers WIRE_ERETRY without doing anything: the
 * client fetches the list from that server and places the request again.
 * Replies carry op | WIRE_REPLY and a zero secret. The body is a sequence of fields written by
 * the encoder below: u32/u64/i64 little endian, strings and byte strings as u32 length + bytes
 * (strings never contain NUL and are length-checked against the field's limit).
 *
 * Decoding never trusts the input: every read is bounds-checked, errors are sticky (-EBADMSG),
 * wire_decode_req() validates every field of a request (lengths, path syntax, segment bounds,
 * RMA ranges) before a server handler sees it, and trailing garbage is an error. The fuzz target
 * tests/fuzz/fuzz_decode.c drives wire_decode_req() with arbitrary bytes.
 *
 * Bulk data: a READ/WRITE request names segments (logical offset, length, offset in the client
 * buffer). Data travels inline after the segment list when small, otherwise the request carries
 * an RMA descriptor of the client's registered buffer and the server pulls/pushes by RMA.
 */
#ifndef CHFS_WIRE_H
#define CHFS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "path.h"
#include "secret.h"

#define WIRE_MAGIC 0x53464843u /* "CHFS" */
#define WIRE_VERSION 7
#define WIRE_HDR_LEN 64
#define WIRE_REPLY 0x8000
#define WIRE_ADDR_MAX 256
#define WIRE_LIST_MAX 65536 /* comma-joined server list */
#define WIRE_ID_LEN 32      /* server identity: 32 lowercase hex digits */
#define WIRE_MAX_SEGS 1024
#define WIRE_MAX_OFFSET (1ull << 62) /* largest logical file offset */
#define WIRE_READDIR_MAX 60000       /* reply budget for readdir entries */
#define WIRE_FIND_MAX 120000         /* reply budget for find entries */

enum wire_op {
	WOP_NODE_LIST = 1, /* -> member-list body (wire_list_put) */
	WOP_JOIN,          /* str id, str addr -> member-list body */
	WOP_SET_LIST,      /* member-list body (server to server) */
	/* CREATE, MKDIR, INSERT and RENAME end with an optional u64 parent id: the file id of
	 * the directory the client saw as the new name's parent (absent or 0: unknown); the
	 * server refuses the name with ENOENT while that directory is fenced (server/fence.c).
	 * DIR_EMPTY's optional fence: SET fences the directory before looking (a removal's
	 * check), LIFT lifts that fence (the removal failed). */
	WOP_CREATE,    /* str path, md, u32 flags(WIRE_CREATE_*)[, parent] -> u32 existed, md */
	WOP_STAT,      /* str path -> md */
	WOP_MKDIR,     /* str path, md[, u64 parent id] */
	WOP_RMDIR,     /* str path */
	WOP_DIR_EMPTY, /* str path[, u64 dir id, u32 fence (WIRE_FENCE_*)] -> u32 has_entries */
	WOP_READDIR, /* str path, str cursor -> u32 n, u32 eof, n x (str name, u32 mode, u64 size, i64 mtime) */
	WOP_UNLINK,        /* str path -> md (of the removed entry) */
	WOP_INSERT,        /* str path, md, u32 flags[, u64 parent id] -> u32 replaced, md old
	                    * (rename, other owner) */
	WOP_REMOVE_IF,     /* str path, u64 fileid (rename source, other owner) */
	WOP_RENAME,        /* str from, str to[, u64 parent id of to] -> u32 replaced, md old
	                    * (both on this server) */
	WOP_SETATTR,       /* str path, u64 fileid, u32 which, u32 mode, i64 atime, i64 mtime, u64 size,
	                * u32 uid, u32 gid -> md */
	WOP_WRITE,         /* u64 fileid, tag, segs, rma?, bytes data -> u64 written */
	WOP_READ,          /* u64 fileid, tag, segs, rma? -> u32 n, n x u64 got, bytes data */
	WOP_DATA_TRUNCATE, /* u64 fileid, u64 len */
	WOP_DATA_REMOVE,   /* u64 fileid */
	WOP_DATA_STAT,     /* u64 fileid, u64 size, i64 mtime, i64 ctime (the metadata's) -> u64 size,
	                    * i64 mtime merged with the backing file by the server's local-file rule */
	WOP_LOCAL_PATH,    /* u64 fileid, tag -> str absolute backing path (made, tagged, if absent) */
	WOP_SYNC,          /* -> (flushes the server's storage) */
	WOP_MOVED,         /* u64 fileid -> i64 when, str path (last rename of it this server took) */
	WOP_STATUS,        /* -> str one "key=value ..." line (chlist -s) */
	/* Rebalance (server to server, see server/rebalance.c): the new owner of a key takes it
	 * from the previous owner (GET, store, DROP); the previous owner HINTs what it still holds
	 * and says DONE when it holds nothing another server owns. */
	WOP_MIG_GET_ENTRY,  /* str path -> u32 found, md */
	WOP_MIG_DROP_ENTRY, /* str path, u64 fileid */
	WOP_MIG_GET_DATA,   /* u64 fileid, u64 off, u64 len -> u32 found, bytes data (<= WIRE_MIG_PIECE) */
	WOP_MIG_DROP_DATA,  /* u64 fileid, u64 off, u64 len (punch; the file goes when empty) */
	WOP_MIG_HINT,       /* u32 n, n x (u32 kind, str path | u64 fileid, tag, u64 chunk index) */
	WOP_MIG_DONE,       /* u64 ring epoch, str id */
	/* chfind (server/find.c): the entries this server owns below a start path that match a
	 * predicate (common/findpred.h), page by page in path order. session: 0 on the first
	 * call, then the one the last reply gave (the server keeps the sorted matches a while);
	 * cursor: the last relative path delivered ("" first). visited: entries examined. */
	WOP_FIND, /* str start, u64 session, str cursor, bytes pred -> u64 session, u32 n, u32 eof,
	           * u64 visited, n x (str relative path, u32 mode, u64 size, i64 mtime) */
	/* Stage-in from the backend (server/backend*.c): the owner of the path makes the backend
	 * file a CHFS entry (with this chunk size if it is new), then every server fetches the
	 * chunks it owns, one request each. */
	WOP_STAGE_ENTRY,  /* str path, u32 chunk size -> md */
	WOP_STAGE_DATA,   /* u64 fileid, tag (+ backend path), u64 size, u32 piece -> u64 bytes fetched */
	WOP_FLUSH,        /* [u32 phase: 0 both, 1 data, 2 names and attributes] -> u32 n, n x str
	                   * "path: error" (flush everything written to the backend now; the files
	                   * and changes that failed stay in CHFS) */
	WOP_FLUSH_ERRORS, /* -> u32 n, n x str "path: error" (the files whose last flush to the
	                   * backend failed, as WOP_FLUSH lists them, without flushing: status) */
	/* Hard links (server/inode.c, lib/link.c): a linked file's attributes live in its inode
	 * record, kept by the owner of the reserved key wire_inode_key(fileid); its names are
	 * records with MD_LINKED. */
	WOP_INODE_GET,     /* u64 fileid -> md (nlink = its names) */
	WOP_INODE_PUT,     /* u64 fileid, md: the inode record of a file being linked, nlink 1
	                    * (kept as it is if it exists: a link cut short, or a concurrent one) */
	WOP_INODE_ADJUST,  /* u64 fileid, u32 add (1: a name added, 0: one removed) -> md after
	                    * (nlink 0: the record is gone; EMLINK above WIRE_NLINK_MAX) */
	WOP_INODE_SETATTR, /* u64 fileid, then SETATTR's fields after its file id -> md */
	WOP_RELINK,        /* u64 fileid, str path (server to server: a rename of the file reached the
	                   * backend, its data go to and come from path now; server/relink.c) */
	/* Files that outlive their name (lib/orphan_lease.c, server/orphans.c): a client holding
	 * an unlinked open file leases it at one server, which removes its data if the lease
	 * runs out (the client died). Not placed: the client renews at the server it chose. */
	WOP_ORPHAN_HOLD, /* u64 fileid, u64 size -> u32 lease in ms (registers or renews) */
	WOP_ORPHAN_DROP, /* u64 fileid (the holder removed the data itself) */
	/* Batched stage-in (server/stage_batch.c, lib/stagein.c): STAGE_ENTRY and STAGE_DATA for
	 * up to WIRE_STAGE_MAX files in one request. ENTRIES goes to one server with paths it owns;
	 * it may answer fewer than n (its reply was full): the client sends the rest again. FILES
	 * goes to every server, each fetching the chunks it owns of every file listed. */
	WOP_STAGE_ENTRIES, /* u32 chunk size, u32 n, n x str path -> u32 done, done x (i32 rc, md if
	                    * rc is 0) */
	WOP_STAGE_FILES,   /* u32 piece, u32 n, n x (u64 fileid, tag + backend path, u64 size)
	                    * -> u64 bytes fetched, u32 n, n x i32 rc */
	WOP_META_SETTLE,   /* str path (server to server: a create at path, which a rename to
	                    * another server's name left, has the pending changes of path applied
	                    * to the backend first; server/flush_settle.c) */
	WOP_RELINK_OWED,   /* str addr[, str id] (server to server: the server at addr, of identity
	                    * id, starts or leaves; the receiver sends it the WOP_RELINKs it could
	                    * not deliver before answering; server/relink_owed.c. Without the id —
	                    * an earlier build's — debts are matched by the address) */
	WOP_WRITE_REPORT,  /* str path, u64 end, then WRITE's body -> u64 written, i32 report status:
	                    * a WRITE to the owner of the file's name (path) that also reports the
	                    * writer's size, as SETATTR WIRE_SET_SIZE_MAX of end after the data are
	                    * written (lib/io.c; saves the close's SETATTR) */
	/* Open leases (lib/open_lease.c, server/open_leases.c): an open tells the owner of the
	 * file's name that this client (the header's lease identity) holds the file open, so that
	 * an unlink or a rename over it by another client keeps the data (an orphan, orphans.c)
	 * until the last holder closes it or stops renewing. */
	WOP_STAT_OPEN,   /* str path -> md: STAT, and the owner records an open lease of a
	                    * regular file for the client */
	WOP_LEASE_RENEW, /* u32 n, n x (u64 fileid, u32 closes) -> u32 lease in ms: renews all
	                    * the client's open leases at this server and drops `closes` opens of
	                    * each file listed; fileid 0: the client ends, drop all its leases */
	WOP_REJOINED,    /* str id (server to server): that member joined again through the sender,
	                  * so it is up (the receiver's failure detector need not wait a round) */
	/* The file lost its last name but its data are kept for open descriptors: never flush them
	 * to the backend (server/flush.c). */
	WOP_DATA_UNNAMED, /* u64 fileid, tag (no path) */
	/* A DATA_REMOVE or DATA_UNNAMED of a file with a backend did not reach the member at addr
	 * (down, stopped, unreachable): the receiver owes it the file's empty backend name, which
	 * it delivers when that member starts or resumes (server/relink_owed.c), so the member
	 * never flushes the file's chunks it still holds under the removed name. */
	WOP_UNNAMED_OWED, /* u64 fileid, str addr */
	/* A DATA_REMOVE did not reach every server that may hold the file's chunks (one down,
	 * stopped, unreachable): the receiver lists the file as an orphan due at once and sends
	 * DATA_REMOVE to every member until all removed it (server/orphans.c). */
	WOP_ORPHAN_DUE, /* u64 fileid, u64 size */
	WOP_MAX
};
const char *wire_op_name(unsigned op);

/* Reply status (negative, outside the errno range): the request's epoch is older than the
 * server's member list; nothing was done, refresh the list from this server and retry. */
#define WIRE_ERETRY (-10001)
#define WIRE_MIG_PIECE (96u << 10) /* data bytes per MIG_GET_DATA reply */
#define WIRE_MIG_HINT_MAX 128      /* items per MIG_HINT */
enum { WIRE_MIG_ENTRY = 1, WIRE_MIG_CHUNK = 2 };
#define WIRE_STAGE_MAX 256 /* files per STAGE_ENTRIES / STAGE_FILES */

#define WIRE_CREATE_EXCL 1
#define WIRE_CREATE_LEASE 2 /* record an open lease of the new file for the client (STAT_OPEN) */
#define WIRE_LEASE_MAX 4096 /* items per LEASE_RENEW */
#define WIRE_INSERT_NOREPLACE 1
#define WIRE_INSERT_LINK 2 /* a new name of a linked file (chfs_link), not a rename's half */
#define WIRE_FENCE_SET 1   /* DIR_EMPTY: fence the directory (server/fence.c) */
#define WIRE_FENCE_LIFT 2  /* DIR_EMPTY: lift the fence this client set */

/* SETATTR "which" bits. */
#define WIRE_SET_MODE 1
#define WIRE_SET_ATIME 2
#define WIRE_SET_MTIME 4
#define WIRE_SET_SIZE_MAX 8 /* size = max(size, arg) and mtime = now (writes reported) */
#define WIRE_SET_SIZE 16    /* size = arg (truncate) */
#define WIRE_SET_UID 32     /* owner = uid (chown; the client applied POSIX's rules) */
#define WIRE_SET_GID 64     /* group = gid */
/* A directory gained or lost an entry (the client sends these to the directory's owner when it
 * is not the entry's, see lib/dirtimes.c; the entry's owner applies them itself otherwise):
 * mtime = ctime = the server's now; SUBDIR_ADD/DEL also count a subdirectory (md.subdirs). */
#define WIRE_SET_TOUCH 128
#define WIRE_SET_SUBDIR_ADD 256
#define WIRE_SET_SUBDIR_DEL 512
/* Make a plain file record a name record of a linked file (MD_LINKED; its attributes move to
 * the inode record, which the client wrote first). Any SETATTR of a name record already linked
 * answers WIRE_ELINKED: the client sends it to the inode record instead. */
#define WIRE_SET_LINKED 1024
#define WIRE_SET_ALL 2047
/* Reply status (outside the errno range): the name is a name record of a linked file; its
 * attributes are in the inode record (WOP_INODE_SETATTR). */
#define WIRE_ELINKED (-10002)
#define WIRE_NLINK_MAX 65535 /* (the record keeps nlink in 16 bits) */
/* The inode record's key: "\x01" + 16 hex digits of the file id, a top-level name no client
 * path may use (path_canonical refuses it). out: at least WIRE_INODE_KEY_LEN + 1 bytes. */
#define WIRE_INODE_KEY_LEN 17
void wire_inode_key(uint64_t fileid, char *out);

/* What a SETATTR changes: the WIRE_SET_* bits in `which` and their values. */
struct wire_setattr {
	uint32_t which, mode, uid, gid;
	int64_t atime_ns, mtime_ns;
	uint64_t size;
};

/* md.flags */
#define MD_LOCAL 1   /* all chunks on md.home */
#define MD_BACKEND 2 /* read through from the backend (chfsd -b): md.link = its backend path */
#define MD_FLUSH 4   /* written data are flushed to the backend at md.link (chfsd -b) */
#define MD_PATHED (MD_BACKEND | MD_FLUSH) /* data requests carry md.link */
#define MD_LINKED \
	8 /* a hard-linked file: a name record (attributes in the inode record, see
                     * WOP_INODE_GET) or, at the inode key, the inode record itself */
#define MD_FLAGS_ALL (MD_LOCAL | MD_BACKEND | MD_FLUSH | MD_LINKED)
/* In the removed record an UNLINK, RENAME or INSERT answers only (never stored, refused in
 * requests): other clients hold the file open, the server keeps its data until they close it
 * (server/open_leases.c); the client must not remove them. */
#define MD_HELD 16

/* A namespace entry: the metadata of a file, directory or symlink. */
struct chfs_md {
	uint32_t mode, uid, gid, flags;
	uint32_t chunk_size;
	union {
		uint32_t pkey;    /* a file: placement key of its chunks (striped files) */
		uint32_t subdirs; /* a directory: how many subdirectories it has (st_nlink - 2) */
		uint32_t rdev;    /* a device node: its number (Linux's new_encode_dev) */
	};
	uint64_t size, fileid;
	int64_t atime_ns, mtime_ns, ctime_ns;
	uint32_t nlink;           /* an inode record's names (MD_LINKED); 0 otherwise */
	char link[CHFS_LINK_MAX]; /* symlink target, or backend path (a kernel path) */
	char home[WIRE_ADDR_MAX]; /* MD_LOCAL: address of the server holding every chunk */
};

struct wire_hdr {
	uint32_t magic;
	uint16_t version, op;
	uint64_t reqid;
	uint8_t secret[CHFS_SECRET_LEN];
	uint32_t body_len;
	int32_t status;
	uint64_t epoch;
};

/* Where a file's chunks live (READ/WRITE carry it, data files keep it for the rebalance):
 * placement key, chunk size and md.flags (MD_LOCAL files stay on their home). */
struct wire_tag {
	uint32_t pkey, chunk_size, flags;
};
/* One rebalance item of a MIG_HINT. */
struct wire_mig_item {
	uint32_t kind; /* WIRE_MIG_ENTRY or WIRE_MIG_CHUNK */
	char path[CHFS_PATH_MAX];
	uint64_t fileid, index;
	struct wire_tag tag;
};

struct wire_seg {
	uint64_t off, len, bufoff;
};

/* A client buffer the server reaches by RMA, as a request carries it (24 bytes, little endian):
 * the protocol's own type, so the wire format does not depend on the transport. libchfs encodes
 * it from the transport's descriptor, chfsd converts it back at the call into the transport. */
struct wire_rma {
	uint64_t addr; /* provider-specific base (virtual address or 0) */
	uint64_t key;  /* remote key */
	uint64_t len;  /* bytes exposed */
};

/* A decoded, validated request. Strings are NUL-terminated copies; data points into the
 * message. Large (~13 KiB): keep one per worker thread, not on small stacks. */
struct wire_req {
	struct wire_hdr h;
	char path[CHFS_PATH_MAX], path2[CHFS_PATH_MAX];
	char addr[WIRE_ADDR_MAX];
	char id[WIRE_ID_LEN + 1]; /* JOIN */
	struct chfs_md md;
	uint64_t fileid, size, epoch, ring_epoch; /* epoch/ring_epoch: SET_LIST, MIG_DONE */
	/* DIR_EMPTY: the directory's file id; CREATE/MKDIR/INSERT/RENAME: the new name's
	 * parent's (0: not sent) */
	uint64_t dirid;
	struct wire_tag tag;  /* READ, WRITE */
	uint32_t nitems;      /* MIG_HINT, STAGE_ENTRIES/FILES: items validated, */
	const uint8_t *items; /* read them with wire_*_get() from here */
	size_t items_len;
	uint32_t flags, which, mode, vnodes; /* STAGE_ENTRY/ENTRIES: chunk size in flags */
	uint32_t uid, gid;                   /* SETATTR */
	uint32_t piece;                      /* STAGE_DATA/FILES: fetch buffer size (0 = default) */
	int64_t atime_ns, mtime_ns;
	uint32_t nseg;
	uint64_t seg_total;
	struct wire_seg seg[WIRE_MAX_SEGS];
	int has_rma;
	struct wire_rma rma;
	const uint8_t *data;
	uint64_t data_len;
	const char *list; /* SET_LIST: member list (see wire_list_parse), not NUL-terminated */
	uint32_t list_len;
	const char *prev; /* SET_LIST: the list before the last ring change */
	uint32_t prev_len;
};
/* The change a decoded SETATTR or INODE_SETATTR request carries. */
struct wire_setattr wire_req_setattr(const struct wire_req *r);

/* ---- encoder / decoder -------------------------------------------------------------- */
struct wenc {
	uint8_t *p;
	size_t cap, len;
	int err; /* -EMSGSIZE once something did not fit */
};
struct wdec {
	const uint8_t *p;
	size_t len, pos;
	int err; /* -EBADMSG once something was malformed */
};

void wenc_init(struct wenc *e, void *buf, size_t cap);
void wenc_u32(struct wenc *e, uint32_t v);
void wenc_u64(struct wenc *e, uint64_t v);
void wenc_i64(struct wenc *e, int64_t v);
void wenc_bytes(struct wenc *e, const void *p, size_t n); /* u32 length + bytes */
void wenc_str(struct wenc *e, const char *s);
void wenc_raw(struct wenc *e, const void *p, size_t n);
/* Reserve n bytes and return where they go (NULL on overflow). */
void *wenc_reserve(struct wenc *e, size_t n);
void wenc_md(struct wenc *e, const struct chfs_md *m);
/* The change of a SETATTR or INODE_SETATTR request (after its path and file id): which, mode,
 * atime, mtime, size, uid, gid. */
void wenc_setattr(struct wenc *e, const struct wire_setattr *a);
/* u64 file id, then the placement tag (u32 pkey, u32 chunk size, u32 flags) of m's file;
 * for an MD_BACKEND or MD_FLUSH file then str backend path (md.link): the chunk's server fetches from it. */
void wire_tag_put(struct wenc *e, const struct chfs_md *m);

void wdec_init(struct wdec *d, const void *buf, size_t len);
uint32_t wdec_u32(struct wdec *d);
uint64_t wdec_u64(struct wdec *d);
int64_t wdec_i64(struct wdec *d);
/* Byte string: pointer into the message (NULL if malformed or longer than max). */
const void *wdec_bytes(struct wdec *d, size_t max, size_t *n);
/* String copied into out (capacity cap, so at most cap-1 bytes), NUL-terminated; rejects
 * embedded NUL. */
void wdec_str(struct wdec *d, char *out, size_t cap);
const void *wdec_raw(struct wdec *d, size_t n);
void wdec_md(struct wdec *d, struct chfs_md *m);
/* 0 if everything decoded and nothing is left over, else -EBADMSG. */
int wdec_finish(struct wdec *d);

/* MIG_HINT items: put one; read them back one by one from a validated request (d initialised
 * over r->items/r->items_len). 0 or -EBADMSG/-EINVAL. */
void wire_mig_item_put(struct wenc *e, const struct wire_mig_item *it);
int wire_mig_item_get(struct wdec *d, struct wire_mig_item *it);

/* STAGE_FILES items: put one (the file of m, its size m->size); read them back one by one from
 * a validated request (d over r->items/r->items_len). STAGE_ENTRIES items are canonical paths
 * (wire_stage_path_get, path: CHFS_PATH_MAX bytes). 0 or -EBADMSG/-EINVAL. */
struct wire_stage_file {
	uint64_t fileid, size;
	struct wire_tag tag;
	char path[CHFS_LINK_MAX]; /* backend path (md.link) */
};
void wire_stage_file_put(struct wenc *e, const struct chfs_md *m);
int wire_stage_file_get(struct wdec *d, struct wire_stage_file *f);
int wire_stage_path_get(struct wdec *d, char *path);

/* Header: encode into the first WIRE_HDR_LEN bytes of a message; decode checks magic, version,
 * op range and that body_len matches the message length. */
void wire_hdr_put(void *buf, const struct wire_hdr *h);
int wire_hdr_get(const void *buf, size_t len, struct wire_hdr *h);
/* The lease identity of a request's sender (0: none). */
static inline uint32_t wire_lease_client(const struct wire_hdr *h) { return (uint32_t)(h->reqid >> 32); }
/* LEASE_RENEW items: read one back from a validated request (d over r->items/r->items_len). */
int wire_lease_item_get(struct wdec *d, uint64_t *fileid, uint32_t *closes);

/* Decode and validate a complete request message (header + body). 0 or -EBADMSG/-EINVAL/
 * -ENAMETOOLONG/-EPROTO (unknown version). Does not check the secret (the handler does). */
int wire_decode_req(const void *msg, size_t len, struct wire_req *r);

/* Validate a server address string ("proto://..." printable, no ',' or spaces). */
int wire_addr_ok(const char *a, size_t len);
/* Validate a server identity (WIRE_ID_LEN lowercase hex digits). */
int wire_id_ok(const char *id, size_t len);

/* The pool's member list travels as one string "id=addr,id=addr,..." in pool order (sorted by
 * id). Parse it into at most max members (m may be NULL to only validate and count): the count,
 * or -EINVAL (malformed entry, duplicate id or address) / -E2BIG (more than max). */
struct wire_member {
	char id[WIRE_ID_LEN + 1];
	char addr[WIRE_ADDR_MAX];
};
int wire_list_parse(const char *list, size_t len, struct wire_member *m, unsigned max);
/* Member-list body of a NODE_LIST/JOIN reply and of a SET_LIST request: u64 epoch, u32 virtual
 * nodes per server (the pool's ring parameter), str member list, str ids of the members the
 * sender's failure detector considers down (comma-joined, may be empty). get: the strings
 * point into the message. Then the ring history the rebalance needs: u64 ring epoch (the epoch at which the member set
 * last changed), str the member list before that change ("" if none). */
struct wire_listinfo {
	uint64_t epoch, ring_epoch;
	uint32_t vnodes;
	const char *list, *down, *prev;
	size_t nlist, ndown, nprev;
};
void wire_list_put(struct wenc *e, const struct wire_listinfo *li);
int wire_list_get(const void *body, size_t len, struct wire_listinfo *li);
/* 1 if id is one of the comma-joined ids in down[0..n). */
int wire_id_in(const char *id, const char *down, size_t n);

#endif
