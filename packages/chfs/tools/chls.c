/*
 * chls — list CHFS directories (-l long format with mode, size, mtime; -a includes "." and
 * ".."). Entries come in server order, not sorted, unless -s.
 */
#define _GNU_SOURCE
#include <chfs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int longfmt, all, sorted;
struct ent {
	char *name;
	struct stat st;
};
static struct ent *ents;
static size_t nents, cap;

static int collect(void *buf, const char *name, const struct stat *st, off_t off)
{
	(void)buf, (void)off;
	if (!all && (!strcmp(name, ".") || !strcmp(name, "..")))
		return 0;
	if (nents == cap) {
		cap = cap ? cap * 2 : 256;
		ents = realloc(ents, cap * sizeof *ents);
		if (!ents)
			return 1;
	}
	ents[nents].name = strdup(name);
	ents[nents].st = *st;
	nents++;
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->name, ((const struct ent *)b)->name);
}

static void print(const struct ent *e)
{
	if (!longfmt) {
		printf("%s\n", e->name);
		return;
	}
	char t[32];
	struct tm tm;
	time_t mt = e->st.st_mtim.tv_sec;
	strftime(t, sizeof t, "%Y-%m-%d %H:%M", localtime_r(&mt, &tm));
	char type = S_ISDIR(e->st.st_mode) ? 'd' : S_ISLNK(e->st.st_mode) ? 'l' : '-';
	printf("%c%04o %12lld %s %s\n", type, e->st.st_mode & 07777, (long long)e->st.st_size, t, e->name);
}

int main(int argc, char **argv)
{
	int c, rc = 0;
	if (argc > 1 && !strcmp(argv[1], "--help")) {
		printf("usage: chls [-l] [-a] [-s] [PATH...]\nList CHFS directories (default /).\n"
		       "  -l  long format: type+mode, size, mtime, name\n"
		       "  -a  include . and ..\n  -s  sort by name\n");
		return 0;
	}
	while ((c = getopt(argc, argv, "las")) != -1) {
		if (c == 'l')
			longfmt = 1;
		else if (c == 'a')
			all = 1;
		else if (c == 's')
			sorted = 1;
		else
			return 2;
	}
	if (chfs_init(NULL) < 0) {
		fprintf(stderr, "chls: cannot reach CHFS: %s\n", strerror(errno));
		return 1;
	}
	const char *def[] = {"/"};
	char **paths = optind < argc ? argv + optind : (char **)def;
	int np = optind < argc ? argc - optind : 1;
	for (int i = 0; i < np; i++) {
		struct stat st;
		nents = 0;
		if (chfs_stat(paths[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
			struct ent e = {paths[i], st};
			print(&e);
			continue;
		}
		if (chfs_readdir(paths[i], NULL, collect) < 0) {
			fprintf(stderr, "chls: %s: %s\n", paths[i], strerror(errno));
			rc = 1;
			continue;
		}
		if (np > 1)
			printf("%s:\n", paths[i]);
		if (sorted)
			qsort(ents, nents, sizeof *ents, cmp);
		for (size_t k = 0; k < nents; k++) {
			print(&ents[k]);
			free(ents[k].name);
		}
	}
	chfs_term();
	return rc;
}
