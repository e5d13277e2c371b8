/*
 * coop_gfmd_probe.c - does this gfmd speak the cooperative-cache protocol?
 * (chfs-stack patch against Gfarm 2.7.20)
 *
 * A stock gfmd treats any request it does not know as a protocol error
 * and closes the connection, so a patched client must not send a cache
 * request on its working gfmd connection before it knows the server is
 * patched.  The first time a process needs gfmd's cache table, it opens a
 * separate, uncached connection to the same gfmd and sends
 * GFM_PROTO_COOP_CACHE_HELLO (no arguments).  A patched gfmd answers with
 * its protocol version; a stock one drops that throw-away connection.  The
 * verdict is kept for the process (per gfmd host and port); a gfmd that
 * does not answer gets one log line and the cooperative cache is off for
 * the process, while its working connection is never touched.  A probe
 * that could not connect at all is not remembered (the next read retries).
 * libgfarm takes any connection error for a gfmd failover and would then
 * reconnect every connection to that file system: the probe's expected
 * error must not do that, so the flag is put back as it was.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <gfarm/gfarm.h>
#include "gfm_proto.h"
#include "gfm_client.h"
#include "filesystem.h"
#include "coop_gfmd_probe.h"

static pthread_mutex_t probe_mutex = PTHREAD_MUTEX_INITIALIZER;
static char probed_host[256];
static int probed_port = -1, probed_ok;

int
coop_gfmd_supported(struct gfm_connection *gfm_server)
{
	const char *host = gfm_client_hostname(gfm_server);
	int port = gfm_client_port(gfm_server), ok;
	struct gfm_connection *probe;
	struct gfarm_filesystem *fs;
	gfarm_int32_t version = 0;
	gfarm_error_t e;
	int failover;

	pthread_mutex_lock(&probe_mutex);
	if (port == probed_port && strcmp(host, probed_host) == 0) {
		ok = probed_ok;
		pthread_mutex_unlock(&probe_mutex);
		return (ok);
	}
	fs = gfarm_filesystem_get_by_connection(gfm_server);
	failover = gfarm_filesystem_failover_detected(fs);
	e = gfm_client_connect(host, port, gfm_client_username(gfm_server),
	    &probe, NULL);
	if (e != GFARM_ERR_NO_ERROR) {
		pthread_mutex_unlock(&probe_mutex);
		return (0);
	}
	e = gfm_client_rpc(probe, 0, GFM_PROTO_COOP_CACHE_HELLO, "/i",
	    &version);
	gfm_client_connection_free(probe);
	gfarm_filesystem_set_failover_detected(fs, failover);
	ok = e == GFARM_ERR_NO_ERROR && version == COOP_GFMD_PROTOCOL_VERSION;
	if (!ok)
		gflog_error(GFARM_MSG_UNFIXED, "cooperative cache: gfmd %s:%d "
		    "does not speak its protocol (%s; an unpatched gfmd?): "
		    "cache disabled", host, port, e != GFARM_ERR_NO_ERROR ?
		    gfarm_error_string(e) : "other version");
	snprintf(probed_host, sizeof(probed_host), "%s", host);
	probed_port = port;
	probed_ok = ok;
	pthread_mutex_unlock(&probe_mutex);
	return (ok);
}
