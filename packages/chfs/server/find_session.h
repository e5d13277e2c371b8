/*
 * find_session.h — the result sets of WOP_FIND kept between pages.
 *
 * A find walks every entry this server holds once and keeps the matches sorted by relative
 * path; the client fetches them page by page (a reply holds at most WIRE_FIND_MAX bytes). The
 * set stays here under a random 64-bit id until its last page is read or it has not been used
 * for FIND_SESSION_IDLE seconds; at most FIND_SESSIONS sets are kept (the least recently used
 * goes first). A set is owned by one request at a time: find_session_take() removes it from
 * the table, find_session_put() returns it. Losing a set (expiry, eviction, restart) costs a
 * new walk, never a wrong answer: the client's cursor (the last path it got) says where to go
 * on.
 */
#ifndef CHFSD_FIND_SESSION_H
#define CHFSD_FIND_SESSION_H

#include <stddef.h>
#include <stdint.h>

#define FIND_SESSIONS 32
#define FIND_SESSION_IDLE 60

struct find_match {
	char *rel; /* path relative to the start, heap */
	uint32_t mode;
	uint64_t size;
	int64_t mtime_ns;
};

struct find_session {
	uint64_t id;
	char *start;   /* canonical start path */
	uint8_t *pred; /* the encoded predicate it was made for */
	size_t predlen;
	struct find_match *m; /* sorted by rel */
	size_t n, cap;
	int complete; /* m holds every match after the cursor it was made with (else only the
	               * smallest ones: walk again after the last) */
};

/* A new empty set for (start, pred) with a fresh id; NULL on ENOMEM. */
struct find_session *find_session_new(const char *start, const void *pred, size_t predlen);
/* Remove set `id` from the table if it was made for the same start and predicate. */
struct find_session *find_session_take(uint64_t id, const char *start, const void *pred, size_t predlen);
/* Keep s for the next page (evicting the least recently used set if the table is full). */
void find_session_put(struct find_session *s);
void find_session_free(struct find_session *s);

#endif
