/*
 * xprt_local_dir.c — where a server's node-local socket lives, and whether it can be trusted.
 *
 * A server publishes a Unix socket named after its transport address inside a directory only
 * its user can enter: $CHFS_LOCAL_DIR if set, else /tmp/chfs-local-<euid>. /tmp is shared, so
 * another user may have created that name first, planted a symbolic link there, or left a
 * directory open to others: nothing another user could have named or written is trusted. The
 * server creates the directory with mode 0700 and otherwise refuses to publish; a client uses a
 * socket only when lstat() shows a real directory owned by its euid with no group or other
 * permissions, holding a socket owned by its euid (and xprt_local.c checks the server's
 * SO_PEERCRED uid after connecting). A directory that passes cannot be renamed or written by
 * others (the owner alone writes it; /tmp's sticky bit protects the name), so the checks do not
 * race with an attacker.
 */
#include "xprt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int xprt_local_dir(char *buf, size_t size)
{
	const char *d = getenv("CHFS_LOCAL_DIR");
	int n = d && *d ? snprintf(buf, size, "%s", d)
	                : snprintf(buf, size, "/tmp/chfs-local-%u", (unsigned)geteuid());
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int stat_trusted(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == geteuid() && !(st->st_mode & 077) ? 0 : -EPERM;
}

static int dir_trusted(const char *dir)
{
	struct stat st;
	return lstat(dir, &st) < 0 ? -errno : stat_trusted(&st);
}

int xprt_local_dir_open(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = fstat(fd, &st) < 0 ? -errno : stat_trusted(&st);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int xprt_local_dir_check(const char *dir) { return dir_trusted(dir); }

int xprt_local_dir_make(const char *dir)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return dir_trusted(dir); /* an existing one must pass as if we had just made it */
}

int xprt_local_sock_check(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	return S_ISSOCK(st.st_mode) && st.st_uid == geteuid() ? 0 : -EPERM;
}

/* The network namespace this process is in (0 if unknown). Part of a socket's name: processes
 * in other network namespaces (the simulated nodes of ci/testlib/netns.py share this file
 * system) are other nodes, and must not reach each other past their network. */
static unsigned long long netns_id(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* "<dir>/<address with every character outside [A-Za-z0-9.-] made '-'>@<netns>", or a hash of
 * the address when that would not fit in sun_path. */
int xprt_local_sock_path(const char *dir, const char *addr, char *buf, size_t size)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path);
	if (size > max)
		size = max;
	char name[XPRT_ADDR_MAX + 16];
	size_t n = 0;
	for (const char *p = addr; *p && n + 1 < sizeof name; p++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		          c == '.';
		name[n++] = ok ? c : '-';
	}
	name[n] = 0;
	unsigned long long ns = netns_id();
	int w = snprintf(buf, size, "%s/%s@%llu", dir, name, ns);
	if (w >= 0 && (size_t)w < size)
		return 0;
	uint64_t h = 1469598103934665603ull;
	for (const char *p = addr; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	w = snprintf(buf, size, "%s/h%016llx@%llu", dir, (unsigned long long)h, ns);
	return w < 0 || (size_t)w >= size ? -ENAMETOOLONG : 0;
}
