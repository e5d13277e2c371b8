/*
 * chlist — list the servers of a CHFS pool in pool order, asking one server (-s, or the first
 * answering CHFS_SERVER entry). Talks the wire protocol directly (it is an admin tool), so it
 * also works while a pool is half up. -c prints one comma-separated line for CHFS_SERVER; -o
 * prints which server owns a path's namespace entry (the same ring libchfs builds).
 */
#define _GNU_SOURCE
#include "config.h"
#include "log.h"
#include "nodelist.h"
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
	fprintf(f, "usage: chlist [-c | -S] [-n N] [-o PATH] [-s SERVER] [-t MSEC]\n"
	           "List the servers of the CHFS pool (address and server id per line, then \"down\" if\n"
	           "the answering server's failure detector finds it down).\n"
	           "  -c        one comma-separated line of addresses (for CHFS_SERVER)\n"
	           "  -o PATH   print the address of the server holding PATH's namespace entry\n"
	           "  -S        ask every server for its status, one \"ADDR key=value ...\" line each: id,\n"
	           "            epoch, ring epoch, rebalance=idle|active and what it moved (entries/\n"
	           "            chunks/bytes in and out), dirty_files/dirty_bytes not yet flushed to the\n"
	           "            backend, flush_failed, stored_files/stored_bytes (data on its disk),\n"
	           "            requests served, orphans/orphan_bytes (unlinked files clients hold\n"
	           "            open, leased at this server); then \"ADDR flush-failed PATH: ERROR\" per\n"
	           "            file whose flush to the backend failed; exit 1 if any server is down\n"
	           "  -n N      at most N servers\n"
	           "  -s ADDR   ask this server (default: CHFS_SERVER entries in turn)\n"
	           "  -t MSEC   timeout (default 5000)\n");
}

static int ask(const char *addr, int timeout, const uint8_t *secret, struct nodelist *l)
{
	char proto[16];
	const char *sep = strstr(addr, "://");
	if (!sep || (size_t)(sep - addr) >= sizeof proto)
		return -EINVAL;
	memcpy(proto, addr, (size_t)(sep - addr));
	proto[sep - addr] = '\0';
	struct xprt_opts o = {.proto = proto};
	xprt_t *x;
	int rc = xprt_open(&o, &x);
	if (rc)
		return rc;
	rc = nodelist_fetch(x, addr, secret, timeout, NULL, NULL, l);
	xprt_close(x);
	return rc;
}

/* One request without a body to addr (op), its reply body into a decoder over rep. */
static int call_plain(xprt_t *x, const char *addr, unsigned op, const uint8_t *secret, int timeout,
                      uint8_t *rep, size_t cap, struct wdec *d)
{
	uint8_t req[WIRE_HDR_LEN];
	struct wire_hdr h = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .op = (uint16_t)op};
	memcpy(h.secret, secret, CHFS_SECRET_LEN);
	wire_hdr_put(req, &h);
	xprt_peer_t *p;
	size_t rl = 0;
	int rc = xprt_connect(x, addr, &p);
	if (rc == 0)
		rc = xprt_call(x, p, req, sizeof req, rep, cap, &rl, timeout);
	if (rc == 0 && (wire_hdr_get(rep, rl, &h) || h.status))
		rc = -EIO;
	if (rc == 0)
		wdec_init(d, rep + WIRE_HDR_LEN, rl - WIRE_HDR_LEN);
	return rc;
}

/* "ADDR flush-failed PATH: ERROR" for each file of addr whose backend flush failed. */
static int print_flush_errors(xprt_t *x, const char *addr, const uint8_t *secret, int timeout)
{
	size_t cap = WIRE_HDR_LEN + WIRE_READDIR_MAX + 64;
	uint8_t *rep = malloc(cap);
	char *line = malloc(CHFS_PATH_MAX + 64);
	struct wdec d;
	int rc = rep && line ? call_plain(x, addr, WOP_FLUSH_ERRORS, secret, timeout, rep, cap, &d) : -ENOMEM;
	uint32_t n = rc ? 0 : wdec_u32(&d);
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		wdec_str(&d, line, CHFS_PATH_MAX + 64);
		if (d.err)
			rc = -EIO;
		else
			printf("%s flush-failed %s\n", addr, line);
	}
	if (rc == 0 && wdec_finish(&d))
		rc = -EIO;
	free(line);
	free(rep);
	return rc;
}

/* Ask each member for its status line (WOP_STATUS): "ADDR key=value ..." or "ADDR down", then
 * the files whose flush failed (WOP_FLUSH_ERRORS). Returns how many did not answer. */
static int print_status(const struct nodelist *l, int timeout, const uint8_t *secret)
{
	int n = wire_list_parse(l->list, l->len, NULL, WIRE_LIST_MAX), bad = 0;
	struct wire_member *m = n > 0 ? calloc((size_t)n, sizeof *m) : NULL;
	if (!m || wire_list_parse(l->list, l->len, m, (unsigned)n) != n) {
		free(m);
		return 1;
	}
	char proto[16];
	const char *sep = strstr(m[0].addr, "://");
	snprintf(proto, sizeof proto, "%.*s", sep ? (int)(sep - m[0].addr) : 3, m[0].addr);
	struct xprt_opts o = {.proto = proto};
	xprt_t *x;
	if (xprt_open(&o, &x)) {
		free(m);
		return n;
	}
	for (int i = 0; i < n; i++) {
		uint8_t rep[WIRE_HDR_LEN + 1100];
		char line[1100] = "";
		struct wdec d;
		int rc = call_plain(x, m[i].addr, WOP_STATUS, secret, timeout, rep, sizeof rep, &d);
		if (rc == 0) {
			wdec_str(&d, line, sizeof line);
			if (wdec_finish(&d))
				rc = -EIO;
		}
		if (rc) {
			printf("%s down\n", m[i].addr);
			bad++;
			continue;
		}
		printf("%s %s\n", m[i].addr, line);
		if (strstr(line, " flush_failed=0") == NULL &&
		    print_flush_errors(x, m[i].addr, secret, timeout))
			printf("%s flush-failed (the list did not arrive)\n", m[i].addr);
	}
	xprt_close(x);
	free(m);
	return bad;
}

/* Print the owner of canonical(path) on the pool's ring. */
static int print_owner(const struct nodelist *l, const char *path)
{
	char cp[CHFS_PATH_MAX];
	int n = wire_list_parse(l->list, l->len, NULL, WIRE_LIST_MAX);
	struct wire_member *m = n > 0 ? calloc((size_t)n, sizeof *m) : NULL;
	const char **ids = n > 0 ? calloc((size_t)n, sizeof *ids) : NULL;
	struct ring *r = NULL;
	int rc = m && ids ? 0 : -ENOMEM;
	if (rc == 0 && wire_list_parse(l->list, l->len, m, (unsigned)n) != n)
		rc = -EIO;
	for (int i = 0; rc == 0 && i < n; i++)
		ids[i] = m[i].id;
	if (rc == 0)
		rc = path_canonical(path, cp);
	if (rc == 0)
		rc = ring_build(ids, (unsigned)n, l->vnodes, &r);
	if (rc == 0) {
		printf("%s\n", m[placement_owner(r, cp)].addr);
		ring_free(r);
	} else {
		fprintf(stderr, "chlist: %s: %s\n", path, strerror(-rc));
	}
	free(ids);
	free(m);
	return rc;
}

int main(int argc, char **argv)
{
	int csv = 0, max = -1, timeout = 5000, status = 0, c;
	const char *server = NULL, *opath = NULL;
	static const struct option lo[] = {{"help", no_argument, NULL, 'h'}, {0}};
	chfs_log_set_prog("chlist");
	while ((c = getopt_long(argc, argv, "cn:o:Ss:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 'c': csv = 1; break;
		case 'n': max = atoi(optarg); break;
		case 'o': opath = optarg; break;
		case 'S': status = 1; break;
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
	char cand[4096];
	struct nodelist l = {0};
	snprintf(cand, sizeof cand, "%s", server ? server : cfg.server);
	if (!cand[0]) {
		fprintf(stderr, "chlist: no server: set CHFS_SERVER or use -s\n");
		return 2;
	}
	rc = -ENOTCONN;
	for (char *sv, *a = strtok_r(cand, ",", &sv); a && rc; a = strtok_r(NULL, ",", &sv))
		rc = ask(a, timeout, secret, &l);
	if (rc) {
		fprintf(stderr, "chlist: no server answered: %s\n",
		        rc == -EACCES ? "wrong or missing pool secret" : strerror(-rc));
		return 1;
	}
	if (status) {
		rc = print_status(&l, timeout, secret);
		nodelist_free(&l);
		return rc ? 1 : 0;
	}
	if (opath) {
		rc = print_owner(&l, opath);
		nodelist_free(&l);
		return rc ? 1 : 0;
	}
	int i = 0;
	for (char *sv, *e = strtok_r(l.list, ",", &sv); e && (max < 0 || i < max);
	     e = strtok_r(NULL, ",", &sv), i++) {
		const char *a = e + WIRE_ID_LEN + 1;
		e[WIRE_ID_LEN] = '\0';
		if (csv)
			printf("%s%s", i ? "," : "", a);
		else
			printf("%s %s%s\n", a, e, wire_id_in(e, l.down, l.ndown) ? " down" : "");
	}
	if (csv)
		printf("\n");
	nodelist_free(&l);
	return 0;
}
