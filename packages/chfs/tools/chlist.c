/*
 * chlist — list the servers of a CHFS pool in pool order, asking one server (-s, or the first
 * answering CHFS_SERVER entry). Talks the wire protocol directly (it is an admin tool), so it
 * also works while a pool is half up. -c prints one comma-separated line for CHFS_SERVER.
 */
#define _GNU_SOURCE
#include "config.h"
#include "log.h"
#include "placement.h"
#include "wire.h"
#include "xprt.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: chlist [-c] [-n N] [-s SERVER] [-t MSEC]\n"
	           "List the servers of the CHFS pool (address and placement hash per line).\n"
	           "  -c        one comma-separated line (for CHFS_SERVER)\n"
	           "  -n N      at most N servers\n"
	           "  -s ADDR   ask this server (default: CHFS_SERVER entries in turn)\n"
	           "  -t MSEC   timeout (default 5000)\n");
}

static int ask(const char *addr, int timeout, const uint8_t *secret, char *list, size_t cap)
{
	char proto[16];
	const char *sep = strstr(addr, "://");
	if (!sep || (size_t)(sep - addr) >= sizeof proto)
		return -EINVAL;
	memcpy(proto, addr, (size_t)(sep - addr));
	proto[sep - addr] = '\0';
	struct xprt_opts o = {.proto = proto};
	xprt_t *x;
	xprt_peer_t *p;
	int rc = xprt_open(&o, &x);
	if (rc)
		return rc;
	uint8_t req[WIRE_HDR_LEN];
	size_t rcap = WIRE_HDR_LEN + WIRE_LIST_MAX + 64, rl;
	uint8_t *rep = malloc(rcap);
	struct wire_hdr h = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .op = WOP_NODE_LIST};
	memcpy(h.secret, secret, CHFS_SECRET_LEN);
	wire_hdr_put(req, &h);
	rc = xprt_connect(x, addr, &p);
	if (rc == 0)
		rc = xprt_call(x, p, req, sizeof req, rep, rcap, &rl, timeout);
	if (rc == 0)
		rc = wire_hdr_get(rep, rl, &h);
	if (rc == 0)
		rc = h.status;
	if (rc == 0) {
		struct wdec d;
		size_t n;
		wdec_init(&d, rep + WIRE_HDR_LEN, rl - WIRE_HDR_LEN);
		wdec_u64(&d);
		const char *l = wdec_bytes(&d, cap - 1, &n);
		rc = wdec_finish(&d);
		if (rc == 0) {
			memcpy(list, l, n);
			list[n] = '\0';
		}
	}
	free(rep);
	xprt_close(x);
	return rc;
}

int main(int argc, char **argv)
{
	int csv = 0, max = -1, timeout = 5000, c;
	const char *server = NULL;
	static const struct option lo[] = {{"help", no_argument, NULL, 'h'}, {0}};
	chfs_log_set_prog("chlist");
	while ((c = getopt_long(argc, argv, "cn:s:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 'c': csv = 1; break;
		case 'n': max = atoi(optarg); break;
		case 's': server = optarg; break;
		case 't': timeout = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	struct chfs_config cfg;
	char err[512];
	if (chfs_config_load(&cfg, err, sizeof err)) {
		fprintf(stderr, "chlist: %s\n", err);
		return 2;
	}
	uint8_t secret[CHFS_SECRET_LEN] = {0};
	int rc = secret_load(cfg.secret_file, secret);
	if (rc)
		fprintf(stderr, "chlist: warning: pool secret %s: %s\n", cfg.secret_file, strerror(-rc));
	char cand[4096], *list = malloc(WIRE_LIST_MAX + 1);
	snprintf(cand, sizeof cand, "%s", server ? server : cfg.server);
	if (!cand[0]) {
		fprintf(stderr, "chlist: no server: set CHFS_SERVER or use -s\n");
		return 2;
	}
	rc = -ENOTCONN;
	for (char *sv, *a = strtok_r(cand, ",", &sv); a && rc; a = strtok_r(NULL, ",", &sv))
		rc = ask(a, timeout, secret, list, WIRE_LIST_MAX + 1);
	if (rc) {
		fprintf(stderr, "chlist: no server answered: %s\n",
		        rc == -EACCES ? "wrong or missing pool secret" : strerror(-rc));
		return 1;
	}
	int i = 0;
	for (char *sv, *a = strtok_r(list, ",", &sv); a && (max < 0 || i < max); a = strtok_r(NULL, ",", &sv), i++) {
		if (csv)
			printf("%s%s", i ? "," : "", a);
		else
			printf("%s %016llx\n", a, (unsigned long long)chfs_hash_str(a));
	}
	if (csv)
		printf("\n");
	free(list);
	return 0;
}
