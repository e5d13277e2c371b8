/*
 * chrmdir — remove empty CHFS directories.
 */
#include <chfs.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rc = 0;
	if (argc < 2 || !strcmp(argv[1], "--help")) {
		printf("usage: chrmdir DIR...\nRemove empty CHFS directories.\n");
		return argc < 2 ? 2 : 0;
	}
	if (chfs_init(NULL) < 0) {
		fprintf(stderr, "chrmdir: cannot reach CHFS: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 1; i < argc; i++)
		if (chfs_rmdir(argv[i]) < 0) {
			fprintf(stderr, "chrmdir: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
		}
	chfs_term();
	return rc;
}
