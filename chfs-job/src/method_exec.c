/* method_exec.c — the methods that hand the program to another mechanism and exec it:
 *   rewrite  chfs-run (the zpoline hook): CHFS mappings only; it has no denial, no local mapping
 *            and no bandwidth limit, and code generated at run time bypasses it — so it is
 *            refused for policies that need those and for require.complete;
 *   fuse     a private mount namespace (root): denied directories covered by an empty read-only
 *            tmpfs (denied files by an empty read-only file: the path stays, its content is
 *            gone), local mappings bind-mounted, CHFS mappings served by a chfuse mount; no
 *            bandwidth limit;
 *   none     the program as it is; the policy is NOT applied (for comparison).
 * cj_method_unusable() is the one place that says why a method cannot run a policy here; auto
 * and an explicit --method both ask it. */
#define _GNU_SOURCE
#include "methods.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static bool only_chfs_rules(const struct cj_policy *p)
{
	for (int i = 0; i < p->nrules; i++)
		if (p->rules[i].action != CJ_CHFS &&
		    !(p->rules[i].action == CJ_MAP && !strcmp(p->rules[i].from, p->rules[i].to)))
			return false;
	return true;
}

/* A tool of the stack: next to chfs-job itself (same prefix), else on PATH. */
static bool find_tool(const char *name, char *out, size_t len)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/%s", exe, name);
			if (access(out, X_OK) == 0)
				return true;
		}
	}
	const char *path = getenv("PATH");
	for (const char *p = path ? path : ""; *p;) {
		const char *e = strchr(p, ':');
		size_t k = e ? (size_t)(e - p) : strlen(p);
		snprintf(out, len, "%.*s/%s", (int)k, p, name);
		if (k && access(out, X_OK) == 0)
			return true;
		p += k + (e ? 1 : 0);
	}
	return false;
}

const char *cj_method_unusable(enum cj_method m, const struct cj_policy *p, char *why, size_t len)
{
	char tool[4200];
	switch (m) {
	case CJ_REWRITE: {
		if (p->require_complete)
			return snprintf(why, len, "rewrite is bypassable (require.complete: true)"), why;
		if (!only_chfs_rules(p))
			return snprintf(
			               why, len,
			               "rewrite applies only chfs: mappings (the policy has denials or local mappings)"),
			       why;
		if (cj_policy_has_limits(p))
			return snprintf(why, len, "rewrite cannot apply io_limit"), why;
		FILE *f = fopen("/proc/sys/vm/mmap_min_addr", "r");
		long v = -1;
		if (f) {
			if (fscanf(f, "%ld", &v) != 1)
				v = -1;
			fclose(f);
		}
		if (v != 0)
			return snprintf(why, len, "rewrite needs vm.mmap_min_addr=0 (it is %ld)", v), why;
		if (!find_tool("chfs-run", tool, sizeof(tool)))
			return snprintf(
			               why, len,
			               "rewrite needs chfs-run (chfs-hook), not found next to chfs-job or on PATH"),
			       why;
		return NULL;
	}
	case CJ_SECCOMP:
#ifndef CJ_HAVE_CHFS
		if (cj_policy_has(p, CJ_CHFS))
			return snprintf(why, len,
			                "seccomp serves chfs: mappings only when built with libchfs"),
			       why;
#endif
		return NULL;
	case CJ_PTRACE:
#ifndef CJ_HAVE_CHFS
		if (cj_policy_has(p, CJ_CHFS))
			return snprintf(why, len,
			                "ptrace serves chfs: mappings only when built with libchfs"),
			       why;
#endif
		return NULL;
	case CJ_FUSE:
		if (!p->require_root)
			return snprintf(why, len, "fuse needs root and the policy says require.root: false"),
			       why;
		if (geteuid() != 0)
			return snprintf(why, len, "fuse needs root (mount namespace, FUSE mount)"), why;
		if (cj_policy_has_limits(p))
			return snprintf(why, len, "fuse cannot apply io_limit"), why;
		if (!p->trace_fork)
			return snprintf(why, len,
			                "fuse applies to every child (trace_fork: false cannot hold)"),
			       why;
		return NULL;
	case CJ_NONE:
		if (p->nrules || cj_policy_has_limits(p))
			return snprintf(why, len, "none applies no policy (the policy has rules or limits)"),
			       why;
		return NULL;
	default: return snprintf(why, len, "not a method"), why;
	}
}

static int run_wait(char **argv)
{
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "chfs-job: %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -errno;
	return cj_wait_status(st);
}

static int exec_rewrite(struct cj_policy *p, char **argv)
{
	int n = 0;
	while (argv[n])
		n++;
	char **av = calloc((size_t)(n + 2 * p->nrules + 3), sizeof(char *));
	if (!av)
		return -ENOMEM;
	int k = 0;
	char tool[4200];
	if (!find_tool("chfs-run", tool, sizeof(tool)))
		return -ENOENT;
	av[k++] = tool;
	for (int i = 0; i < p->nrules; i++) {
		if (p->rules[i].action != CJ_CHFS)
			continue;
		av[k++] = "--mount";
		if (asprintf(&av[k++], "%s=%s", p->rules[i].from, p->rules[i].to) < 0)
			return -ENOMEM;
	}
	if (k == 1) /* nothing to rewrite: chfs-run would show a default /chfs the policy never asked for */
		return run_wait(argv);
	av[k++] = "--";
	memcpy(av + k, argv, (size_t)(n + 1) * sizeof(char *));
	int rc = run_wait(av);
	return rc;
}

/* In a fresh mount namespace (we are the child): apply p's rules as mounts. */
static int fuse_mounts(struct cj_policy *p, const char *tmp)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	char pool[4200];
	snprintf(pool, sizeof(pool), "%s/pool", tmp);
	if (cj_policy_has(p, CJ_CHFS)) {
		mkdir(pool, 0700);
		char tool[4200];
		if (!find_tool("chfuse", tool, sizeof(tool)))
			return -ENOENT;
		char *av[] = {tool, pool, NULL};
		if (run_wait(av) != 0) {
			fprintf(stderr, "chfs-job: fuse: chfuse %s failed (is CHFS_SERVER set?)\n", pool);
			return -EIO;
		}
	}
	for (int i = 0; i < p->nrules; i++) {
		const struct cj_rule *r = &p->rules[i];
		struct stat st;
		if (stat(r->from, &st) < 0) {
			if (r->action == CJ_DENY)
				continue; /* nothing there to hide */
			fprintf(stderr,
			        "chfs-job: fuse: mount point %s: %s (the fuse method needs it to exist)\n",
			        r->from, strerror(errno));
			return -errno;
		}
		char src[4200];
		int rc = 0;
		if (r->action == CJ_DENY && S_ISDIR(st.st_mode)) {
			rc = mount("chfs-job-deny", r->from, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
			           "size=4k,mode=0555");
		} else if (r->action == CJ_DENY) {
			snprintf(src, sizeof(src), "%s/empty", tmp);
			close(open(src, O_CREAT | O_WRONLY, 0444));
			rc = mount(src, r->from, NULL, MS_BIND, NULL);
			if (rc == 0)
				rc = mount(NULL, r->from, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
		} else {
			if (r->action == CJ_CHFS)
				snprintf(src, sizeof(src), "%s%s", pool, strcmp(r->to, "/") ? r->to : "");
			else
				snprintf(src, sizeof(src), "%s", r->to);
			rc = mount(src, r->from, NULL, MS_BIND | MS_REC, NULL);
		}
		if (rc < 0) {
			fprintf(stderr, "chfs-job: fuse: cannot cover %s: %s\n", r->from, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

static int exec_fuse(struct cj_policy *p, char **argv)
{
	char tmp[] = "/tmp/chfs-job-fuse-XXXXXX";
	if (!mkdtemp(tmp))
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0) {
			fprintf(stderr, "chfs-job: fuse: unshare(CLONE_NEWNS): %s\n", strerror(errno));
			_exit(126);
		}
		int rc = fuse_mounts(p, tmp);
		if (rc < 0)
			_exit(126);
		int st = run_wait(argv);
		if (cj_policy_has(p, CJ_CHFS)) {
			/* chfuse lives in this namespace and keeps it — and so every mount of its file
			 * system — alive: detach the bind mounts of the pool and the pool itself, so the
			 * file system dies with its last user and chfuse exits */
			for (int i = 0; i < p->nrules; i++)
				if (p->rules[i].action == CJ_CHFS)
					umount2(p->rules[i].from, MNT_DETACH);
			char pool[4200];
			snprintf(pool, sizeof(pool), "%s/pool", tmp);
			umount2(pool, MNT_DETACH);
		}
		_exit(st < 0 ? 126 : st);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = -errno;
	else
		st = cj_wait_status(st);
	char path[4200];
	snprintf(path, sizeof(path), "%s/empty", tmp);
	unlink(path);
	snprintf(path, sizeof(path), "%s/pool", tmp);
	rmdir(path);
	rmdir(tmp);
	return st;
}

int cj_run_exec(enum cj_method m, struct cj_policy *p, char **argv, const struct cj_opts *o)
{
	switch (m) {
	case CJ_REWRITE: return exec_rewrite(p, argv);
	case CJ_FUSE: return exec_fuse(p, argv);
	default:
		if (p->nrules || cj_policy_has_limits(p))
			fprintf(stderr,
			        "chfs-job: none: the policy's rules and limits are NOT applied (comparison run)\n");
		return run_wait(argv);
	}
}
