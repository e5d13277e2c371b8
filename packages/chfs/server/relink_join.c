/*
 * relink_join.c — a server that joins the pool is owed the backend names of renamed files.
 *
 * Every member keeps the table fileid → backend name of the files whose rename reached the
 * backend (relink.c), so a descriptor opened before the rename, which still sends the old name
 * with its data requests, writes to the new one. A server that joins later (chfsctl -A) was
 * told none of them, yet it takes chunks of every file from the join on: without the table it
 * would flush a stale descriptor's writes under the old name (a stray backend file, bytes
 * missing from the new one).
 *
 * So when the member set changes, each server that was serving (not itself just joining) makes
 * every member that was not in its list before owed every name its table holds — debts like
 * those of a member that was down (relink_owed.c: durable, delivered with the file's current
 * name, a removed file settled). The new member asks for its debts before it flushes
 * (brelink_pull at start-up, after its JOIN is answered); a member that has not installed the
 * new list yet when asked catches up with the asker's epoch first (handlers.c), so the debts
 * exist before it answers. The bootstrap makes them before it answers the JOIN.
 *
 * A rename reaching the backend during the join: its announcement goes to the member list the
 * announcing server holds after noting the name (relink.c); either that list has the new member,
 * or the name was in the table when the list was installed here and is owed.
 */
#define _GNU_SOURCE
#include "relink.h"

#include "chfsd.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

/* The members of a list string ("id=addr,..."): *n of them, NULL if none or out of memory. */
static struct wire_member *parse(const char *list, int *n)
{
	struct wire_member *m = NULL;
	int k = *list ? wire_list_parse(list, strlen(list), NULL, WIRE_LIST_MAX) : 0;
	if (k > 0 && (m = calloc((size_t)k, sizeof *m)) &&
	    wire_list_parse(list, strlen(list), m, (unsigned)k) != k) {
		free(m);
		m = NULL;
	}
	*n = m ? k : 0;
	return m;
}

static int has(const struct wire_member *m, int n, const char *id)
{
	for (int i = 0; i < n; i++)
		if (strcmp(m[i].id, id) == 0)
			return 1;
	return 0;
}

void brelink_joined(struct chfsd *d, const char *before)
{
	if (!d->bk || !before)
		return;
	char *list = malloc(WIRE_LIST_MAX);
	unsigned vnodes;
	int nb, nc;
	if (list)
		members_get(&d->mem, list, WIRE_LIST_MAX, &vnodes);
	struct wire_member *b = parse(before, &nb), *c = list ? parse(list, &nc) : NULL;
	free(list);
	size_t n = 0;
	uint64_t *ids = NULL;
	for (int i = 0; c && i < nc; i++) {
		if (strcmp(c[i].id, d->id) == 0 || has(b, nb, c[i].id))
			continue;
		if (!ids && (!(ids = brelink_ids(&n)) || n == 0))
			break; /* (no renamed file: nothing owed) */
		bowed_add_all(d, c[i].id, c[i].addr, ids, n);
		log_notice(
		        "backend names: server %s (%s) joined; owed the backend names of %zu renamed files",
		        c[i].id, c[i].addr, n);
	}
	if (!c)
		log_err("backend names: member list unreadable; a server that joined may flush files "
		        "renamed on the backend under their old names");
	free(ids);
	free(b);
	free(c);
}
