/*
 * gfcctable - print gfmd's cache management table of the cooperative cache
 * (chfs-stack): one line per (file, client) that may cache it,
 *
 *   inode generation client-endpoint requested-pages transferred-pages
 *
 * in gfmd's order, so the first client of an inode is the one gfmd hands
 * out next (smallest requested - transferred).  Usage: gfcctable [-P path]
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
			    "print gfmd's cooperative-cache table: inode gen "
			    "client requested transferred\n");
			return (c == 'h' ? 0 : 2);
		}
	}
	if ((e = gfarm_initialize(&argc, &argv)) != GFARM_ERR_NO_ERROR) {
		fprintf(stderr, "gfcctable: %s\n", gfarm_error_string(e));
		return (1);
	}
	e = gfm_client_connection_and_process_acquire_by_path(path,
	    &gfm_server);
	if (e == GFARM_ERR_NO_ERROR) {
		e = gfm_client_rpc(gfm_server, 0, GFM_PROTO_COOP_CACHE_DUMP,
		    "/s", &text);
		gfm_client_connection_free(gfm_server);
	}
	if (e != GFARM_ERR_NO_ERROR) {
		fprintf(stderr, "gfcctable: %s: %s\n", path,
		    gfarm_error_string(e));
		gfarm_terminate();
		return (1);
	}
	fputs(text, stdout);
	free(text);
	gfarm_terminate();
	return (0);
}
