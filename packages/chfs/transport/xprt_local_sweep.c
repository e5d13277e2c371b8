/*
 * xprt_local_sweep.c — removing the sockets of dead servers from our socket directory.
 *
 * A SIGKILLed server leaves its socket file behind (xprt_local_dir.c names it): a client's
 * connect to it fails with ECONNREFUSED (the client falls back to libfabric), and over time the
 * directory fills with dead sockets. A starting server (xprt_local_listen) sweeps the directory:
 * a socket that refuses a connection has nobody listening, and is removed. Only in the directory
 * xprt_local_dir_open trusts (opened without following a link), only sockets of our uid (lstat:
 * never a link, never another kind of file), never one someone listens on, and at most
 * SWEEP_MAX entries looked at per start.
 *
 * A refused connect is not quite proof: a server binds its socket before it listens, and a
 * restarted server replaces its predecessor's dead socket by a fresh one under the same name.
 * So a socket younger than SWEEP_AGE_S is left alone (a server between bind and listen), and a
 * refused one is first renamed, atomically, to a name no server uses (',' never appears in
 * xprt_local_sock_path's names): if the file moved is not the one that was looked at (another
 * inode), it is put back; else it is removed under that name, where nobody can bind meanwhile.
 */
#define _GNU_SOURCE
#include "xprt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_MAX 256
#define SWEEP_AGE_S 2

/* A socket of ours at dfd/name, old enough: its stat, else -1. */
static int candidate(int dfd, const char *name, struct stat *st)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st->st_mode) ||
	    st->st_uid != geteuid())
		return -1;
	return now.tv_sec - st->st_mtim.tv_sec >= SWEEP_AGE_S ? 0 : -1;
}

/* Does nobody listen on dir/name? Only ECONNREFUSED says so (a full backlog is EAGAIN). */
static bool refused(const char *dir, const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path)
		return false;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return false;
	bool dead = connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno == ECONNREFUSED;
	close(fd);
	return dead;
}

/* Remove dfd/name if it is still the socket st describes; 1 if removed. */
static int remove_dead(int dfd, const char *name, const struct stat *st)
{
	static atomic_uint seq; /* two servers of one process may sweep at once */
	char tmp[48];
	struct stat now;
	snprintf(tmp, sizeof tmp, ",sweep-%d-%u", (int)getpid(), atomic_fetch_add(&seq, 1));
	if (renameat(dfd, name, dfd, tmp) < 0)
		return 0;
	if (fstatat(dfd, tmp, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st->st_ino &&
	    now.st_dev == st->st_dev)
		return unlinkat(dfd, tmp, 0) == 0;
	/* A fresh socket took the name meanwhile: back where its server put it (unless yet another
	 * one is there now, which is then the newest). */
	if (renameat2(dfd, tmp, dfd, name, RENAME_NOREPLACE) < 0)
		unlinkat(dfd, tmp, 0);
	return 0;
}

int xprt_local_sweep(const char *dir)
{
	int dfd = xprt_local_dir_open(dir);
	if (dfd < 0)
		return dfd;
	DIR *d = fdopendir(dfd);
	if (!d) {
		int rc = -errno;
		close(dfd);
		return rc;
	}
	int removed = 0;
	struct dirent *e;
	struct stat st;
	for (int seen = 0; seen < SWEEP_MAX && (e = readdir(d)); seen++) {
		if (e->d_type != DT_SOCK && e->d_type != DT_UNKNOWN)
			continue;
		if (candidate(dfd, e->d_name, &st) == 0 && refused(dir, e->d_name))
			removed += remove_dead(dfd, e->d_name, &st);
	}
	closedir(d); /* closes dfd */
	return removed;
}
