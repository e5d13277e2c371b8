/*
 * shm_doorbell.c — futex doorbell in a shared-memory file (see shm_doorbell.h).
 *
 * The futex is a shared (not FUTEX_PRIVATE) one because the word lives in a MAP_SHARED file
 * mapping seen by several processes.
 *
 * /dev/shm is shared by every user, so nothing read from a doorbell file is trusted: the sweep
 * and a successor act only on files owned by our own uid (fstat of the opened fd, O_NOFOLLOW),
 * accept only plain endpoint names (no '/', no leading '.'), and remove files with unlinkat()
 * relative to one fd of the directory. A file shorter than the mapping is refused (SIGBUS).
 */
#include "shm_doorbell.h"

#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DB_SIZE 4096
#define SHM_DIR "/dev/shm"
#define DB_PREFIX "chfs-xprt-db."

static void db_path(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "/dev/shm/chfs-xprt-db.%s", name);
}

/* Names we act on: what our own endpoints use ("chfs-<pid>-<n>~<tag>", user-chosen names of
 * [A-Za-z0-9._-]). No '/', no leading '.', so a name can only ever be a file in /dev/shm itself. */
static bool name_ok(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	if (n == 0 || n == max || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.' || *s == '~'))
			return false;
	return true;
}

/* Map an open doorbell file. A file shorter than the mapping would SIGBUS its reader. */
static struct shm_doorbell *db_map_fd(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < DB_SIZE)
		return NULL;
	void *p = mmap(NULL, DB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

static struct shm_doorbell *db_map(const char *name, int flags)
{
	char path[256];
	if (!name_ok(name, 128))
		return NULL; /* names of peers come from the network */
	db_path(path, sizeof path, name);
	int fd = open(path, flags | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return NULL;
	if ((flags & O_CREAT) && ftruncate(fd, DB_SIZE) != 0) {
		close(fd);
		return NULL;
	}
	struct shm_doorbell *db = db_map_fd(fd);
	close(fd);
	return db;
}

/* Open the doorbell file `fname` in the shm directory `dfd` only if it is a regular file of our
 * own uid: another user's file is neither trusted nor ever removed by us. */
static struct shm_doorbell *db_map_own(int dfd, const char *fname)
{
	int fd = openat(dfd, fname, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat st;
	struct shm_doorbell *db = NULL;
	if (fstat(fd, &st) == 0 && st.st_uid == geteuid())
		db = db_map_fd(fd);
	close(fd);
	return db;
}

/* Remove the region `ep` of a dead incarnation: a valid name, a regular file of ours, removed
 * relative to the shm directory. `not_after`: keep a region changed after that time (0: any). */
static void region_remove(int dfd, const char *ep, time_t not_after)
{
	struct stat st;
	if (!name_ok(ep, NAME_MAX) || fstatat(dfd, ep, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (not_after && st.st_ctime > not_after))
		return;
	unlinkat(dfd, ep, 0);
}

struct shm_doorbell *shm_doorbell_create(const char *name, const char *epname)
{
	/* A fresh file (new inode) even if a dead predecessor left one: peers compare the identity
	 * to notice the restart, and the predecessor's file is marked closed for peers that still
	 * map it. The caller already owns the name (its endpoint is enabled). */
	char path[256];
	db_path(path, sizeof path, name);
	int dfd = open(SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct shm_doorbell *old = NULL;
	if (dfd >= 0 && strlen(DB_PREFIX) + strlen(name) < sizeof path) {
		char fname[256];
		snprintf(fname, sizeof fname, DB_PREFIX "%s", name);
		old = db_map_own(dfd, fname);
	}
	if (old) {
		atomic_store(&old->closed, 1);
		/* A predecessor killed without closing leaves its region; nobody else would ever
		 * find it once this file is replaced. */
		char ep[sizeof old->epname];
		pid_t pid = old->owner_pid;
		snprintf(ep, sizeof ep, "%.*s", (int)sizeof ep - 1, old->epname);
		shm_doorbell_unmap(old);
		if (ep[0] && strcmp(ep, epname) != 0 && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
			region_remove(dfd, ep, 0);
	}
	if (dfd >= 0)
		close(dfd);
	unlink(path);
	struct shm_doorbell *db = db_map(name, O_CREAT | O_EXCL);
	if (db) {
		snprintf(db->epname, sizeof db->epname, "%s", epname);
		atomic_thread_fence(memory_order_release);
		db->owner_pid = (int32_t)getpid(); /* last: marks the file complete */
	}
	return db;
}

int shm_doorbell_epname(const struct shm_doorbell *db, char *buf, size_t size)
{
	if (!db || atomic_load(&db->closed) || db->owner_pid == 0)
		return -1;
	atomic_thread_fence(memory_order_acquire);
	size_t n = strnlen(db->epname, sizeof db->epname);
	if (n == 0 || n == sizeof db->epname || n >= size)
		return -1;
	memcpy(buf, db->epname, n + 1);
	return 0;
}

void shm_doorbell_sweep(void)
{
	/* Everything relative to one fd of the directory, and only files of our own uid: the
	 * doorbell files are world-visible and any user can plant one (see shm_doorbell.h). */
	int dfd = open(SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	int lfd = dup(dfd);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	if (!d) {
		if (lfd >= 0)
			close(lfd);
		close(dfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, DB_PREFIX, strlen(DB_PREFIX)) != 0)
			continue;
		const char *name = e->d_name + strlen(DB_PREFIX);
		if (!name_ok(name, NAME_MAX))
			continue;
		struct shm_doorbell *db = db_map_own(dfd, e->d_name);
		struct stat dst;
		if (!db || fstatat(dfd, e->d_name, &dst, AT_SYMLINK_NOFOLLOW) != 0) {
			shm_doorbell_unmap(db);
			continue;
		}
		pid_t pid = db->owner_pid;
		char ep[sizeof db->epname];
		snprintf(ep, sizeof ep, "%.*s", (int)sizeof ep - 1, db->epname);
		shm_doorbell_unmap(db);
		int n = 0;
		long named;
		if (pid == 0 && sscanf(name, "chfs-%ld-%*u%n", &named, &n) == 1 && n > 0 && !name[n])
			pid = (pid_t)named; /* default name "chfs-<pid>-<n>", file of an older version */
		/* EPERM: alive under another user. pid 0: a file being created right now. */
		if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		/* libfabric's region is named after the incarnation (older files: the name itself).
		 * The incarnation's region is the dead owner's alone. Files of older versions used the
		 * bare name, which a successor may already have re-created: there, a region newer
		 * than the dead owner's doorbell is left alone. */
		region_remove(dfd, ep[0] ? ep : name, ep[0] ? 0 : dst.st_ctime);
		unlinkat(dfd, e->d_name, 0);
	}
	closedir(d);
	close(dfd);
}

unsigned long shm_doorbell_ident(const char *name)
{
	char path[256];
	struct stat st;
	if (!name_ok(name, 128))
		return 0;
	db_path(path, sizeof path, name);
	return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

int shm_doorbell_owner(const char *name, uid_t *uid)
{
	char path[256];
	struct stat st;
	if (!name_ok(name, 128))
		return -EINVAL;
	db_path(path, sizeof path, name);
	if (lstat(path, &st) != 0)
		return -errno;
	*uid = st.st_uid;
	return st.st_uid == geteuid() ? 0 : -EACCES;
}

struct shm_doorbell *shm_doorbell_open(const char *name) { return db_map(name, 0); }

void shm_doorbell_unmap(struct shm_doorbell *db)
{
	if (db)
		munmap(db, DB_SIZE);
}

void shm_doorbell_destroy(struct shm_doorbell *db, const char *name)
{
	char path[256];
	db_path(path, sizeof path, name);
	/* Remove the file only if it is still ours: a successor may already have replaced it. */
	struct shm_doorbell *cur = db_map(name, 0);
	bool ours = cur && strncmp(cur->epname, db->epname, sizeof db->epname) == 0;
	shm_doorbell_unmap(cur);
	atomic_store(&db->closed, 1);
	shm_doorbell_unmap(db);
	if (ours)
		unlink(path);
}

void shm_doorbell_ring(struct shm_doorbell *db)
{
	/* Pairs with the sleeper's store to `sleeping` before its last CQ check: either it sees
	 * the work we posted, or we see it sleeping. */
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load(&db->sleeping))
		return;
	atomic_fetch_add(&db->seq, 1);
	syscall(SYS_futex, &db->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void shm_doorbell_wait(struct shm_doorbell *db, uint32_t seq, long timeout_us)
{
	struct timespec ts = {timeout_us / 1000000, (timeout_us % 1000000) * 1000};
	syscall(SYS_futex, &db->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
}
