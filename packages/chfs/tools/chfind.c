/*
 * chfind — search CHFS like find(1), the test evaluated on the servers (chfs_find): each server
 * examines the entries it owns below the start paths and returns only the matches, so a
 * whole-tree query costs one request per server instead of one readdir per directory.
 *
 * Parallel runs: with --rank R --nranks N (upstream's --mpi_rank/--mpi_size are accepted), or
 * under mpiexec (PMI_RANK/PMI_SIZE, OMPI_COMM_WORLD_RANK/SIZE, read from the environment:
 * chfind does not link MPI), this process asks only the servers with index % N == R; chfindrun
 * starts such processes without MPI and adds up their counts. --walk evaluates on the client
 * instead, by a readdir walk of every directory (upstream chfind's method), for comparison.
 */
#define _GNU_SOURCE
#include <chfs.h>

#include "findpred.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int verbose;
static uint64_t matched, visited;

static void usage(FILE *f)
{
	fprintf(f, "usage: chfind [-v] [-q] [--rank R --nranks N] [--walk] [PATH...] [EXPRESSION]\n"
	           "Search CHFS below each PATH (default /); tests run on the servers.\n"
	           "EXPRESSION: tests that must all hold (-a/-and accepted):\n"
	           "  -name GLOB            basename matches the shell pattern\n"
	           "  -size [+-]N[cwbkMG]   size rounded up to units (default 512-byte blocks) >, < or = N\n"
	           "  -newer FILE           modified after FILE (a CHFS path, else a local file)\n"
	           "  -type f|d|l[,...]     regular file, directory, symbolic link\n"
	           "  -v  per-server counts, search time and MATCHED found/examined on stderr\n"
	           "  -q  no counts\n"
	           "  --rank R --nranks N   ask only the servers with index %% N == R (chfindrun);\n"
	           "                        taken from PMI_RANK/PMI_SIZE under mpiexec\n"
	           "  --walk                evaluate on the client by a readdir walk (for comparison)\n"
	           "  -version              print the CHFS version\n");
}

static int print_match(void *arg, const char *path, const struct stat *st)
{
	(void)arg, (void)st;
	fputs(path, stdout);
	putchar('\n');
	matched++;
	return 0;
}

/* ---- --walk: the client-side method ---------------------------------------------------- */
struct walk {
	const struct findpred *pred;
	char **queue;
	size_t n, cap;
	const char *dir;
	int err;
};

static int walk_push(struct walk *w, const char *dir, const char *name)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		char **q = realloc(w->queue, cap * sizeof *q);
		if (!q)
			return -1;
		w->queue = q;
		w->cap = cap;
	}
	size_t dl = strlen(dir);
	int slash = dl == 0 || dir[dl - 1] != '/';
	if (asprintf(&w->queue[w->n], "%s%s%s", dir, slash ? "/" : "", name) < 0)
		return -1;
	w->n++;
	return 0;
}

static int walk_entry(void *arg, const char *name, const struct stat *st, off_t off)
{
	(void)off;
	struct walk *w = arg;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	visited++;
	int64_t mt = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	if (findpred_match(w->pred, name, st->st_mode, (uint64_t)st->st_size, mt)) {
		size_t dl = strlen(w->dir);
		printf("%s%s%s\n", w->dir, dl && w->dir[dl - 1] == '/' ? "" : "/", name);
		matched++;
	}
	if (S_ISDIR(st->st_mode) && walk_push(w, w->dir, name) < 0)
		w->err = ENOMEM;
	return 0;
}

static int newer_of(void *arg, const char *file, int64_t *ns)
{
	(void)arg;
	struct stat st;
	if (chfs_stat(file, &st) < 0 && stat(file, &st) < 0)
		return -errno;
	*ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	return 0;
}

static int client_walk(const char *start, int argc, char **argv)
{
	struct findpred *p = malloc(sizeof *p);
	const char *bad = NULL;
	int rc = p ? findpred_parse(argc, argv, newer_of, NULL, p, &bad) : -ENOMEM;
	if (rc) {
		fprintf(stderr, "chfind: %s: %s\n", bad ? bad : "expression", strerror(-rc));
		free(p);
		return 1;
	}
	struct stat st;
	if (chfs_lstat(start, &st) < 0) {
		fprintf(stderr, "chfind: %s: %s\n", start, strerror(errno));
		free(p);
		return 1;
	}
	const char *slash = strrchr(start, '/');
	const char *name = slash && slash[1] ? slash + 1 : start;
	int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if (findpred_match(p, name, st.st_mode, (uint64_t)st.st_size, mt))
		print_match(NULL, start, &st);
	struct walk w = {.pred = p};
	if (S_ISDIR(st.st_mode) && walk_push(&w, start, "") == 0)
		w.queue[0][strlen(start)] = '\0'; /* the start as written */
	for (size_t i = 0; i < w.n; i++) {
		w.dir = w.queue[i];
		if (chfs_readdir(w.dir, &w, walk_entry) < 0) {
			fprintf(stderr, "chfind: %s: %s\n", w.dir, strerror(errno));
			rc = 1;
		}
		free(w.queue[i]);
	}
	free(w.queue);
	free(p);
	if (w.err)
		fprintf(stderr, "chfind: %s\n", strerror(w.err));
	return rc || w.err;
}

/* ---- main --------------------------------------------------------------------------------- */
static int env_int(const char *a, const char *b)
{
	const char *v = getenv(a) ? getenv(a) : getenv(b);
	return v ? atoi(v) : -1;
}

static int parse_num(const char *s, int *out)
{
	char *end;
	long v = s ? strtol(s, &end, 10) : -1;
	if (!s || *end || v < 0 || v > 1 << 20)
		return -1;
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	int rank = env_int("PMI_RANK", "OMPI_COMM_WORLD_RANK"),
	    nranks = env_int("PMI_SIZE", "OMPI_COMM_WORLD_SIZE");
	int walk = 0, i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-version") || !strcmp(a, "--version")) {
			printf("CHFS version %s\n", chfs_version());
			return 0;
		} else if (!strcmp(a, "-v")) {
			verbose++;
		} else if (!strcmp(a, "-q")) {
			verbose = 0;
		} else if (!strcmp(a, "--walk")) {
			walk = 1;
		} else if (!strcmp(a, "--rank") || !strcmp(a, "--mpi_rank") ||
		           !strncmp(a, "--mpi_rank=", 11)) {
			if (parse_num(strchr(a, '=') ? strchr(a, '=') + 1 : argv[++i], &rank)) {
				fprintf(stderr, "chfind: %s needs a number\n", a);
				return 2;
			}
		} else if (!strcmp(a, "--nranks") || !strcmp(a, "--mpi_size") ||
		           !strncmp(a, "--mpi_size=", 11)) {
			if (parse_num(strchr(a, '=') ? strchr(a, '=') + 1 : argv[++i], &nranks) ||
			    nranks == 0) {
				fprintf(stderr, "chfind: %s needs a positive number\n", a);
				return 2;
			}
		} else {
			break; /* the expression */
		}
	}
	if (rank < 0 || nranks < 1) {
		rank = 0;
		nranks = 1;
	}
	if (rank >= nranks) {
		fprintf(stderr, "chfind: rank %d out of range for %d ranks\n", rank, nranks);
		return 2;
	}
	int p0 = i;
	while (i < argc && (argv[i][0] != '-' || !argv[i][1]))
		i++;
	int np = i - p0;
	char *root[] = {"/"};
	char **paths = np ? argv + p0 : root;
	np = np ? np : 1;
	if (chfs_init(NULL) < 0) {
		fprintf(stderr, "chfind: cannot reach CHFS: %s\n", strerror(errno));
		return 1;
	}
	int n = chfs_size() > 0 ? chfs_size() : 1, rc = 0;
	struct chfs_find_count *cnt = calloc((size_t)n, sizeof *cnt), *tot = calloc((size_t)n, sizeof *tot);
	if (!cnt || !tot) {
		fprintf(stderr, "chfind: out of memory\n");
		return 1;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int k = 0; k < np; k++) {
		if (walk && rank == 0) {
			rc |= client_walk(paths[k], argc - i, argv + i);
			continue;
		}
		if (walk)
			continue;
		if (chfs_find(paths[k], argc - i, argv + i, rank, nranks, print_match, NULL, cnt, n) < 0) {
			if (errno != EINVAL) /* the library named the bad test */
				fprintf(stderr, "chfind: %s: %s\n", paths[k], strerror(errno));
			rc = 1;
			if (errno == EINVAL)
				break;
		}
		for (int s = 0; s < n; s++) {
			tot[s].matched += cnt[s].matched;
			tot[s].visited += cnt[s].visited;
		}
	}
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (verbose) {
		fprintf(stderr, "chfind: searched in %.6f s (after chfs_init)\n",
		        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		uint64_t all = 0;
		for (int s = 0; s < n && !walk; s++) {
			if ((unsigned)s % (unsigned)nranks == (unsigned)rank)
				fprintf(stderr, "chfind: server %d: %llu matched of %llu examined\n", s,
				        (unsigned long long)tot[s].matched,
				        (unsigned long long)tot[s].visited);
			all += tot[s].visited;
		}
		fprintf(stderr, "MATCHED %llu/%llu\n", (unsigned long long)matched,
		        (unsigned long long)(walk ? visited : all));
	}
	free(cnt);
	free(tot);
	chfs_term();
	return rc;
}
