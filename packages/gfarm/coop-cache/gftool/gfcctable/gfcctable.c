/*
 * gfcctable - print gfmd's cache management table of the cooperative cache
 * (chfs-stack): one line per (file, client) that may cache it,
 *
 *   inode generation client-endpoint requested-pages transferred-pages
 *
 * after one "# holder endpoint requested-pages transferred-pages" line per
 * holder: its totals since gfmd started (the per-holder hit rate).
 * in gfmd's order, so the first client of an inode is the one gfmd hands
 * out next (smallest requested - transferred).  Usage: gfcctable [-P path]
 *
 * For tests and administrators, two requests a client library makes:
 *   gfcctable admit INODE GEN              prints gfmd's holder token
 *   gfcctable register INODE GEN EP TOKEN  registers EP as a holder
 * (gfmd refuses a registration whose token it did not issue for INODE GEN)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gfarm/gfarm.h>

#include "gfm_proto.h"
#include "gfm_client.h"
#include "lookup.h"

int
main(int argc, char **argv)
{
	const char *path = "/";
	struct gfm_connection *gfm_server;
	gfarm_error_t e;
	char *text = NULL;
	const char *cmd;
	gfarm_uint64_t ino = 0, gen = 0;
	int c;

	while ((c = getopt(argc, argv, "hP:")) != -1) {
		switch (c) {
		case 'P':
			path = optarg;
			break;
		case 'h':
		default:
			fprintf(c == 'h' ? stdout : stderr,
			    "usage: gfcctable [-P path]\n"
			    "       gfcctable [-P path] admit INODE GEN\n"
			    "       gfcctable [-P path] register INODE GEN EP "
			    "TOKEN\n"
			    "print gfmd's cooperative-cache table: inode gen "
			    "client requested transferred\n");
			return (c == 'h' ? 0 : 2);
		}
	}
	argc -= optind;
	argv += optind;
	cmd = argc > 0 ? argv[0] : "dump";
	if (!(strcmp(cmd, "dump") == 0 && argc <= 1) &&
	    !(strcmp(cmd, "admit") == 0 && argc == 3) &&
	    !(strcmp(cmd, "register") == 0 && argc == 5)) {
		fprintf(stderr, "gfcctable: bad arguments (see -h)\n");
		return (2);
	}
	if (argc >= 3) {
		ino = strtoull(argv[1], NULL, 10);
		gen = strtoull(argv[2], NULL, 10);
	}
	if ((e = gfarm_initialize(NULL, NULL)) != GFARM_ERR_NO_ERROR) {
		fprintf(stderr, "gfcctable: %s\n", gfarm_error_string(e));
		return (1);
	}
	e = gfm_client_connection_and_process_acquire_by_path(path,
	    &gfm_server);
	if (e == GFARM_ERR_NO_ERROR) {
		if (strcmp(cmd, "admit") == 0)
			e = gfm_client_rpc(gfm_server, 0,
			    GFM_PROTO_COOP_CACHE_ADMIT, "ll/s", ino, gen,
			    &text);
		else if (strcmp(cmd, "register") == 0)
			e = gfm_client_rpc(gfm_server, 0,
			    GFM_PROTO_COOP_CACHE_REGISTER, "llss/", ino, gen,
			    argv[3], argv[4]);
		else
			e = gfm_client_rpc(gfm_server, 0,
			    GFM_PROTO_COOP_CACHE_DUMP, "/s", &text);
		gfm_client_connection_free(gfm_server);
	}
	if (e != GFARM_ERR_NO_ERROR) {
		fprintf(stderr, "gfcctable: %s %s: %s\n", cmd, path,
		    gfarm_error_string(e));
		gfarm_terminate();
		return (1);
	}
	if (text != NULL) {
		fputs(text, stdout);
		if (strcmp(cmd, "admit") == 0)
			putchar('\n');
	}
	free(text);
	gfarm_terminate();
	return (0);
}
