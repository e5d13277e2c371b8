/*
 * chstagein — stage files from the backend directory (chfsd -b) into CHFS, in parallel.
 *
 * The paths go to chfs_stagein_many() in batches (every server fetches the chunks it owns of
 * every file of a batch; a thousand small files cost a few requests per server, not three
 * each); this tool adds parallelism across batches: -j threads here, and across processes when run under
 * mpiexec (the rank and size are read from the launcher's environment — PMI_RANK/PMI_SIZE of
 * MPICH's Hydra, OMPI_COMM_WORLD_RANK/SIZE of Open MPI — and rank r takes every size-th path,
 * so `find . | xargs mpiexec -n 4 chstagein` splits the list without linking MPI; `-f LIST`
 * gives every rank the names without xargs, whose argument limits split a long list into
 * several launches).
 *
 * A path names a backend file: an absolute path under $CHFS_BACKEND_PATH, or a relative path
 * resolved against the current directory when that is under $CHFS_BACKEND_PATH (so `cd
 * $CHFS_BACKEND_PATH/input && find . | xargs chstagein` works); anything else is taken as a
 * CHFS path.
 */
#define _GNU_SOURCE
#include <chfs.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAGE_CHUNK_SIZE (4L << 20) /* chunk size of staged files unless -c or CHFS_CHUNK_SIZE */

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: chstagein [-a] [-b bufsize] [-c chunksize] [-f list] [-j threads] [-v] [file ...]\n"
	        "Stage backend files into CHFS (every server fetches the chunks it owns).\n"
	        "Files come from the arguments, from -f list, or one per line on standard input.\n"
	        "  -a            asynchronous accesses (CHFS_ASYNC_ACCESS=1)\n"
	        "  -b bufsize    bytes a server reads from the backend at a time (default 1M)\n"
	        "  -c chunksize  chunk size of the staged CHFS files (default $CHFS_CHUNK_SIZE or 4M)\n"
	        "  -f list       read the files from this file, one per line (- = standard input);\n"
	        "                every rank of an mpiexec reads it and takes its share\n"
	        "  -j threads    batches of files staged at once by this process (default 4)\n"
	        "  -v            print each file staged\n"
	        "  --help        this text\n"
	        "A path under $CHFS_BACKEND_PATH (absolute, or relative to a current directory under\n"
	        "it) names that backend file; other paths are CHFS paths. Under mpiexec each rank\n"
	        "stages its share of the files: find . | xargs mpiexec -n 4 chstagein\n");
}

static long parse_size(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || v < 0 || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K': v <<= 10, end++; break;
	case 'm':
	case 'M': v <<= 20, end++; break;
	case 'g':
	case 'G': v <<= 30, end++; break;
	}
	return *end || v > INT_MAX ? -1 : v;
}

static const char *backend; /* $CHFS_BACKEND_PATH without trailing '/' */
static char cwd[PATH_MAX];

/* The CHFS path of argument a (into out, PATH_MAX): see the file comment. */
static int chfs_path(const char *a, char *out)
{
	char full[2 * PATH_MAX];
	if (a[0] == '/')
		snprintf(full, sizeof full, "%s", a);
	else
		snprintf(full, sizeof full, "%s/%s", cwd, a);
	size_t n = backend ? strlen(backend) : 0;
	if (n && strncmp(full, backend, n) == 0 && (full[n] == '/' || full[n] == '\0'))
		return snprintf(out, PATH_MAX, "/%s", full + n + (full[n] == '/')) >= PATH_MAX ? -1 : 0;
	return snprintf(out, PATH_MAX, "%s%s", a[0] == '/' ? "" : "/", a) >= PATH_MAX ? -1 : 0;
}

static char **paths;
static size_t npaths;
static atomic_size_t next;
static atomic_int failures;
static int rank, nranks = 1, verbose;

static size_t batch = 1; /* files per chfs_stagein_many: see main */

/* Stage paths[k..k+n) (n <= BATCH_MAX) in one chfs_stagein_many. */
#define BATCH_MAX 64
static void stage_batch(size_t k, size_t n, char (*cp)[PATH_MAX])
{
	const char *v[BATCH_MAX];
	int err[BATCH_MAX];
	size_t m = 0, at[BATCH_MAX];
	for (size_t i = k; i < k + n; i++) {
		if (chfs_path(paths[i], cp[m]) < 0) {
			fprintf(stderr, "chstagein: %s: path too long\n", paths[i]);
			atomic_fetch_add(&failures, 1);
			continue;
		}
		v[m] = cp[m];
		at[m++] = i;
	}
	if (!m)
		return;
	chfs_stagein_many(v, (int)m, err);
	for (size_t j = 0; j < m; j++) {
		if (err[j]) {
			fprintf(stderr, "chstagein: %s: %s\n", paths[at[j]], strerror(err[j]));
			atomic_fetch_add(&failures, 1);
		} else if (verbose) {
			printf("%s\n", v[j]);
		}
	}
}

static void *worker(void *arg)
{
	(void)arg;
	char(*cp)[PATH_MAX] = malloc(BATCH_MAX * sizeof *cp);
	for (;;) {
		size_t k = atomic_fetch_add(&next, batch);
		if (k >= npaths || !cp)
			break;
		stage_batch(k, npaths - k < batch ? npaths - k : batch, cp);
	}
	free(cp);
	return NULL;
}

static int add_path(const char *p, size_t index, size_t *cap)
{
	if ((int)(index % (size_t)nranks) != rank)
		return 0; /* another rank's */
	if (npaths == *cap) {
		char **np = realloc(paths, (*cap = *cap ? 2 * *cap : 256) * sizeof *paths);
		if (!np)
			return -1;
		paths = np;
	}
	return (paths[npaths++] = strdup(p)) ? 0 : -1;
}

static void launcher_rank(void)
{
	static const char *const vars[][2] = {{"PMI_RANK", "PMI_SIZE"},
	                                      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
	                                      {"PMIX_RANK", NULL}};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *r = getenv(vars[i][0]), *s = vars[i][1] ? getenv(vars[i][1]) : NULL;
		if (r && s && atoi(s) > 0 && atoi(r) >= 0 && atoi(r) < atoi(s)) {
			rank = atoi(r);
			nranks = atoi(s);
			return;
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {{"help", no_argument, NULL, 'H'}, {0}};
	long bufsize = -1, chunk = -1, threads = 4;
	const char *list = NULL;
	int c, async = 0;
	while ((c = getopt_long(argc, argv, "ab:c:f:j:v", lopts, NULL)) != -1) {
		switch (c) {
		case 'f': list = optarg; break;
		case 'a': async = 1; break;
		case 'b': bufsize = parse_size(optarg); break;
		case 'c': chunk = parse_size(optarg); break;
		case 'j': threads = parse_size(optarg); break;
		case 'v': verbose = 1; break;
		case 'H': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if ((c == 'b' && bufsize < 0) || (c == 'c' && chunk <= 0) ||
		    (c == 'j' && (threads < 1 || threads > 256))) {
			fprintf(stderr, "chstagein: -%c %s: invalid value\n", c, optarg);
			return 2;
		}
	}
	launcher_rank();
	if (!getcwd(cwd, sizeof cwd))
		cwd[0] = '\0';
	static char broot[PATH_MAX];
	const char *b = getenv("CHFS_BACKEND_PATH");
	if (b && *b && realpath(b, broot))
		backend = broot;
	size_t cap = 0, index = 0;
	if (optind < argc) {
		for (int i = optind; i < argc; i++)
			if (add_path(argv[i], index++, &cap) < 0)
				return 1;
	}
	if (list || optind == argc) {
		FILE *in = !list || strcmp(list, "-") == 0 ? stdin : fopen(list, "r");
		if (!in) {
			fprintf(stderr, "chstagein: %s: %s\n", list, strerror(errno));
			return 1;
		}
		char *line = NULL;
		size_t lcap = 0;
		ssize_t n;
		while ((n = getline(&line, &lcap, in)) > 0) {
			if (line[n - 1] == '\n')
				line[--n] = '\0';
			if (n && add_path(line, index++, &cap) < 0)
				return 1;
		}
		free(line);
		if (in != stdin)
			fclose(in);
	}
	/* Batches as large as leave every thread several (a few big files stay one per thread,
	 * so their copies overlap; a thousand small ones go BATCH_MAX at a time). */
	batch = npaths / ((size_t)threads * 4);
	batch = batch < 1 ? 1 : batch > BATCH_MAX ? BATCH_MAX : batch;
	/* This node's servers over their Unix sockets, as chfs-run does (CHFS_XPRT_LOCAL=0 keeps
	 * libfabric): the data go from the backend to the servers, never through here, and loading
	 * Debian's libfabric costs every process ~0.2 s (PSM constructors) — 40 % of a stage-in of
	 * 1,000 x 1 MiB. A server elsewhere still loads libfabric, for it alone (xprt_local.c). */
	setenv("CHFS_XPRT_LOCAL", "1", 0);
	if (chfs_init(NULL) < 0) {
		fprintf(stderr, "chstagein: cannot reach a CHFS server (CHFS_SERVER): %s\n", strerror(errno));
		return 1;
	}
	if (async)
		chfs_set_async_access(1);
	if (bufsize >= 0)
		chfs_set_stagein_buf_size((int)bufsize);
	/* Not libchfs's 64 KiB: a server makes one backing file per file it holds chunks of, and sets
	 * the chunk's held bit after every chunk it fetches, so small chunks made a stage-in 1.7-3x
	 * slower (1,000 x 1 MiB, 10 x 256 MiB: run-backend-bench) for nothing a staged input gains. */
	if (chunk < 0 && !getenv("CHFS_CHUNK_SIZE"))
		chunk = STAGE_CHUNK_SIZE;
	if (chunk > 0)
		chfs_set_chunk_size((int)chunk);
	pthread_t *t = calloc((size_t)threads, sizeof *t);
	long started = 0;
	for (long i = 0; t && i < threads; i++)
		if (pthread_create(&t[i], NULL, worker, NULL) == 0)
			started++;
	if (!started)
		worker(NULL);
	for (long i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	chfs_term_without_sync(); /* nothing written: no flush to wait for */
	return atomic_load(&failures) ? 1 : 0;
}
