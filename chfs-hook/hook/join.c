/*
 * join.c — when a hooked process joins the CHFS pool.
 *
 * A chfs.h program calls chfs_init() when it chooses, usually before any timed work; a hooked
 * program never calls it, so the hook joins for it (hook_chfs_ready, config.c) on its first
 * CHFS call. That first call can be the one the program times: IOR on one shared file touches
 * it before its write phase on rank 0 only, and rank 1 paid the whole join (0.26-0.30 s on a
 * 2-core VM, most of it libfabric's provider libraries) inside its timed create, which made
 * the hook 4x slower than chfs.h on that run.
 *
 * So the hook joins while the process starts, before main, when CHFS_HOOK_EAGER is set and
 * not 0, or when it is unset, the process is an MPI rank (PMI_RANK, PMIX_RANK or
 * OMPI_COMM_WORLD_RANK: the ranks of one job time their phases together, and one rank's late
 * join holds them all) and an argument names a path under a mount point (DIR/... or
 * --option=DIR/...): such a rank is about to use CHFS, and joining earlier costs it nothing
 * more. Other processes keep joining on first use: one that only names a CHFS path (echo,
 * dirname, mpiexec itself) would pay the whole join (0.26-0.31 s on Debian's libfabric against
 * 0.01-0.02 s) for nothing. The loader makes the same test to load this library at start
 * (loader.c); here the command line is read from /proc/self/cmdline, since this library's own
 * libc, in another link-map namespace, never saw main's arguments.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The whole of /proc/self/cmdline (NUL-separated, NUL-terminated), or NULL. */
static char *read_cmdline(size_t *len)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == cap) {
			char *bigger = realloc(buf, 2 * cap + 1);
			if (!bigger) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
	}
	close(fd);
	if (buf) {
		buf[n] = 0;
		*len = n;
	}
	return buf;
}

static int names_mount(const char *arg, char *norm, char *cpath)
{
	const char *eq = strchr(arg, '=');
	for (int i = 0; i < 2; i++, arg = eq ? eq + 1 : NULL) {
		if (arg && arg[0] == '/' && hook_normalize(arg, norm, PATH_MAX) >= 0 &&
		    hook_vpath_to_chfs(norm, cpath, PATH_MAX) == 1)
			return 1;
	}
	return 0;
}

static int cmdline_names_mount(void)
{
	size_t len = 0;
	char *args = read_cmdline(&len);
	char *norm = malloc(2 * PATH_MAX);
	int found = 0;
	if (args && norm) {
		size_t first = strlen(args) + 1; /* argv[0] is the program itself */
		for (size_t i = first; i < len && !found; i += strlen(args + i) + 1)
			found = names_mount(args + i, norm, norm + PATH_MAX);
	}
	free(norm);
	free(args);
	return found;
}

static int is_mpi_rank(void)
{
	return getenv("PMI_RANK") || getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK");
}

void hook_join_early(void)
{
	const char *eager = getenv("CHFS_HOOK_EAGER");
	if (eager ? strcmp(eager, "0") != 0 : is_mpi_rank() && cmdline_names_mount())
		hook_chfs_ready(); /* a failure was reported; later CHFS calls try again */
}
