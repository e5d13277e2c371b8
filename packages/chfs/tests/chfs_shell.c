/*
 * chfs_shell.c — chfs-test-shell: one libchfs client that runs namespace calls read from stdin,
 * one per line, and answers each with one line, so that a test can drive two clients (two
 * processes) in lockstep and interleave their calls exactly (test_dir_fence.py).
 *
 *   mkdir P | create P | unlink P | rmdir P | rename A B | stat P | list P
 *
 * Answer: "<result> <ms>", result "ok" or the errno's name (ENOENT, ...), ms the call's
 * wall-clock time in milliseconds; `list` answers "ok <ms> name1 name2 ..." (sorted as the
 * servers give them, "." and ".." left out). `create` is chfs_open_posix(O_CREAT | O_EXCL |
 * O_WRONLY, 0644) then chfs_close. Server, secret and timeouts come from the environment.
 */
#define _GNU_SOURCE
#include "chfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct names {
	char buf[8192];
	size_t len;
};

static int add_name(void *arg, const char *name, const struct stat *st, off_t off)
{
	struct names *n = arg;
	(void)st, (void)off;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	int w = snprintf(n->buf + n->len, sizeof n->buf - n->len, " %s", name);
	if (w < 0 || (size_t)w >= sizeof n->buf - n->len)
		return 1; /* full: the rest is left out */
	n->len += (size_t)w;
	return 0;
}

static int run(const char *cmd, const char *a, const char *b, struct names *n)
{
	struct stat st;
	if (strcmp(cmd, "mkdir") == 0)
		return chfs_mkdir(a, 0755);
	if (strcmp(cmd, "create") == 0) {
		int fd = chfs_open_posix(a, O_CREAT | O_EXCL | O_WRONLY, 0644, 0);
		return fd < 0 ? -1 : chfs_close(fd);
	}
	if (strcmp(cmd, "unlink") == 0)
		return chfs_unlink(a);
	if (strcmp(cmd, "rmdir") == 0)
		return chfs_rmdir(a);
	if (strcmp(cmd, "rename") == 0 && b)
		return chfs_rename(a, b);
	if (strcmp(cmd, "stat") == 0)
		return chfs_stat(a, &st);
	if (strcmp(cmd, "list") == 0)
		return chfs_readdir(a, n, add_name);
	errno = EINVAL;
	return -1;
}

int main(void)
{
	if (chfs_init(NULL) < 0) {
		fprintf(stderr, "chfs-test-shell: chfs_init: %s\n", strerror(errno));
		return 1;
	}
	char line[2 * 4200];
	while (fgets(line, sizeof line, stdin)) {
		char *save = NULL, *cmd = strtok_r(line, " \n", &save);
		char *a = strtok_r(NULL, " \n", &save), *b = strtok_r(NULL, " \n", &save);
		if (!cmd || !a) {
			printf("EINVAL 0\n");
			fflush(stdout);
			continue;
		}
		struct names n = {.len = 0};
		n.buf[0] = '\0';
		double t0 = now_ms();
		int rc = run(cmd, a, b, &n);
		int err = errno;
		double ms = now_ms() - t0;
		const char *what = rc == 0 ? "ok" : strerrorname_np(err);
		printf("%s %.1f%s\n", what ? what : "EIO", ms, rc == 0 ? n.buf : "");
		fflush(stdout);
	}
	chfs_term();
	return 0;
}
