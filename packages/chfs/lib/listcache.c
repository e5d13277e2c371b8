/*
 * listcache.c — the pool's member list kept node-locally between processes.
 *
 * Every process that uses CHFS needs the member list before its first operation; asking a
 * server for it costs a connection and a round trip to the bootstrap server, which need not be
 * a server the process otherwise talks to. The list changes rarely (its epoch says when), so
 * the last list any process of this user fetched is kept in a small file and reused by the
 * processes that start within CHFS_LIST_CACHE_MSEC after it was fetched (500 ms by default:
 * which servers the pool finds down is only known from a fresh list, and a new process must
 * learn that about as soon as one without the cache; see client.c).
 *
 * Trust. The file lives in a directory that must be owned by the user, be a real directory
 * (opened with O_NOFOLLOW) and grant nothing to group or others; the file itself must be a
 * regular file (O_NOFOLLOW), owned by the user, mode 0600 or stricter. Anything else — a
 * directory another user created first under /tmp, a symlink, a file with the wrong owner —
 * is ignored, never repaired or followed. Its name is a hash of the pool secret and the
 * bootstrap list, and its content ends with a checksum over the secret and the content: a
 * truncated, damaged or foreign entry fails the check and is ignored (then overwritten).
 *
 * Correctness does not rest on the entry being current: servers refuse requests placed with
 * another epoch (WIRE_ERETRY) and the client fetches the newer list then (client.c); a cached
 * list naming a server that no longer answers is dropped and fetched afresh (rpc.c); before a
 * request for a server it calls down fails with EIO, a fresh list from a live member is asked
 * whether that server is back, and replaces the entry (client.c, client_down_confirmed).
 *
 * Format (text, one "key value" per line): "chfs-list 1", server, fetched_ms (unix time in ms), epoch,
 * vnodes, ring_epoch, list, down, prev, sum (16 hex digits). Written to a temporary file and
 * renamed, so readers see the old or the new entry.
 */
#define _GNU_SOURCE
#include "listcache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define LISTCACHE_MAX (256 * 1024)
#define LISTCACHE_MAGIC "chfs-list 1"

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

#define FNV_BASIS 0xcbf29ce484222325ull

static uint64_t keyed_sum(const uint8_t *secret, const void *data, size_t len)
{
	return fnv(fnv(FNV_BASIS, secret, CHFS_SECRET_LEN), data, len);
}

void listcache_init(struct listcache *c, const struct chfs_config *cfg, const char *server,
                    const uint8_t secret[CHFS_SECRET_LEN])
{
	memset(c, 0, sizeof *c);
	if (!server || !*server)
		return;
	snprintf(c->server, sizeof c->server, "%s", server);
	if (strcmp(cfg->list_cache, "0") == 0)
		return;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (cfg->list_cache[0])
		n = snprintf(c->dir, sizeof c->dir, "%s", cfg->list_cache);
	else if (xdg && xdg[0] == '/')
		n = snprintf(c->dir, sizeof c->dir, "%s/chfs", xdg);
	else
		n = snprintf(c->dir, sizeof c->dir, "/tmp/chfs-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= sizeof c->dir)
		return;
	memcpy(c->secret, secret, CHFS_SECRET_LEN);
	uint64_t h = keyed_sum(secret, server, strlen(server));
	snprintf(c->name, sizeof c->name, "list-%016" PRIx64, h);
	c->enabled = 1;
}

/* Is st something only this user controls? (Directories: nothing for group/others at all.) */
static int owned_privately(const struct stat *st)
{
	return st->st_uid == geteuid() && (st->st_mode & 077) == 0;
}

/* The cache directory, opened; -errno if missing (create: made 0700) or not trustworthy. */
static int open_dir(const struct listcache *c, int create)
{
	if (create && mkdir(c->dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || !owned_privately(&st)) {
		log_info("list cache %s ignored: not a directory of this user closed to others", c->dir);
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Read the entry into a NUL-terminated heap buffer. */
static char *read_entry(const struct listcache *c, size_t *len)
{
	int dfd = open_dir(c, 0);
	if (dfd < 0)
		return NULL;
	int fd = openat(dfd, c->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && owned_privately(&st) && st.st_size > 0 &&
	    st.st_size <= LISTCACHE_MAX && (buf = malloc((size_t)st.st_size + 1))) {
		ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
		if (n != st.st_size) {
			free(buf);
			buf = NULL;
		} else {
			buf[n] = '\0';
			*len = (size_t)n;
		}
	} else if (fstat(fd, &st) == 0) {
		log_info("list cache %s/%s ignored: not a private regular file of this user", c->dir,
		         c->name);
	}
	close(fd);
	return buf;
}

/* Next "key value" line of *p: value (NUL-terminated in place) if the key matches. */
static char *field(char **p, const char *key)
{
	size_t k = strlen(key);
	char *line = *p, *nl = strchr(line, '\n');
	if (!nl || strncmp(line, key, k) != 0 || line[k] != ' ')
		return NULL;
	*nl = '\0';
	*p = nl + 1;
	return line + k + 1;
}

static int number(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int64_t listcache_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int listcache_load(const struct listcache *c, struct nodelist *out, int64_t *fetched_ms)
{
	if (!c->enabled)
		return -ENOENT;
	size_t len = 0;
	char *buf = read_entry(c, &len);
	if (!buf)
		return -ENOENT;
	int rc = -ENOENT;
	/* The checksum covers everything before the "sum " line. */
	char *sumline = strstr(buf, "\nsum ");
	uint64_t want = 0;
	if (!sumline)
		goto out;
	sumline++;
	char *end;
	errno = 0;
	want = strtoull(sumline + 4, &end, 16);
	if (errno || end != sumline + 4 + 16 || strcmp(end, "\n") != 0 ||
	    keyed_sum(c->secret, buf, (size_t)(sumline - buf)) != want)
		goto out;
	char *p = buf, *v;
	uint64_t t, epoch, vnodes, ring_epoch;
	if (strncmp(p, LISTCACHE_MAGIC "\n", strlen(LISTCACHE_MAGIC) + 1) != 0)
		goto out;
	p += strlen(LISTCACHE_MAGIC) + 1;
	if (!(v = field(&p, "server")) || strcmp(v, c->server) != 0 || number(field(&p, "fetched_ms"), &t) ||
	    number(field(&p, "epoch"), &epoch) || epoch == 0 || number(field(&p, "vnodes"), &vnodes) ||
	    vnodes == 0 || vnodes > UINT32_MAX || number(field(&p, "ring_epoch"), &ring_epoch))
		goto out;
	char *list = field(&p, "list"), *down = field(&p, "down"), *prev = field(&p, "prev");
	if (!list || !*list || !down || !prev || p != sumline)
		goto out;
	memset(out, 0, sizeof *out);
	out->epoch = epoch;
	out->vnodes = (uint32_t)vnodes;
	out->ring_epoch = ring_epoch;
	out->len = strlen(list);
	out->ndown = strlen(down);
	out->nprev = strlen(prev);
	out->list = strdup(list);
	out->down = strdup(down);
	out->prev = strdup(prev);
	if (!out->list || !out->down || !out->prev) {
		nodelist_free(out);
		goto out;
	}
	*fetched_ms = (int64_t)t;
	rc = 0;
out:
	if (rc)
		log_info("list cache %s/%s ignored: malformed or not of this pool", c->dir, c->name);
	free(buf);
	return rc;
}

void listcache_store(const struct listcache *c, const struct nodelist *l)
{
	if (!c->enabled)
		return;
	size_t cap = 512 + strlen(c->server) + l->len + l->ndown + l->nprev;
	char *buf = malloc(cap);
	if (!buf)
		return;
	int n = snprintf(buf, cap,
	                 LISTCACHE_MAGIC "\nserver %s\nfetched_ms %lld\nepoch %" PRIu64 "\nvnodes %" PRIu32
	                                 "\nring_epoch %" PRIu64 "\nlist %.*s\ndown %.*s\nprev %.*s\n",
	                 c->server, (long long)listcache_now_ms(), l->epoch, l->vnodes, l->ring_epoch,
	                 (int)l->len, l->list ? l->list : "", (int)l->ndown, l->down ? l->down : "",
	                 (int)l->nprev, l->prev ? l->prev : "");
	if (n < 0 || (size_t)n + 32 > cap) {
		free(buf);
		return;
	}
	n += snprintf(buf + n, cap - (size_t)n, "sum %016" PRIx64 "\n", keyed_sum(c->secret, buf, (size_t)n));
	int dfd = open_dir(c, 1);
	if (dfd >= 0) {
		char tmp[64];
		snprintf(tmp, sizeof tmp, "%s.%ld.tmp", c->name, (long)getpid());
		int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			int ok = write(fd, buf, (size_t)n) == n;
			close(fd);
			if (!ok || renameat(dfd, tmp, dfd, c->name) < 0)
				unlinkat(dfd, tmp, 0);
		}
		close(dfd);
	}
	free(buf);
}

void listcache_drop(const struct listcache *c)
{
	if (!c->enabled)
		return;
	int dfd = open_dir(c, 0);
	if (dfd >= 0) {
		unlinkat(dfd, c->name, 0);
		close(dfd);
	}
}
