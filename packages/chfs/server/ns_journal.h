/*
 * ns_journal.h — durability of the in-memory namespace: a snapshot file plus an append-only
 * journal of changes since it, in the storage directory:
 *
 *   DIR/ns.snap      every record at the last compaction (written to ns.snap.tmp, fsynced,
 *                    renamed over, directory fsynced)
 *   DIR/ns.journal   PUT/DEL frames appended since; each frame carries its length and a
 *                    CRC32C, so a torn or garbage tail is detected, dropped and cut off
 *
 * The byte layout is in ns_journal.c's top comment. Opening replays snapshot then journal
 * through a callback; appends are plain write()s (no fsync: see ns_journal.c for the
 * guarantee); compaction rewrites the snapshot from a caller-supplied iteration and restarts
 * the journal. The module knows nothing of the index or of locking: the caller serialises
 * appends and compaction. All functions return 0 or -errno.
 */
#ifndef CHFSD_NS_JOURNAL_H
#define CHFSD_NS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define NSJ_PUT 1 /* path gets the record (record_codec bytes) */
#define NSJ_DEL 2 /* path's record goes */

struct nsj;

/* Replay callback: op NSJ_PUT (rec/len: a record that decodes) or NSJ_DEL (len 0). */
typedef int (*nsj_apply_fn)(void *arg, int op, const char *path, const uint8_t *rec, size_t len);

/* 1 if DIR holds a snapshot (ns.snap), 0 if not, or -errno. */
int nsj_has_snapshot(int rootfd);
/* Open (creating an empty journal if none) and replay the snapshot and the journal in order.
 * A bad frame in the journal ends the replay: it and everything after it are dropped (counted
 * in *dropped bytes) and cut off the file. A damaged snapshot is -EIO. */
int nsj_open(int rootfd, nsj_apply_fn apply, void *arg, struct nsj **out, uint64_t *dropped);
void nsj_close(struct nsj *j);

/* Append one change. On failure the journal is left as before the call. */
int nsj_append(struct nsj *j, int op, const char *path, const uint8_t *rec, size_t len);
/* Append "to gets rec, from goes" as one group: replayed whole or not at all. */
int nsj_append_move(struct nsj *j, const char *to, const uint8_t *rec, size_t len, const char *from);
/* A group of up to NSJ_GROUP_MAX frames (a change and the directory records it touches):
 * nsj_stage each, more = 1 on all but the last, then nsj_commit writes them with one pwrite;
 * replayed whole or not at all. A failed stage or commit drops what was staged. */
#define NSJ_GROUP_MAX 4
int nsj_stage(struct nsj *j, int op, int more, const char *path, const uint8_t *rec, size_t len);
int nsj_commit(struct nsj *j);
/* 1 when the journal has grown enough that compaction pays (see ns_journal.c). */
int nsj_should_compact(const struct nsj *j);
/* Compaction source: calls emit(ectx, path, rec, len) for every record, returns emit's first
 * non-zero result or 0. */
typedef int (*nsj_emit_fn)(void *ectx, const char *path, const uint8_t *rec, size_t len);
typedef int (*nsj_source_fn)(void *arg, nsj_emit_fn emit, void *ectx);
int nsj_compact(struct nsj *j, nsj_source_fn src, void *arg);
/* Set the journal size above which nsj_should_compact says yes; 0: after every change (tests). */
void nsj_set_compact_bytes(struct nsj *j, uint64_t bytes);
uint64_t nsj_journal_bytes(const struct nsj *j);
/* The size of a journal without frames (its header). */
uint64_t nsj_empty_bytes(void);

uint32_t nsj_crc32c(uint32_t crc, const void *buf, size_t n);

#endif
