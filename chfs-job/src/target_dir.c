/* target_dir.c — a mapped open walks only the part of the path below its target's directory.
 *
 * The seccomp supervisor opens a mapped path itself (method_seccomp.c). The kernel walks the
 * whole path each time, and a long target costs that walk on every open: with a 3,994-character
 * target (20 directories) the supervisor's open took twice the time of the program's own open of a
 * short path. So at a rule's first use the supervisor opens the directory that holds its target
 * (O_PATH: no permission is needed beyond the walk, nothing is read) and keeps the descriptor;
 * every later open through that rule is an openat() from it of the target's last component and
 * what follows.
 *
 * What that changes: the target's directory is bound when the rule is first used, as a bind
 * mount binds its source — renaming it, or replacing it by another directory of the same name,
 * during the job is not followed (the program keeps seeing the directory it first saw; a removed
 * one gives ENOENT). The target itself and everything below it are looked up at each open as
 * before. A target directly under "/" is opened by its path (nothing to save); so is a rule whose
 * directory cannot be opened yet (ENOENT, ENOTDIR: tried again at the next open). */
#define _GNU_SOURCE
#include "target_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UNKNOWN (-2) /* not tried yet, or its directory did not exist: try at the next open */
#define UNUSED (-1)  /* opened by the full path */

struct cj_target_dirs {
	const struct cj_policy *p;
	int *fd;     /* per rule: the target's directory, UNKNOWN or UNUSED */
	size_t *len; /* per rule: the length of that directory's path within r->to */
};

struct cj_target_dirs *cj_target_dirs_new(const struct cj_policy *p)
{
	struct cj_target_dirs *t = calloc(1, sizeof(*t));
	size_t n = p->nrules > 0 ? (size_t)p->nrules : 1;
	if (t)
		t->p = p;
	if (!t || !(t->fd = malloc(n * sizeof(int))) || !(t->len = calloc(n, sizeof(size_t)))) {
		cj_target_dirs_free(t);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		t->fd[i] = UNKNOWN;
	return t;
}

void cj_target_dirs_free(struct cj_target_dirs *t)
{
	if (!t)
		return;
	for (int i = 0; t->fd && t->len && i < t->p->nrules; i++)
		if (t->fd[i] >= 0)
			close(t->fd[i]);
	free(t->fd);
	free(t->len);
	free(t);
}

/* Open rule i's target directory: its descriptor, or UNKNOWN / UNUSED. */
static int open_dir(struct cj_target_dirs *t, int i, const struct cj_rule *r)
{
	const char *slash = strrchr(r->to, '/');
	size_t len = slash ? (size_t)(slash - r->to) : 0;
	if (r->action != CJ_MAP || len == 0 || len >= PATH_MAX)
		return UNUSED; /* the target lies directly under "/": its walk is short */
	char dir[PATH_MAX];
	memcpy(dir, r->to, len);
	dir[len] = '\0';
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? UNKNOWN : UNUSED;
	t->len[i] = len;
	return fd;
}

int cj_target_open(struct cj_target_dirs *t, const struct cj_rule *r, const char *path, int flags,
                   mode_t mode)
{
	long i = t && r ? r - t->p->rules : -1;
	int fd;
	if (i >= 0 && i < t->p->nrules) {
		if (t->fd[i] == UNKNOWN)
			t->fd[i] = open_dir(t, (int)i, r);
		size_t len = t->len[i];
		if (t->fd[i] >= 0 && strncmp(path, r->to, len) == 0 && path[len] == '/') {
			fd = openat(t->fd[i], path + len + 1, flags, mode);
			return fd < 0 ? -errno : fd;
		}
	}
	fd = open(path, flags, mode);
	return fd < 0 ? -errno : fd;
}
