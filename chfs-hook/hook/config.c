/*
 * config.c — the hook's configuration, read once at start, then only read.
 *
 *   CHFS_HOOK_MOUNTS  colon-separated mount points, each DIR (shows the CHFS root) or
 *                     DIR=CHFSDIR (shows that CHFS directory); default "/chfs". DIR must be
 *                     absolute and not "/"; at most 16.
 *   CHFS_HOOK_LOCAL   1 (default) = use the node-local fast path when a file's data is all on
 *                     this node's server; 0 = always go through RPCs.
 *   CHFS_HOOK_CWD     set by the hook on execve: the virtual cwd inherited from the parent.
 *   CHFS_HOOK_CWD_INO set with it: that directory's identity (st_ino), so a rename is followed.
 * A malformed value is an error: one line on stderr and the program does not start.
 * Also owns the lazy chfs_init() and the process-wide umask the hook applies to new files.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic unsigned hook_umask = 022;
atomic_int hook_chfs_inited;
char **hook_saved_env;
extern char **environ;

static int bad(const char *var, const char *val, const char *why)
{
	fprintf(stderr, "chfs-hook: %s=\"%s\": %s\n", var, val, why);
	return -1;
}

static int parse_mount(const char *item, size_t len, struct hook_mount *m)
{
	char buf[PATH_MAX];
	if (len == 0 || len >= sizeof buf)
		return -1;
	memcpy(buf, item, len);
	buf[len] = 0;
	char *eq = strchr(buf, '=');
	const char *sub = "";
	if (eq) {
		*eq = 0;
		sub = eq + 1;
		if (sub[0] != '/')
			return -1;
	}
	if (buf[0] != '/' || hook_normalize(buf, m->dir, sizeof m->dir) < 0 || strcmp(m->dir, "/") == 0)
		return -1;
	m->dirlen = strlen(m->dir);
	m->base = strrchr(m->dir, '/') + 1;
	m->baselen = strlen(m->base);
	if (*sub) {
		if (hook_normalize(sub, m->sub, sizeof m->sub) < 0)
			return -1;
		if (strcmp(m->sub, "/") == 0)
			m->sub[0] = 0;
	} else {
		m->sub[0] = 0;
	}
	return 0;
}

static int load_mounts(void)
{
	const char *v = getenv("CHFS_HOOK_MOUNTS");
	if (!v || !*v)
		v = "/chfs";
	const char *p = v;
	hook_cfg.longest_prefix = strlen("/proc/self/fd/"); /* the other prefix the filter reads */
	while (*p) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (hook_cfg.nmounts == HOOK_MAX_MOUNTS)
			return bad("CHFS_HOOK_MOUNTS", v, "more than 16 mount points");
		if (parse_mount(p, len, &hook_cfg.mounts[hook_cfg.nmounts]) < 0)
			return bad(
			        "CHFS_HOOK_MOUNTS", v,
			        "each entry must be an absolute directory other than / (DIR or DIR=/CHFSDIR)");
		if (hook_cfg.mounts[hook_cfg.nmounts].dirlen > hook_cfg.longest_prefix)
			hook_cfg.longest_prefix = hook_cfg.mounts[hook_cfg.nmounts].dirlen;
		hook_cfg.nmounts++;
		p += len;
		if (*p == ':')
			p++;
	}
	return 0;
}

static int load_flags(void)
{
	const char *v = getenv("CHFS_HOOK_LOCAL");
	hook_cfg.local_fast_path = 1;
	if (v && *v) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			return bad("CHFS_HOOK_LOCAL", v, "must be 0 or 1");
		hook_cfg.local_fast_path = v[0] == '1';
	}
	const char *cwd = getenv("CHFS_HOOK_CWD");
	if (cwd && *cwd) { /* a virtual path: may be longer than PATH_MAX */
		char *norm = malloc(HOOK_VPATH_MAX), *tmp = malloc(HOOK_CHFS_PATH_MAX);
		const char *id = getenv("CHFS_HOOK_CWD_INO"); /* its identity (follow.c), if known */
		int ok = norm && tmp && cwd[0] == '/' && hook_normalize(cwd, norm, HOOK_VPATH_MAX) == 0 &&
		         hook_vpath_to_chfs(norm, tmp, HOOK_CHFS_PATH_MAX) == 1 &&
		         hook_vcwd_set(norm, id ? (ino_t)strtoull(id, NULL, 10) : 0) == 0;
		free(norm);
		free(tmp);
		if (!ok)
			return bad("CHFS_HOOK_CWD", cwd,
			           "not a directory under a CHFS_HOOK_MOUNTS mount point");
	}
	return 0;
}

/* Copies of CHFS_* variables, re-added on execve if the new environment lost them. */
static void save_env(void)
{
	size_t n = 0;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "CHFS_", 5) == 0 && strncmp(*e, "CHFS_HOOK_CWD", 13) != 0)
			n++;
	hook_saved_env = calloc(n + 1, sizeof *hook_saved_env);
	if (!hook_saved_env)
		return;
	n = 0;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "CHFS_", 5) == 0 && strncmp(*e, "CHFS_HOOK_CWD", 13) != 0)
			hook_saved_env[n++] = strdup(*e);
}

int hook_init_modules(void)
{
	if (load_mounts() < 0 || load_flags() < 0 || hook_fdtable_init() < 0)
		return -1;
	unsigned m = (unsigned)RAW1(SYS_umask, 022);
	RAW1(SYS_umask, m);
	hook_umask = m & 0777;
	save_env();
	hook_fdtable_adopt_inherited();
	return 0;
}

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

int hook_chfs_ready(void)
{
	if (atomic_load(&hook_chfs_inited))
		return 0;
	pthread_mutex_lock(&init_lock);
	int rc = 0;
	if (!atomic_load(&hook_chfs_inited)) {
		if (chfs_init(NULL) == 0) {
			atomic_store(&hook_chfs_inited, 1);
		} else {
			static int told; /* every later CHFS call retries, quietly */
			rc = errno ? -errno : -EIO;
			if (!told++)
				fprintf(stderr, "chfs-hook: cannot join the CHFS pool (CHFS_SERVER=%s): %s\n",
				        getenv("CHFS_SERVER") ? getenv("CHFS_SERVER") : "unset",
				        strerror(-rc));
		}
	}
	pthread_mutex_unlock(&init_lock);
	return rc;
}

void hook_after_fork(void)
{
	pthread_mutex_init(&init_lock, NULL);
	hook_fdtable_after_fork();
	hook_paths_after_fork();
	if (atomic_load(&hook_chfs_inited))
		chfs_after_fork();
}
