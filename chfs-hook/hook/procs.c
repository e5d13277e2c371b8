/*
 * procs.c — execve and exit.
 *
 * execve keeps the hook alive in the new program through its environment: LD_PRELOAD gains
 * the loader if the caller's environment lost it, CHFS_* variables of our own start-up
 * environment are re-added if missing, and CHFS_HOOK_CWD carries a virtual cwd. CHFS
 * descriptors without close-on-exec survive as placeholders and are re-opened by the new
 * program (fdtable.c). A program stored in CHFS cannot be executed by the kernel: EACCES.
 * fork needs nothing here: the gate calls hook_after_fork (config.c) in the child.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

static int has_var(char **env, size_t n, const char *entry)
{
	size_t k = strcspn(entry, "=") + 1;
	for (size_t i = 0; i < n; i++)
		if (strncmp(env[i], entry, k) == 0)
			return 1;
	return 0;
}

static int preload_has_loader(const char *v)
{
	const char *lp = hook_cfg.loader_path;
	size_t n = strlen(lp);
	for (const char *p = strstr(v, lp); p; p = strstr(p + 1, lp))
		if ((p == v || p[-1] == ':' || p[-1] == ' ') && (p[n] == 0 || p[n] == ':' || p[n] == ' '))
			return 1;
	return 0;
}

static int inherits_chfs_descriptors(void)
{
	for (int fd = 0; fd < hook_fdtab_size && fd <= hook_fd_max; fd++)
		/* fast-path descriptors are plain kernel files to the next program: no hook needed */
		if (hook_fdtab[fd] && !hook_fdtab[fd]->local && RAW2(SYS_fcntl, fd, F_GETFD) == 0)
			return 1;
	return 0;
}

/* Returns a malloc'ed environment (strings it made are listed in *owned), or NULL. */
static char **hook_env(char *const *envp, char ***owned)
{
	size_t n = 0, nsaved = 0;
	while (envp && envp[n])
		n++;
	while (hook_saved_env && hook_saved_env[nsaved])
		nsaved++;
	char **env = calloc(n + nsaved + 5, sizeof *env);
	char **own = calloc(4, sizeof *own);
	if (!env || !own) {
		free(env);
		free(own);
		return NULL;
	}
	size_t k = 0, o = 0;
	int preload = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(envp[i], "CHFS_HOOK_CWD", 13) == 0 || /* and _INO */
		    strncmp(envp[i], "CHFS_HOOK_INHERIT=", 18) == 0)
			continue;
		if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0 && !preload) {
			preload = 1;
			if (!preload_has_loader(envp[i] + 11)) {
				if (asprintf(&own[o], "LD_PRELOAD=%s:%s", hook_cfg.loader_path,
				             envp[i] + 11) < 0)
					goto oom;
				env[k++] = own[o++];
				continue;
			}
		}
		env[k++] = envp[i];
	}
	for (size_t i = 0; i < nsaved; i++)
		if (!has_var(env, k, hook_saved_env[i]))
			env[k++] = hook_saved_env[i];
	if (!preload) {
		if (asprintf(&own[o], "LD_PRELOAD=%s", hook_cfg.loader_path) < 0)
			goto oom;
		env[k++] = own[o++];
	}
	if (inherits_chfs_descriptors())
		env[k++] = "CHFS_HOOK_INHERIT=1"; /* the new program must load the hook at once */
	char *cwd = NULL; /* may be longer than PATH_MAX: an environment string may be 128 KiB */
	ino_t ino;
	int has_cwd = hook_vcwd_dup(&cwd, &ino);
	if (has_cwd < 0)
		goto oom;
	if (has_cwd) {
		int n = asprintf(&own[o], "CHFS_HOOK_CWD=%s", cwd);
		free(cwd);
		if (n < 0)
			goto oom;
		env[k++] = own[o++];
		if (asprintf(&own[o], "CHFS_HOOK_CWD_INO=%llu", (unsigned long long)ino) < 0)
			goto oom;
		env[k++] = own[o++];
	}
	env[k] = NULL;
	*owned = own;
	return env;
oom:
	for (size_t i = 0; i < o; i++)
		free(own[i]);
	free(own);
	free(env);
	return NULL;
}

long hook_do_exec(const struct chfs_sysargs *s)
{
	int at = s->nr == SYS_execveat;
	int dirfd = at ? (int)s->a[0] : AT_FDCWD;
	const char *path = (const char *)s->a[at];
	char *const *argv = (char *const *)s->a[at + 1];
	char *const *envp = (char *const *)s->a[at + 2];
	HOOK_TARGET(t);
	if (path && !(at && path[0] == 0)) {
		int rc = hook_resolve(dirfd, path, &t);
		if (rc < 0)
			return rc;
		if (t.chfs) {
			struct stat st;
			if ((rc = hook_chfs_ready()) < 0)
				return rc;
			if (chfs_stat(t.path, &st) != 0)
				return errno ? -errno : -EIO;
			return -EACCES; /* the kernel cannot map a file that lives in CHFS */
		}
		path = t.path;
	} else if (at && hook_file_of(dirfd)) {
		return -EACCES;
	}
	char **owned = NULL;
	char **env = hook_env(envp, &owned);
	if (!env)
		return -ENOMEM;
	long rc = at ? hook_raw(SYS_execveat, dirfd, (long)path, (long)argv, (long)env, s->a[4], 0)
	             : RAW3(SYS_execve, path, argv, env);
	for (int i = 0; owned[i]; i++)
		free(owned[i]);
	free(owned);
	free(env);
	return rc;
}

long hook_do_exit(const struct chfs_sysargs *s)
{
	hook_fdtable_close_all(); /* chfs_close flushes what the client may buffer */
	chfs_end_leases();        /* else the servers keep them a lease long (no chfs_term here) */
	return hook_pass(s);
}
