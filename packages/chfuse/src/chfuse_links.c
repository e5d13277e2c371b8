/*
 * chfuse_links.c — keeping the kernel's caches of a hard-linked file's names coherent.
 *
 * libfuse's high-level API gives every name its own kernel inode, so the kernel does not know
 * that two names are one file: after a write, truncate, chmod, link or unlink through one name
 * it would answer the other names from its attribute cache (size, nlink, ctime) for up to
 * attr_timeout. chfuse remembers, for the regular files whose getattr said nlink > 1, which
 * names it saw with which inode number (CHFS's file id), and when one of them changes it
 * invalidates the kernel's cache of the others (fuse_invalidate_path: attributes and pages;
 * never the name being operated on, whose inode the kernel may hold locked). A bounded table
 * (TABLE_MAX names, the oldest replaced): a name that fell out is coherent again after
 * attr_timeout, as any file changed on another node.
 */
#define _GNU_SOURCE
#include "chfuse.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TABLE_MAX 1024
#define BATCH 16 /* other names invalidated per change */

struct seen {
	ino_t ino;
	char *path;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen table[TABLE_MAX];
static unsigned next_slot;

static int find(const char *path)
{
	for (int i = 0; i < TABLE_MAX; i++)
		if (table[i].path && strcmp(table[i].path, path) == 0)
			return i;
	return -1;
}

static void forget_locked(int i)
{
	free(table[i].path);
	table[i].path = NULL;
}

void chfuse_links_seen(const char *path, const struct stat *st)
{
	if (!path)
		return;
	int linked = S_ISREG(st->st_mode) && st->st_nlink > 1;
	pthread_mutex_lock(&lock);
	int i = find(path);
	if (i >= 0 && (!linked || table[i].ino != st->st_ino))
		forget_locked(i);
	if (linked && (i < 0 || !table[i].path)) {
		char *p = strdup(path);
		if (p) {
			i = (int)(next_slot++ % TABLE_MAX);
			forget_locked(i);
			table[i] = (struct seen){.ino = st->st_ino, .path = p};
		}
	}
	pthread_mutex_unlock(&lock);
}

void chfuse_links_changed(const char *path, int forget)
{
	char *others[BATCH];
	int n = 0;
	if (!path)
		return;
	pthread_mutex_lock(&lock);
	int i = find(path);
	if (i >= 0) {
		ino_t ino = table[i].ino;
		for (int j = 0; j < TABLE_MAX && n < BATCH; j++)
			if (j != i && table[j].path && table[j].ino == ino &&
			    (others[n] = strdup(table[j].path)))
				n++;
		if (forget)
			forget_locked(i);
	}
	pthread_mutex_unlock(&lock);
	struct fuse *f = fuse_get_context()->fuse;
	for (int k = 0; k < n; k++) {
		fuse_invalidate_path(f, others[k]); /* -ENOENT: the kernel forgot it already */
		free(others[k]);
	}
}
