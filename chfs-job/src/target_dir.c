/* target_dir.c — a mapped open walks only the part of the path below its target's directory.
 *
 * The seccomp supervisor opens a mapped path itself (method_seccomp.c). The kernel walks the
 * whole path each time, and a long target costs that walk on every open: with a 3,994-character
 * target (20 directories) the walk is 3.3 µs of the trap's ~20. So at a rule's first use the
 * supervisor opens the directory that holds its target (O_PATH: nothing is read) and keeps the
 * descriptor; later opens through that rule are an openat() from it of the target's last
 * component and what follows, which are looked up at each open as before.
 *
 * A descriptor follows its directory, a path does not: after `mv /a/out /a/out.1; mkdir /a/out`
 * the path /a/out/f names a file in the new directory, the descriptor of the old one still
 * reaches out.1. So the descriptor is kept only while the path would still lead to it:
 *   - it is opened with RESOLVE_NO_SYMLINKS: a directory reached through a symbolic link is not
 *     kept (a link's target can change where no watch below sees it) — such rules walk each time;
 *   - inotify watches every directory on the way (/, /a, ... the parent of the kept one) for the
 *     next component's name being created, deleted, moved or changing its attributes (a mode that
 *     takes away search permission), and for the directory itself going; the watches are set
 *     before the directory is opened, so nothing done after its open goes unseen;
 *   - before every open through a kept descriptor the supervisor reads the inotify queue (one
 *     read that finds it empty, against the walk's 20 lookups): an event for a watched name, a
 *     removed watch or an overflowed queue drops every kept descriptor, and the next open walks
 *     and keeps afresh. The kernel queues the event before the rename (or rmdir, chmod) returns,
 *     so a program that renames and then opens is served by the new path, exactly as by a walk.
 * What is not seen: a mount placed over a directory on the way during the job (the kept
 * descriptor stays below it). A target whose directory's path is shorter than KEEP_MIN is opened
 * by its path (its walk costs no more than the read of the queue); so are rules whose directory
 * cannot be opened yet (tried again at the next open). */
#define _GNU_SOURCE
#include "target_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

#define KEEP_MIN 256 /* a shorter directory path walks in less than the queue's read costs */
#define UNKNOWN (-2) /* not kept: try at the next open */
#define UNUSED (-1)  /* opened by the full path for good */
#define WATCHED                                                                                            \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | \
	 IN_ONLYDIR)

struct watch {
	int wd;
	char *name; /* the component below the watched directory that leads to a kept one */
};

struct cj_target_dirs {
	const struct cj_policy *p;
	int *fd;     /* per rule: the target's directory, UNKNOWN or UNUSED */
	size_t *len; /* per rule: the length of that directory's path within r->to */
	int in;      /* the inotify descriptor, -1 until a directory is kept */
	struct watch *w;
	int nw, capw;
};

struct cj_target_dirs *cj_target_dirs_new(const struct cj_policy *p)
{
	struct cj_target_dirs *t = calloc(1, sizeof(*t));
	size_t n = p->nrules > 0 ? (size_t)p->nrules : 1;
	if (t)
		t->p = p, t->in = -1;
	if (!t || !(t->fd = malloc(n * sizeof(int))) || !(t->len = calloc(n, sizeof(size_t)))) {
		cj_target_dirs_free(t);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		t->fd[i] = UNKNOWN;
	return t;
}

/* Drop every kept descriptor and watch. */
static void forget_all(struct cj_target_dirs *t)
{
	for (int i = 0; t->fd && t->len && i < t->p->nrules; i++)
		if (t->fd[i] >= 0) {
			close(t->fd[i]);
			t->fd[i] = UNKNOWN;
		}
	for (int i = 0; i < t->nw; i++)
		free(t->w[i].name);
	t->nw = 0;
	if (t->in >= 0)
		close(t->in); /* takes its watches with it */
	t->in = -1;
}

void cj_target_dirs_free(struct cj_target_dirs *t)
{
	if (!t)
		return;
	forget_all(t);
	free(t->w);
	free(t->fd);
	free(t->len);
	free(t);
}

static int add_watch(struct cj_target_dirs *t, const char *dir, const char *name, size_t nlen)
{
	if (t->nw == t->capw) {
		int cap = t->capw ? t->capw * 2 : 32;
		struct watch *w = realloc(t->w, (size_t)cap * sizeof(*w));
		if (!w)
			return -ENOMEM;
		t->w = w, t->capw = cap;
	}
	int wd = inotify_add_watch(t->in, dir, WATCHED | IN_MASK_ADD);
	char *copy = strndup(name, nlen);
	if (wd < 0 || !copy) {
		free(copy);
		return wd < 0 ? -errno : -ENOMEM;
	}
	t->w[t->nw++] = (struct watch){wd, copy};
	return 0;
}

/* Watch every directory from "/" down to dir's parent for the name that leads to dir. */
static int watch_way(struct cj_target_dirs *t, const char *dir, size_t len)
{
	if (t->in < 0 && (t->in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
		return -errno;
	char path[PATH_MAX];
	size_t at = 0; /* path[0..at) is the directory watched next ("/" first) */
	while (at < len) {
		size_t start = at + 1, end = start;
		while (end < len && dir[end] != '/')
			end++;
		memcpy(path, dir, at ? at : 1);
		path[at ? at : 1] = '\0';
		int rc = add_watch(t, path, dir + start, end - start);
		if (rc < 0)
			return rc;
		at = end;
	}
	return 0;
}

/* Has anything on the way to a kept directory changed? Reads the whole queue. */
static bool way_changed(struct cj_target_dirs *t)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool changed = false;
	ssize_t n;
	while ((n = read(t->in, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)p;
			p += sizeof(*e) + e->len;
			if (e->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) ||
			    !e->len) {
				changed = true;
				continue;
			}
			for (int i = 0; i < t->nw && !changed; i++)
				changed = t->w[i].wd == e->wd && strcmp(t->w[i].name, e->name) == 0;
		}
	}
	return changed || (n < 0 && errno != EAGAIN && errno != EINTR);
}

/* Keep rule i's target directory: its descriptor, or UNKNOWN / UNUSED. */
static int keep_dir(struct cj_target_dirs *t, int i, const struct cj_rule *r)
{
	const char *slash = strrchr(r->to, '/');
	size_t len = slash ? (size_t)(slash - r->to) : 0;
	if (r->action != CJ_MAP || len < KEEP_MIN || len >= PATH_MAX)
		return UNUSED; /* a short walk: a 32-character target was 3 % slower kept (ab-openclose) */
	char dir[PATH_MAX];
	memcpy(dir, r->to, len);
	dir[len] = '\0';
	int nw = t->nw, rc = watch_way(t, dir, len), fd = -1;
	if (rc == 0) {
		struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                       .resolve = RESOLVE_NO_SYMLINKS};
		fd = (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof(how));
		rc = fd < 0 ? -errno : 0;
	}
	if (rc == 0) {
		t->len[i] = len;
		return fd;
	}
	/* not kept: its names are no longer watched for (a watch left in place reports only names
	 * nobody looks for, or itself going, which merely makes the kept ones be opened again) */
	while (t->nw > nw)
		free(t->w[--t->nw].name);
	/* ENOENT, ENOTDIR: not there yet; ELOOP: a link on the way; EACCES (a directory we may not
	 * watch), ENOSPC (no watches left): walk each time */
	return rc == -ENOENT || rc == -ENOTDIR ? UNKNOWN : UNUSED;
}

int cj_target_open(struct cj_target_dirs *t, const struct cj_rule *r, const char *path, int flags,
                   mode_t mode)
{
	long i = t && r ? r - t->p->rules : -1;
	int fd;
	if (i >= 0 && i < t->p->nrules) {
		if (t->in >= 0 && way_changed(t))
			forget_all(t);
		if (t->fd[i] == UNKNOWN)
			t->fd[i] = keep_dir(t, (int)i, r);
		size_t len = t->len[i];
		if (t->fd[i] >= 0 && strncmp(path, r->to, len) == 0 && path[len] == '/') {
			fd = openat(t->fd[i], path + len + 1, flags, mode);
			return fd < 0 ? -errno : fd;
		}
	}
	fd = open(path, flags, mode);
	return fd < 0 ? -errno : fd;
}
