/*
 * chmkdir — create CHFS directories (-m MODE, -p for parents and no error if existing).
 */
#define _GNU_SOURCE
#include <chfs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	mode_t mode = 0755;
	int parents = 0, c, rc = 0;
	if (argc > 1 && !strcmp(argv[1], "--help")) {
		printf("usage: chmkdir [-p] [-m MODE] DIR...\nCreate CHFS directories.\n"
		       "  -p       create missing parents; no error if DIR exists\n"
		       "  -m MODE  permissions in octal (default 755)\n");
		return 0;
	}
	while ((c = getopt(argc, argv, "pm:")) != -1) {
		if (c == 'p')
			parents = 1;
		else if (c == 'm')
			mode = (mode_t)strtol(optarg, NULL, 8);
		else
			return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "chmkdir: missing directory (try --help)\n");
		return 2;
	}
	if (chfs_init(NULL) < 0) {
		fprintf(stderr, "chmkdir: cannot reach CHFS: %s\n", strerror(errno));
		return 1;
	}
	for (int i = optind; i < argc; i++) {
		char *p = argv[i]; /* (cut and mended in place below) */
		if (parents) {
			for (char *s = p + 1; *s; s++) {
				if (*s != '/')
					continue;
				*s = '\0';
				if (chfs_mkdir(p, 0755) < 0 && errno != EEXIST) {
					fprintf(stderr, "chmkdir: %s: %s\n", p, strerror(errno));
					rc = 1;
				}
				*s = '/';
			}
		}
		if (chfs_mkdir(p, mode) < 0 && !(parents && errno == EEXIST)) {
			fprintf(stderr, "chmkdir: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
		}
	}
	chfs_term();
	return rc;
}
