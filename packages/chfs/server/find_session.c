/*
 * find_session.c — see find_session.h. A small table under one mutex: a find takes its set
 * once per page, so the lock is held for microseconds per RPC. Expired sets are swept whenever
 * the table is touched.
 */
#define _GNU_SOURCE
#include "find_session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot {
	struct find_session *s;
	time_t used;
} table[FIND_SESSIONS];

void find_session_free(struct find_session *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->m[i].rel);
	free(s->m);
	free(s->start);
	free(s->pred);
	free(s);
}

struct find_session *find_session_new(const char *start, const void *pred, size_t predlen)
{
	struct find_session *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->start = strdup(start);
	s->pred = malloc(predlen ? predlen : 1);
	if (!s->start || !s->pred) {
		find_session_free(s);
		return NULL;
	}
	memcpy(s->pred, pred, predlen);
	s->predlen = predlen;
	while (s->id == 0 && getrandom(&s->id, sizeof s->id, 0) != (ssize_t)sizeof s->id)
		s->id = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)(uintptr_t)s;
	return s;
}

/* Free the sets nobody asked for within FIND_SESSION_IDLE seconds (lock held). */
static void sweep(time_t now)
{
	for (int i = 0; i < FIND_SESSIONS; i++)
		if (table[i].s && now - table[i].used > FIND_SESSION_IDLE) {
			find_session_free(table[i].s);
			table[i].s = NULL;
		}
}

struct find_session *find_session_take(uint64_t id, const char *start, const void *pred, size_t predlen)
{
	struct find_session *s = NULL;
	pthread_mutex_lock(&lock);
	sweep(time(NULL));
	for (int i = 0; i < FIND_SESSIONS && id; i++) {
		struct find_session *c = table[i].s;
		if (c && c->id == id && !strcmp(c->start, start) && c->predlen == predlen &&
		    !memcmp(c->pred, pred, predlen)) {
			s = c;
			table[i].s = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return s;
}

void find_session_put(struct find_session *s)
{
	time_t now = time(NULL);
	struct find_session *evicted = NULL;
	pthread_mutex_lock(&lock);
	sweep(now);
	int slot = 0;
	for (int i = 0; i < FIND_SESSIONS; i++) {
		if (!table[i].s) {
			slot = i;
			break;
		}
		if (table[i].used < table[slot].used)
			slot = i;
	}
	evicted = table[slot].s;
	table[slot].s = s;
	table[slot].used = now;
	pthread_mutex_unlock(&lock);
	find_session_free(evicted); /* outside the lock: it may hold many strings */
}
