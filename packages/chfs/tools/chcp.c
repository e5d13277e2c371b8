/*
 * chcp — copy files into, out of, and within CHFS (stage in / stage out).
 *
 * A path written "chfs:PATH" names a CHFS file, anything else a local file. With several sources
 * the destination must be a directory; -r copies directories recursively. Data moves in
 * BUF-sized pread/pwrite calls (default 4 MiB: large calls let libchfs use RMA and talk to all
 * servers at once). -v prints a bandwidth summary; copies of 64 MiB or more show progress on a
 * terminal (or always with -P).
 */
#define _GNU_SOURCE
#include <chfs.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static size_t bufsize = 4 << 20;
static int chunk, recursive, verbose, progress, local_place;
static char *buf;
static unsigned long long total_bytes, total_files;
static double t_start, t_last;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int is_chfs(const char *p) { return strncmp(p, "chfs:", 5) == 0; }
static const char *cpath(const char *p) { return p + 5; }

/* Uniform file operations over both worlds. */
struct end {
	int chfs, fd;
};

static int x_stat(const char *p, struct stat *st)
{
	return is_chfs(p) ? chfs_stat(cpath(p), st) : stat(p, st);
}

static int x_open_read(const char *p, struct end *e)
{
	e->chfs = is_chfs(p);
	e->fd = e->chfs ? chfs_open(cpath(p), O_RDONLY) : open(p, O_RDONLY | O_CLOEXEC);
	return e->fd;
}

static int x_open_write(const char *p, mode_t mode, struct end *e)
{
	e->chfs = is_chfs(p);
	if (e->chfs)
		e->fd = chfs_create_chunk_size(
		        cpath(p), O_WRONLY | O_TRUNC | (local_place ? CHFS_O_LOCAL : 0), mode, chunk);
	else
		e->fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	return e->fd;
}

static ssize_t x_pread(struct end *e, void *b, size_t n, off_t off)
{
	return e->chfs ? chfs_pread(e->fd, b, n, off) : pread(e->fd, b, n, off);
}

static ssize_t x_pwrite(struct end *e, const void *b, size_t n, off_t off)
{
	return e->chfs ? chfs_pwrite(e->fd, b, n, off) : pwrite(e->fd, b, n, off);
}

static int x_close(struct end *e) { return e->chfs ? chfs_close(e->fd) : close(e->fd); }

static int x_mkdir(const char *p, mode_t m)
{
	int rc = is_chfs(p) ? chfs_mkdir(cpath(p), m) : mkdir(p, m);
	return rc < 0 && errno == EEXIST ? 0 : rc;
}

static void show_progress(int final)
{
	double t = now();
	if (!progress || (!final && t - t_last < 1.0))
		return;
	t_last = t;
	fprintf(stderr, "\rchcp: %llu files, %.1f MiB, %.1f MiB/s%s", total_files, total_bytes / 1048576.0,
	        total_bytes / 1048576.0 / (t - t_start + 1e-9), final ? "\n" : "");
}

static int copy_file(const char *src, const char *dst, mode_t mode)
{
	struct end in, out;
	if (x_open_read(src, &in) < 0) {
		fprintf(stderr, "chcp: %s: %s\n", src, strerror(errno));
		return 1;
	}
	if (x_open_write(dst, mode & 07777, &out) < 0) {
		fprintf(stderr, "chcp: %s: %s\n", dst, strerror(errno));
		x_close(&in);
		return 1;
	}
	off_t off = 0;
	int rc = 0;
	for (;;) {
		ssize_t n = x_pread(&in, buf, bufsize, off);
		if (n < 0) {
			fprintf(stderr, "chcp: reading %s: %s\n", src, strerror(errno));
			rc = 1;
			break;
		}
		if (n == 0)
			break;
		if (x_pwrite(&out, buf, (size_t)n, off) != n) {
			fprintf(stderr, "chcp: writing %s: %s\n", dst, strerror(errno));
			rc = 1;
			break;
		}
		off += n;
		total_bytes += (unsigned long long)n;
		show_progress(0);
	}
	x_close(&in);
	if (x_close(&out) < 0 && !rc) {
		fprintf(stderr, "chcp: closing %s: %s\n", dst, strerror(errno));
		rc = 1;
	}
	total_files++;
	return rc;
}

static int copy_any(const char *src, const char *dst);

struct names {
	char **v;
	size_t n, cap;
};

static int add_name(struct names *ns, const char *name)
{
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (ns->n == ns->cap) {
		ns->cap = ns->cap ? 2 * ns->cap : 64;
		ns->v = realloc(ns->v, ns->cap * sizeof *ns->v);
		if (!ns->v)
			return 1;
	}
	ns->v[ns->n++] = strdup(name);
	return 0;
}

static int chfs_filler(void *b, const char *name, const struct stat *st, off_t off)
{
	(void)st, (void)off;
	return add_name(b, name);
}

static int copy_dir(const char *src, const char *dst, mode_t mode)
{
	struct names ns = {0};
	if (x_mkdir(dst, mode & 07777) < 0) {
		fprintf(stderr, "chcp: %s: %s\n", dst, strerror(errno));
		return 1;
	}
	if (is_chfs(src)) {
		if (chfs_readdir(cpath(src), &ns, chfs_filler) < 0) {
			fprintf(stderr, "chcp: %s: %s\n", src, strerror(errno));
			return 1;
		}
	} else {
		DIR *d = opendir(src);
		struct dirent *de;
		if (!d) {
			fprintf(stderr, "chcp: %s: %s\n", src, strerror(errno));
			return 1;
		}
		while ((de = readdir(d)))
			add_name(&ns, de->d_name);
		closedir(d);
	}
	int rc = 0;
	for (size_t i = 0; i < ns.n; i++) {
		char *s = NULL, *t = NULL; /* names as deep as CHFS allows */
		if (asprintf(&s, "%s/%s", src, ns.v[i]) < 0 || asprintf(&t, "%s/%s", dst, ns.v[i]) < 0) {
			fprintf(stderr, "chcp: %s/%s: %s\n", src, ns.v[i], strerror(ENOMEM));
			rc = 1;
		} else {
			rc |= copy_any(s, t);
		}
		free(s);
		free(t);
		free(ns.v[i]);
	}
	free(ns.v);
	return rc;
}

static int copy_any(const char *src, const char *dst)
{
	struct stat st;
	if (x_stat(src, &st) < 0) {
		fprintf(stderr, "chcp: %s: %s\n", src, strerror(errno));
		return 1;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!recursive) {
			fprintf(stderr, "chcp: %s is a directory (use -r)\n", src);
			return 1;
		}
		return copy_dir(src, dst, st.st_mode);
	}
	return copy_file(src, dst, st.st_mode);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: chcp [-r] [-v] [-P] [-l] [-b BUF] [-c CHUNK] SRC... DST\n"
	           "Copy files into, out of, or within CHFS; write CHFS paths as chfs:/path.\n"
	           "  -r        copy directories recursively\n"
	           "  -v        print files, bytes, time and bandwidth at the end\n"
	           "  -P        always show progress (default: on a terminal for >= 64 MiB)\n"
	           "  -l        create CHFS files with local placement (all chunks on this node)\n"
	           "  -b BUF    transfer size in bytes (default 4194304)\n"
	           "  -c CHUNK  chunk size of new CHFS files (default CHFS_CHUNK_SIZE)\n");
}

int main(int argc, char **argv)
{
	int c;
	if (argc > 1 && !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	while ((c = getopt(argc, argv, "rvPlb:c:")) != -1) {
		switch (c) {
		case 'r': recursive = 1; break;
		case 'v': verbose = 1; break;
		case 'P': progress = 1; break;
		case 'l': local_place = 1; break;
		case 'b': bufsize = strtoull(optarg, NULL, 0); break;
		case 'c': chunk = atoi(optarg); break;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind < 2 || bufsize == 0) {
		usage(stderr);
		return 2;
	}
	if (!(buf = malloc(bufsize)))
		return 1;
	if (chfs_init(NULL) < 0) {
		fprintf(stderr, "chcp: cannot reach CHFS: %s\n", strerror(errno));
		return 1;
	}
	const char *dst = argv[argc - 1];
	struct stat st;
	int dst_dir = x_stat(dst, &st) == 0 && S_ISDIR(st.st_mode), rc = 0;
	if (argc - optind > 2 && !dst_dir) {
		fprintf(stderr, "chcp: %s: not a directory\n", dst);
		return 1;
	}
	if (!progress && isatty(2)) {
		unsigned long long sum = 0;
		for (int i = optind; i < argc - 1; i++)
			if (x_stat(argv[i], &st) == 0)
				sum += (unsigned long long)st.st_size;
		progress = sum >= (64ull << 20) || recursive;
	}
	t_start = t_last = now();
	for (int i = optind; i < argc - 1; i++) {
		char *target = NULL;
		const char *base = strrchr(argv[i], '/');
		base = base ? base + 1 : (is_chfs(argv[i]) ? cpath(argv[i]) : argv[i]);
		if ((dst_dir ? asprintf(&target, "%s/%s", dst, base) : asprintf(&target, "%s", dst)) < 0) {
			fprintf(stderr, "chcp: %s: %s\n", argv[i], strerror(ENOMEM));
			rc = 1;
			continue;
		}
		rc |= copy_any(argv[i], target);
		free(target);
	}
	show_progress(1);
	double t = now() - t_start;
	if (verbose)
		printf("chcp: %llu files, %llu bytes in %.3f s: %.1f MiB/s\n", total_files, total_bytes, t,
		       total_bytes / 1048576.0 / (t > 0 ? t : 1e-9));
	chfs_term();
	free(buf);
	return rc;
}
