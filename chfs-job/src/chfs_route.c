/* chfs_route.c — the part of serving chfs: mappings that does not depend on how the tracee is
 * stopped (see chfs_route.h). Both methods decide a call with decide.c; a CJ_V_CHFS verdict comes
 * here, and from here to chfs_serve.c (libchfs, staging). Every CHFS path is checked against the
 * policy's own chfs: mappings first: the staging directory is mapped to chfs:/ (so calls
 * relative to a staged listing reach CHFS), and `STAGE/../x` must not lead outside what the
 * policy mapped. */
#define _GNU_SOURCE
#include "chfs_route.h"
#include "paths.h"
#include "tracee.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Staged directory listings live under root: calls relative to them go to chfs:/ again. */
static int add_stage_rule(struct cj_policy *p, const char *root)
{
	struct cj_rule *r = realloc(p->rules, (size_t)(p->nrules + 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	p->rules = r;
	char *from = strdup(root), *to = strdup("/");
	if (!from || !to) {
		free(from);
		free(to);
		return -ENOMEM;
	}
	p->rules[p->nrules++] = (struct cj_rule){from, strlen(from), CJ_CHFS, to};
	return 0;
}

struct cj_chfs *cj_chfs_route_start(struct cj_policy *p, const char *method, char *err, size_t len)
{
	char why[400];
	struct cj_chfs *c = cj_chfs_start(why, sizeof(why));
	if (!c) {
		snprintf(err, len, "%s: %s", method, why);
		return NULL;
	}
	if (add_stage_rule(p, cj_chfs_stage_root(c)) < 0) {
		cj_chfs_stop(c);
		snprintf(err, len, "%s: out of memory", method);
		return NULL;
	}
	return c;
}

bool cj_chfs_route_closing(struct cj_chfs *c, pid_t pid, int nr, const uint64_t a[6])
{
	bool dup = nr == SYS_dup2 || nr == SYS_dup3;
	if (!c || !(dup || (nr == SYS_close && (int)a[0] >= CJ_CHFS_FD_MIN)))
		return false;
	int fd = cj_tracee_getfd(pid, (int)a[dup ? 1 : 0]);
	if (fd >= 0) {
		cj_chfs_closed(c, fd);
		close(fd);
	}
	return true;
}

/* Is CHFS path under the target of one of the policy's own chfs: mappings? */
static bool visible(const struct cj_chfs *c, const struct cj_policy *p, const char *path)
{
	const char *stage = cj_chfs_stage_root(c);
	for (int i = 0; i < p->nrules; i++) {
		const struct cj_rule *r = &p->rules[i];
		if (r->action == CJ_CHFS && strcmp(r->from, stage) != 0 &&
		    cj_path_under(path, r->to, strlen(r->to)))
			return true;
	}
	return false;
}

static bool all_visible(const struct cj_chfs *c, const struct cj_policy *p, const struct cj_decision *d)
{
	return visible(c, p, d->path[0]) && (!d->chfs[1] || visible(c, p, d->path[1]));
}

int cj_chfs_route_open_args(pid_t pid, int nr, const uint64_t a[6], int *flagsp, int *modep)
{
	int flags, mode;
	if (nr == SYS_open) {
		flags = (int)a[1], mode = (int)a[2];
	} else if (nr == SYS_creat) {
		flags = O_CREAT | O_WRONLY | O_TRUNC, mode = (int)a[1];
	} else if (nr == SYS_openat) {
		flags = (int)a[2], mode = (int)a[3];
	} else {
		uint64_t how[3]; /* struct open_how: flags, mode, resolve */
		if (cj_tracee_read(pid, a[2], how, sizeof(how)) < 0)
			return -EFAULT;
		flags = (int)how[0], mode = (int)how[1];
	}
	*flagsp = flags, *modep = mode;
	return 0;
}

int cj_chfs_route_open(struct cj_chfs *c, const struct cj_policy *p, const struct cj_decision *d, pid_t pid,
                       int nr, const uint64_t a[6], int *flags)
{
	if (!all_visible(c, p, d))
		return -ENOENT;
	int mode;
	int rc = cj_chfs_route_open_args(pid, nr, a, flags, &mode);
	if (rc < 0)
		return rc;
	return cj_chfs_open(c, d->path[0], *flags, (mode_t)mode & ~cj_tracee_umask(pid));
}

long cj_chfs_route_call(struct cj_chfs *c, const struct cj_policy *p, const struct cj_decision *d,
                        const struct cj_sysc *sc, pid_t pid, int nr, const uint64_t a[6])
{
	if (!all_visible(c, p, d))
		return -ENOENT;
	return cj_chfs_call(c, sc, nr, a, d->path[0], d->path[1], pid, cj_tracee_umask(pid));
}
