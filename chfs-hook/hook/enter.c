/*
 * enter.c — relative names that walk into a mount point from a local directory.
 *
 * With the working directory (or a directory descriptor) in the local file system, "chfs/f"
 * from the mount point's parent, or "../chfs/f" from a sibling, names a file under the mount
 * point "/…/chfs", as it would on a kernel mount. The kernel knows nothing of the hook's mount
 * point, so such a name must be caught before it is handed over.
 *
 * A name can only enter a mount point through a component equal to the mount point's last one
 * (the directory it starts from is local, so it is not under the mount point already). Names
 * without such a component, nearly all, cost one scan of their components. For a name with
 * one, the directory the name has reached just before it ("" , "..", "x/y") is compared by
 * identity (device and inode) with the mount point's parent, so a symlinked or bind-mounted way
 * to that directory counts too, and a mere namesake elsewhere does not.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* 1 if `prefix` (relative to dirfd, "" = dirfd itself) is the directory that holds mt->dir. */
static int is_mount_parent(int dirfd, const char *prefix, const struct hook_mount *mt)
{
	struct stat here, parent;
	int r = *prefix ? fstatat(dirfd, prefix, &here, 0)
	                : fstatat(dirfd, dirfd == AT_FDCWD ? "." : "", &here, AT_EMPTY_PATH);
	if (r != 0)
		return 0;
	size_t cut = (size_t)(strrchr(mt->dir, '/') - mt->dir);
	char *p = strndup(mt->dir, cut ? cut : 1); /* "/" for a mount point at the top */
	if (!p)
		return 0;
	r = stat(p, &parent);
	free(p);
	return r == 0 && here.st_dev == parent.st_dev && here.st_ino == parent.st_ino;
}

const struct hook_mount *hook_entered_mount(int dirfd, char *path, const char **rest)
{
	for (int m = 0; m < hook_cfg.nmounts; m++) {
		const struct hook_mount *mt = &hook_cfg.mounts[m];
		size_t bl = mt->baselen;
		for (char *c = path; (c = (char *)chfs_find_component(c, mt->base, bl)); c += bl) {
			/* path[0..c) names the directory the component is looked up in */
			char *slash = c > path ? c - 1 : NULL;
			if (slash)
				*slash = 0;
			int hit = is_mount_parent(dirfd, slash ? path : "", mt);
			if (slash)
				*slash = '/';
			if (hit) {
				*rest = c + bl;
				return mt;
			}
		}
	}
	return NULL;
}
