/*
 * chfuse_hidden.c — files unlinked (or renamed over) while open, on the mount.
 *
 * The kernel's stat of a FUSE inode carries no file handle, and libfuse's high-level API
 * answers a request for an inode whose name was removed with ESTALE before chfuse sees it. So
 * chfuse lets libfuse "hide" such a file (hard_remove off): libfuse renames the open file to
 * DIR/.fuse_hidden<16 hex> and keeps that name for the inode until the last release, then
 * unlinks it. chfuse turns that rename into what POSIX asks for: it opens one descriptor of its
 * own on the file, unlinks the real name in CHFS (libchfs keeps the data of open descriptors,
 * lib/orphan.c), and remembers hidden name -> descriptor. The hidden name never exists in CHFS,
 * so it is in no listing, rmdir of the directory works, and other nodes see the name gone at
 * once. getattr of the hidden name answers from the descriptor (st_nlink 0); libfuse's final
 * unlink of it closes the descriptor, and the data go with the last one. Limit: a rename by a
 * user to a name of exactly that form (.fuse_hidden + 16 lowercase hex digits) is taken for
 * libfuse's and removes the source name; libfuse's hide mode reserves these names anyway.
 */
#include "chfuse.h"

#include <chfs.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct hidden {
	char *path;
	int fd;
	struct hidden *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct hidden *list;

int chfuse_is_hidden_name(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, ".fuse_hidden", 12) != 0 || strlen(base) != 12 + 16)
		return 0;
	return strspn(base + 12, "0123456789abcdef") == 16;
}

int chfuse_hide(const char *from, const char *hidden)
{
	struct hidden *h = calloc(1, sizeof *h);
	if (!h || !(h->path = strdup(hidden))) {
		free(h);
		return -ENOMEM;
	}
	h->fd = chfs_open(from, O_RDONLY);
	int rc = h->fd < 0 ? (errno ? -errno : -EIO) : 0;
	if (rc == 0 && chfs_unlink(from) < 0) {
		rc = errno ? -errno : -EIO;
		chfs_close(h->fd);
	}
	if (rc) {
		free(h->path);
		free(h);
		return rc;
	}
	pthread_mutex_lock(&lock);
	h->next = list;
	list = h;
	pthread_mutex_unlock(&lock);
	return 0;
}

int chfuse_hidden_fd(const char *path)
{
	int fd = -1;
	pthread_mutex_lock(&lock);
	for (struct hidden *h = list; h; h = h->next)
		if (strcmp(h->path, path) == 0) {
			fd = h->fd;
			break;
		}
	pthread_mutex_unlock(&lock);
	return fd;
}

int chfuse_unhide(const char *path)
{
	struct hidden *found = NULL;
	pthread_mutex_lock(&lock);
	for (struct hidden **p = &list; *p; p = &(*p)->next)
		if (strcmp((*p)->path, path) == 0) {
			found = *p;
			*p = found->next;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (!found)
		return 0;
	chfs_close(found->fd);
	free(found->path);
	free(found);
	return 1;
}
