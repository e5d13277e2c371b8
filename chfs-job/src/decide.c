/* decide.c — the policy applied to one system call (see decide.h).
 *
 * A path argument is read from the caller's memory, made absolute against its working directory
 * or directory descriptor (/proc/PID/cwd, /proc/PID/fd/N) and normalised lexically; the longest
 * rule prefix decides. A path that no rule denies lexically is checked once more with its symbolic
 * links resolved by the kernel (the final component only if the call follows it), so a link such as
 * /tmp/l -> /secret does not lead around "/secret: deny"; /proc/self is read as /proc/PID.
 *
 * Residual races (documented in the README): the caller's memory and the file system can change
 * between this check and the kernel's own lookup. A denied path is answered here and never
 * reaches the kernel; a mapped path is run by the method on the mapped copy (seccomp: the
 * supervisor opens it; ptrace: a copy written into the tracee), so neither depends on the
 * tracee's buffer after the check. An allowed path is looked up again by the kernel: another
 * thread of the tracee that rewrites the buffer, or a link swapped in, at that instant can
 * reach a denied path. */
#define _GNU_SOURCE
#include "decide.h"
#include "paths.h"
#include "tracee.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* The kernel's own resolution of tmp[0..len): open it O_PATH (no permission needed, no side
 * effects) and read the descriptor's name back — three system calls however deep the path,
 * where realpath(3) would lstat every component. */
static int resolve_prefix(char *tmp, size_t len, bool follow, char *out)
{
	char c = tmp[len];
	tmp[len] = '\0';
	int fd = open(len ? tmp : "/", O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	int e = errno;
	tmp[len] = c;
	if (fd < 0)
		return -e;
	char link[32];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, out, PATH_MAX - 1);
	e = errno;
	close(fd);
	if (n < 0 || out[0] != '/')
		return n < 0 ? -e : -ENOENT;
	out[n] = '\0';
	return 0;
}

/* Whether the kernel walks abs without meeting a symbolic link (RESOLVE_NO_SYMLINKS refuses
 * /proc's magic links too, and a trailing link that is not followed is opened as itself). Then
 * abs resolves to itself and real_path has nothing to do: two system calls (openat2, close)
 * instead of its three. A walk that stops at a missing component or a non-directory met no link
 * before it, and nothing after it exists, so that is no link either; a link (ELOOP), EACCES or
 * an old kernel (ENOSYS) answer false and the full resolution decides. */
static bool walks_without_links(const char *abs, bool follow_last)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC | (follow_last ? 0 : O_NOFOLLOW),
	                       .resolve = RESOLVE_NO_SYMLINKS};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, abs, &how, sizeof(how));
	if (fd >= 0) {
		close(fd);
		return true;
	}
	return errno == ENOENT || errno == ENOTDIR;
}

/* The path with its links resolved: the longest existing prefix as the kernel resolves it, plus
 * the rest (which does not exist yet, so holds no links). */
static void real_path(const char *abs, bool follow_last, char *out, char *tmp)
{
	size_t n = strlen(abs);
	memcpy(tmp, abs, n + 1);
	size_t cut = n; /* tmp[0..cut) is resolved; abs[cut..] appended */
	bool follow = follow_last;
	for (;;) {
		int rc = resolve_prefix(tmp, cut, follow, out);
		if (rc == 0) {
			size_t rl = strlen(out);
			const char *rest = abs + cut;
			if (rl == 1 && *rest == '/')
				rest++;
			if (rl + strlen(rest) + 2 > PATH_MAX)
				break;
			if (*rest && *rest != '/' && rl > 1)
				out[rl++] = '/';
			strcpy(out + rl, rest);
			return;
		}
		if ((rc != -ENOENT && rc != -ENOTDIR && rc != -ELOOP) || cut <= 1)
			break;
		/* ELOOP with O_NOFOLLOW: the last component is a link we must not follow — keep it as
		 * written and resolve its directory; ENOENT: resolve the part that exists */
		while (cut > 1 && abs[cut - 1] != '/')
			cut--;
		cut = cut > 1 ? cut - 1 : 1;
		follow = true;
	}
	strcpy(out, abs); /* unresolvable (EACCES): the lexical form stands */
}

int cj_decide_prepare(struct cj_policy *p)
{
	int n = p->nrules;
	for (int i = 0; i < n; i++) {
		char real[PATH_MAX];
		if (p->rules[i].action != CJ_DENY || !realpath(p->rules[i].from, real) ||
		    strcmp(real, p->rules[i].from) == 0 || cj_policy_match(p, real))
			continue;
		struct cj_rule *nr = realloc(p->rules, (size_t)(p->nrules + 1) * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		p->rules = nr;
		p->rules[p->nrules++] = (struct cj_rule){strdup(real), strlen(real), CJ_DENY, NULL};
	}
	return 0;
}

static bool follows_last(const struct cj_sysc *sc, const uint64_t args[6])
{
	if (sc->nofollow == -2)
		return false;
	if (sc->nofollow >= 0)
		return !(args[(int)sc->nofollow] & AT_SYMLINK_NOFOLLOW);
	return true;
}

/* Path argument i: 1 = mapped, 0 = unchanged, <0 = error to return. d->path[i] is left holding
 * the absolute path the call should use (the mapped one or the caller's, made absolute). */
static int decide_path(const struct cj_policy *p, const struct cj_sysc *sc, pid_t pid, const uint64_t args[6],
                       int i, struct cj_decision *d)
{
	char *raw = d->scratch[0], *abs = d->path[i];
	uint64_t addr = args[(int)sc->path[i]];
	d->path[i][0] = '\0';
	if (addr == 0)
		return 0; /* utimensat(fd, NULL, ...): acts on the descriptor */
	ssize_t len = cj_tracee_read_str(pid, addr, raw, PATH_MAX);
	if (len < 0)
		return (int)len;
	if (len == 0)
		return 0; /* AT_EMPTY_PATH (the descriptor) or ENOENT from the kernel */
	int rc;
	if (raw[0] == '/') {
		rc = cj_path_normalize(raw, abs, PATH_MAX);
	} else {
		int dirfd = sc->dirfd[i] >= 0 ? (int)args[(int)sc->dirfd[i]] : AT_FDCWD;
		rc = cj_tracee_dir(pid, dirfd == AT_FDCWD ? -1 : dirfd, abs, PATH_MAX);
		if (rc == 0)
			rc = cj_path_join(abs, raw, abs, PATH_MAX);
	}
	if (rc < 0)
		return rc;
	const struct cj_rule *r = cj_policy_match(p, abs);
	if (r && r->action == CJ_DENY)
		return -ENOENT;
	bool chfs = r && r->action == CJ_CHFS;
	if (r && (chfs || strcmp(r->from, r->to) != 0)) {
		const char *rest = abs + r->from_len;
		if (r->from_len == 1)
			rest--; /* from "/": keep the slash */
		/* to + rest, built in place (rest lies in abs): memmove and memcpy, where snprintf's
		 * stdio copy of a 4 K target took a microsecond per call */
		size_t tl = strcmp(r->to, "/") == 0 && *rest ? 0 : strlen(r->to), rl = strlen(rest);
		if (tl + rl >= PATH_MAX)
			return -ENAMETOOLONG;
		memmove(abs + tl, rest, rl + 1);
		memcpy(abs, r->to, tl);
		d->mapped[i] = true;
		d->chfs[i] = chfs;
		d->rule[i] = r;
		return 1;
	}
	if (!cj_policy_has(p, CJ_DENY))
		return 0;
	/* lexically allowed: do its links lead into a denied prefix? */
	if (strncmp(abs, "/proc/self", 10) == 0 && (abs[10] == '/' || !abs[10]))
		snprintf(raw, PATH_MAX, "/proc/%d%s", (int)pid, abs + 10);
	else if (strncmp(abs, "/proc/thread-self", 17) == 0 && (abs[17] == '/' || !abs[17]))
		snprintf(raw, PATH_MAX, "/proc/%d%s", (int)pid, abs + 17);
	else
		strcpy(raw, abs);
	bool follow = follows_last(sc, args);
	if (walks_without_links(raw, follow))
		return 0; /* resolves to itself, which the lexical check allowed */
	char *real = d->scratch[1], *tmp = d->scratch[2];
	real_path(raw, follow, real, tmp);
	r = cj_policy_match(p, real);
	if (r && r->action == CJ_DENY)
		return -ENOENT;
	return 0;
}

void cj_decide(const struct cj_policy *p, const struct cj_sysc *sc, pid_t pid, const uint64_t args[6],
               struct cj_decision *d)
{
	d->verdict = CJ_V_ALLOW;
	d->mapped[0] = d->mapped[1] = false;
	d->chfs[0] = d->chfs[1] = false;
	d->rule[0] = d->rule[1] = NULL;
	int n = 0;
	for (int i = 0; i < 2 && sc->path[i] >= 0; i++, n++) {
		int rc = decide_path(p, sc, pid, args, i, d);
		if (rc < 0) {
			d->verdict = CJ_V_ERROR;
			d->err = rc;
			return;
		}
		if (rc > 0)
			d->verdict = CJ_V_MAP;
	}
	if (d->chfs[0] || d->chfs[1]) {
		/* a call naming a CHFS path and a local one (rename across) cannot be served */
		bool all = d->chfs[0] && (n < 2 || d->chfs[1]);
		d->verdict = all ? CJ_V_CHFS : CJ_V_ERROR;
		d->err = -EXDEV;
	}
}

/* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name (NUL-terminated) */
size_t cj_filter_dirents(const struct cj_policy *p, const char *dir, void *buf, size_t len)
{
	char *b = buf, path[PATH_MAX];
	size_t in = 0, out = 0, dl = strlen(dir);
	while (in + 19 < len) {
		unsigned short reclen;
		memcpy(&reclen, b + in + 16, sizeof(reclen));
		if (reclen < 20 || in + reclen > len)
			break; /* malformed: keep the rest as it is */
		const char *name = b + in + 19;
		const struct cj_rule *r = NULL;
		if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dl > 1 ? dir : "", name) < sizeof(path))
			r = cj_policy_match(p, path);
		if (!r || r->action != CJ_DENY) {
			if (out != in)
				memmove(b + out, b + in, reclen);
			out += reclen;
		}
		in += reclen;
	}
	if (in < len && out != in)
		memmove(b + out, b + in, len - in);
	return out + (len - in);
}
