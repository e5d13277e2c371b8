/*
 * chfs-mktree — build a tree from a manifest on stdin, in CHFS (default) or, with --local DIR,
 * in a local directory, so the chfind tests and benchmark get the same tree in both places.
 *
 * Manifest lines (paths relative to the root, no spaces):
 *   d PATH MTIME_NS          directory
 *   f PATH SIZE MTIME_NS     regular file of SIZE bytes (sparse: truncated to its size)
 *   l PATH TARGET            symbolic link (its mtime is left at creation time)
 * Parents come before children. Every entry is created first, then the mtimes are set (a
 * directory's local mtime changes while entries are created in it). CHFS paths are ROOT/PATH
 * with ROOT from --root (default /). Prints "created N entries" at the end; exit 1 at the
 * first failure with one line naming the path.
 */
#define _GNU_SOURCE
#include <chfs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ent {
	char kind;
	char *path;
	long long mtime_ns;
};

static const char *local_dir, *root = "/";
static char full[8192];

static const char *at(const char *rel)
{
	const char *base = local_dir ? local_dir : root;
	size_t bl = strlen(base);
	snprintf(full, sizeof full, "%s%s%s", base, bl && base[bl - 1] == '/' ? "" : "/", rel);
	return full;
}

static int make(char kind, const char *rel, long long size, const char *target)
{
	const char *p = at(rel);
	if (local_dir) {
		if (kind == 'd')
			return mkdir(p, 0755);
		if (kind == 'l')
			return symlink(target, p);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || (size && ftruncate(fd, size) < 0))
			return -1;
		return close(fd);
	}
	if (kind == 'd')
		return chfs_mkdir(p, 0755);
	if (kind == 'l')
		return chfs_symlink(target, p);
	int fd = chfs_create(p, O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || (size && chfs_ftruncate(fd, size) < 0))
		return -1;
	return chfs_close(fd);
}

static int set_mtime(const char *rel, long long ns)
{
	struct timespec ts[2] = {{.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000},
	                         {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000}};
	const char *p = at(rel);
	return local_dir ? utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW) : chfs_utimens(p, ts);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			printf("usage: chfs-mktree [--local DIR | --root CHFSDIR] < MANIFEST\n"
			       "Build a tree from manifest lines 'd PATH MTIME_NS', 'f PATH SIZE MTIME_NS',\n"
			       "'l PATH TARGET' in CHFS (default, under --root) or in a local directory.\n");
			return 0;
		} else if (!strcmp(argv[i], "--local") && i + 1 < argc) {
			local_dir = argv[++i];
		} else if (!strcmp(argv[i], "--root") && i + 1 < argc) {
			root = argv[++i];
		} else {
			fprintf(stderr, "chfs-mktree: unknown argument %s (see --help)\n", argv[i]);
			return 2;
		}
	}
	if (!local_dir && chfs_init(NULL) < 0) {
		fprintf(stderr, "chfs-mktree: cannot reach CHFS: %s\n", strerror(errno));
		return 1;
	}
	struct ent *e = NULL;
	size_t n = 0, cap = 0, total = 0;
	char line[8192], path[4096], target[4096];
	while (fgets(line, sizeof line, stdin)) {
		char kind;
		long long a = 0, b = 0;
		int ok = sscanf(line, "%c %4095s", &kind, path) == 2;
		if (ok && kind == 'd')
			ok = sscanf(line, "d %*s %lld", &b) == 1;
		else if (ok && kind == 'f')
			ok = sscanf(line, "f %*s %lld %lld", &a, &b) == 2;
		else if (ok && kind == 'l')
			ok = sscanf(line, "l %*s %4095s", target) == 1;
		else
			ok = 0;
		if (!ok) {
			fprintf(stderr, "chfs-mktree: malformed line: %s", line);
			return 2;
		}
		if (make(kind, path, a, target) < 0) {
			fprintf(stderr, "chfs-mktree: %s: %s\n", at(path), strerror(errno));
			return 1;
		}
		total++;
		if (kind == 'l')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			if (!(e = realloc(e, cap * sizeof *e)))
				return 1;
		}
		e[n++] = (struct ent){kind, strdup(path), b};
	}
	for (size_t i = n; i-- > 0;) {
		if (set_mtime(e[i].path, e[i].mtime_ns) < 0) {
			fprintf(stderr, "chfs-mktree: utimens %s: %s\n", at(e[i].path), strerror(errno));
			return 1;
		}
		free(e[i].path);
	}
	free(e);
	printf("created %zu entries\n", total);
	if (!local_dir)
		chfs_term();
	return 0;
}
