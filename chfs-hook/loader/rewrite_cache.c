/*
 * rewrite_cache.c — remember where the syscall sites of a mapped file are, across processes.
 *
 * Finding the sites (rewrite.c: a byte search, then capstone from the start of each candidate's
 * function) is most of what a hooked process pays before main — several milliseconds for libc
 * alone, paid again by every short process of a workflow although libc, the shell and
 * coreutils are the same files each time. So the offsets found in an executable mapping of a
 * file are stored once, and a later process that maps the same bytes patches those offsets
 * directly, without capstone.
 *
 * Key and safety. An entry is looked up by the file's identity — device, inode, size, mtime
 * and ctime (ns) as stat() reports them for the mapping's path, checked against the device and
 * inode the kernel lists for the mapping — plus the mapping's file offset and length. Any
 * write to the file, and any utimensat that sets its mtime back, moves its ctime (which no
 * call can set), so a file replaced or modified in place gets a new scan. The entry is used
 * only if, besides, its own checksum is right, every recorded offset holds a `syscall`
 * (0f 05) right now, and a hash of the 16 bytes before and after every recorded site, taken
 * in this process before anything is changed, equals the one recorded: the bytes the rewrite
 * relies on are checked, not only the file's name and times. Hashing the whole mapping did
 * that too, but read every page of every library (20 MB of text for a Montage tool: ~4.5 ms,
 * most of a hooked process's start-up).
 *
 * Where. $CHFS_HOOK_CACHE (a directory; "0" turns the cache off), else
 * $XDG_CACHE_HOME/chfs-hook, else $HOME/.cache/chfs-hook — created 0700; used only if it is a
 * real directory (O_NOFOLLOW) owned by the user and closed to group and others. Entry files
 * must be regular files (O_NOFOLLOW) of the user with no group/other access. Entries are
 * written to a temporary file and renamed, so concurrent processes see whole entries only.
 * Any failure just means a normal scan.
 */
#define _GNU_SOURCE
#include "rewrite_cache.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define RC_MAGIC "CHFSRW2" /* 2: ctime in the key, site hash */
#define RC_WINDOW 16       /* bytes hashed on each side of a site */
#define RC_MAX_SITES (1u << 20)

struct rc_hdr {
	char magic[8];
	uint64_t dev, ino, size, mtime_ns, ctime_ns, offset, len, site_hash, nsites;
};

static char cache_dir[4096];
static int cache_state; /* 0 unknown, 1 usable, -1 off */

static uint64_t mix(uint64_t h, uint64_t w)
{
	h ^= w;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

uint64_t chfs_rcache_hash(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = 0x243f6a8885a308d3ull ^ len;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = mix(h, w);
	}
	uint64_t tail = 0;
	memcpy(&tail, b + i, len - i);
	return mix(h, tail);
}

uint64_t chfs_rcache_site_hash(const uint8_t *base, size_t len, const uint32_t *sites, long n)
{
	uint64_t h = 0x452821e638d01377ull ^ (uint64_t)n;
	for (long i = 0; i < n; i++) {
		size_t at = sites[i], lo = at > RC_WINDOW ? at - RC_WINDOW : 0;
		size_t hi = at + 2 + RC_WINDOW < len ? at + 2 + RC_WINDOW : len;
		uint8_t w[2 * RC_WINDOW + 2];
		memcpy(w, base + lo, hi - lo);
		long j = i;
		while (j > 0 && sites[j - 1] + 2 > lo)
			j--;
		for (; j < n && sites[j] < hi; j++) /* the sites in the window read 0f 05 */
			for (size_t b = 0; b < 2; b++)
				if (sites[j] + b >= lo && sites[j] + b < hi)
					w[sites[j] + b - lo] = b ? 0x05 : 0x0f;
		h = mix(h, chfs_rcache_hash(w, hi - lo) ^ at);
	}
	return h;
}

static int private_dir_fd(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The cache directory, opened (created if missing); -1 if off or not trustworthy. */
static int open_cache_dir(void)
{
	if (cache_state == 0) {
		const char *env = getenv("CHFS_HOOK_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
		const char *home = getenv("HOME");
		int n = -1;
		if (env && *env)
			n = strcmp(env, "0") == 0 || env[0] != '/'
			            ? -1
			            : snprintf(cache_dir, sizeof cache_dir, "%s", env);
		else if (xdg && xdg[0] == '/')
			n = snprintf(cache_dir, sizeof cache_dir, "%s/chfs-hook", xdg);
		else if (home && home[0] == '/') {
			char parent[4096];
			snprintf(parent, sizeof parent, "%s/.cache", home);
			mkdir(parent, 0700);
			n = snprintf(cache_dir, sizeof cache_dir, "%s/chfs-hook", parent);
		}
		cache_state = n > 0 && (size_t)n < sizeof cache_dir ? 1 : -1;
		if (cache_state > 0)
			mkdir(cache_dir, 0700);
	}
	return cache_state > 0 ? private_dir_fd(cache_dir) : -1;
}

int chfs_rcache_key(const char *path, unsigned dev_major, unsigned dev_minor, unsigned long ino,
                    uint64_t offset, uint64_t len, struct chfs_rcache_key *k)
{
	struct stat st;
	if (!path || path[0] != '/' || ino == 0 || stat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_ino != ino || major(st.st_dev) != dev_major || minor(st.st_dev) != dev_minor)
		return -1;
	k->dev = (uint64_t)st.st_dev;
	k->ino = (uint64_t)st.st_ino;
	k->size = (uint64_t)st.st_size;
	k->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	k->ctime_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000ull + (uint64_t)st.st_ctim.tv_nsec;
	k->offset = offset;
	k->len = len;
	return 0;
}

static void entry_name(const struct chfs_rcache_key *k, char *buf, size_t size)
{
	snprintf(buf, size, "rw-%016llx", (unsigned long long)chfs_rcache_hash(k, sizeof *k));
}

static int hdr_matches(const struct rc_hdr *h, const struct chfs_rcache_key *k)
{
	return memcmp(h->magic, RC_MAGIC, 8) == 0 && h->dev == k->dev && h->ino == k->ino &&
	       h->size == k->size && h->mtime_ns == k->mtime_ns && h->ctime_ns == k->ctime_ns &&
	       h->offset == k->offset && h->len == k->len && h->nsites <= RC_MAX_SITES;
}

long chfs_rcache_lookup(const struct chfs_rcache_key *k, uint32_t **sites, uint64_t *site_hash)
{
	int dfd = open_cache_dir();
	if (dfd < 0)
		return -1;
	char name[64];
	entry_name(k, name, sizeof name);
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return -1;
	long n = -1;
	struct stat st;
	struct rc_hdr h;
	uint32_t *v = NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
	    pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || !hdr_matches(&h, k) ||
	    (uint64_t)st.st_size != sizeof h + h.nsites * 4 + 8)
		goto out;
	size_t body = sizeof h + h.nsites * 4;
	uint8_t *all = malloc(body + 8);
	if (!all)
		goto out;
	uint64_t sum;
	if (pread(fd, all, body + 8, 0) == (ssize_t)(body + 8)) {
		memcpy(&sum, all + body, 8);
		if (sum == chfs_rcache_hash(all, body) && (v = malloc(h.nsites ? h.nsites * 4 : 1))) {
			memcpy(v, all + sizeof h, h.nsites * 4);
			n = (long)h.nsites;
		}
	}
	free(all);
out:
	close(fd);
	if (n >= 0) {
		for (long i = 0; i < n; i++)
			if (v[i] + 2 > k->len || (i && v[i] < v[i - 1] + 2)) { /* not this mapping's sites */
				n = -1;
				break;
			}
	}
	if (n < 0) {
		free(v);
		return -1;
	}
	*sites = v;
	*site_hash = h.site_hash;
	return n;
}

void chfs_rcache_store(const struct chfs_rcache_key *k, uint64_t site_hash, const uint32_t *sites, long n)
{
	if (n < 0 || (uint64_t)n > RC_MAX_SITES)
		return;
	int dfd = open_cache_dir();
	if (dfd < 0)
		return;
	struct rc_hdr h = {.dev = k->dev,
	                   .ino = k->ino,
	                   .size = k->size,
	                   .mtime_ns = k->mtime_ns,
	                   .ctime_ns = k->ctime_ns,
	                   .offset = k->offset,
	                   .len = k->len,
	                   .site_hash = site_hash,
	                   .nsites = (uint64_t)n};
	memcpy(h.magic, RC_MAGIC, 8);
	size_t body = sizeof h + (size_t)n * 4;
	uint8_t *all = malloc(body + 8);
	if (all) {
		memcpy(all, &h, sizeof h);
		if (n)
			memcpy(all + sizeof h, sites, (size_t)n * 4);
		uint64_t sum = chfs_rcache_hash(all, body);
		memcpy(all + body, &sum, 8);
		char name[64], tmp[96];
		entry_name(k, name, sizeof name);
		snprintf(tmp, sizeof tmp, "%s.%ld.tmp", name, (long)getpid());
		int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			int ok = write(fd, all, body + 8) == (ssize_t)(body + 8);
			close(fd);
			if (!ok || renameat(dfd, tmp, dfd, name) < 0)
				unlinkat(dfd, tmp, 0);
		}
		free(all);
	}
	close(dfd);
}
