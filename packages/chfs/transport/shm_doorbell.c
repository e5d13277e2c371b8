/*
 * shm_doorbell.c — futex doorbell in a shared-memory file (see shm_doorbell.h).
 *
 * The futex is a shared (not FUTEX_PRIVATE) one because the word lives in a MAP_SHARED file
 * mapping seen by several processes.
 */
#include "shm_doorbell.h"

#include <dirent.h>
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

static void db_path(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "/dev/shm/chfs-xprt-db.%s", name);
}

static struct shm_doorbell *db_map(const char *name, int flags)
{
	char path[256];
	db_path(path, sizeof path, name);
	int fd = open(path, flags | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	if ((flags & O_CREAT) && ftruncate(fd, DB_SIZE) != 0) {
		close(fd);
		return NULL;
	}
	void *p = mmap(NULL, DB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

struct shm_doorbell *shm_doorbell_create(const char *name, const char *epname)
{
	/* A fresh file (new inode) even if a dead predecessor left one: peers compare the identity
	 * to notice the restart, and the predecessor's file is marked closed for peers that still
	 * map it. The caller already owns the name (its endpoint is enabled). */
	char path[256];
	db_path(path, sizeof path, name);
	struct shm_doorbell *old = db_map(name, 0);
	if (old) {
		atomic_store(&old->closed, 1);
		/* A predecessor killed without closing leaves its region; nobody else would ever
		 * find it once this file is replaced. */
		char reg[300];
		pid_t pid = old->owner_pid;
		int n = snprintf(reg, sizeof reg, "/dev/shm/%.*s", (int)sizeof old->epname - 1,
				 old->epname);
		if (old->epname[0] && strcmp(old->epname, epname) != 0 && n < (int)sizeof reg &&
		    pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
			unlink(reg);
		shm_doorbell_unmap(old);
	}
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

#define DB_PREFIX "chfs-xprt-db."

void shm_doorbell_sweep(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, DB_PREFIX, strlen(DB_PREFIX)) != 0)
			continue;
		const char *name = e->d_name + strlen(DB_PREFIX);
		char dbp[300], regp[300];
		snprintf(dbp, sizeof dbp, "/dev/shm/%s", e->d_name);
		struct shm_doorbell *db = shm_doorbell_open(name);
		struct stat dst, rst;
		if (!db || stat(dbp, &dst) != 0) {
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
		/* libfabric's region is named after the incarnation (older files: the name itself). */
		snprintf(regp, sizeof regp, "/dev/shm/%s", ep[0] ? ep : name);
		/* The incarnation's region is the dead owner's alone. Files of older versions used the
		 * bare name, which a successor may already have re-created: there, a region newer
		 * than the dead owner's doorbell is left alone. */
		if (ep[0] || (stat(regp, &rst) == 0 && rst.st_ctime <= dst.st_ctime))
			unlink(regp);
		unlink(dbp);
	}
	closedir(d);
}

unsigned long shm_doorbell_ident(const char *name)
{
	char path[256];
	struct stat st;
	db_path(path, sizeof path, name);
	return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

struct shm_doorbell *shm_doorbell_open(const char *name)
{
	return db_map(name, 0);
}

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
