/*
 * sync.c — the backend half of chfs_sync: every server flushes what was written to it to the
 * backend directory (chfsd -b) before answering WOP_FLUSH, all servers concurrently. A server
 * Two rounds: every server flushes its data (phase 1), then every server applies the changes
 * of names and attributes it recorded (phase 2: a rename moves the file the data went to). A
 * server answers with the paths it could not flush (ENOSPC, EACCES, ...): their data stay in CHFS and
 * are named here, one log line each, and the call fails with EIO. A pool without a backend
 * answers at once with nothing to report.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FLUSH_REPLY (WIRE_HDR_LEN + WIRE_READDIR_MAX + 1024)

/* Report the failed paths of one server's reply; their number. */
static unsigned report(const uint8_t *rep, size_t len, const char *addr)
{
	struct wdec d;
	wdec_init(&d, rep + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
	uint32_t n = wdec_u32(&d);
	char *line = malloc(CHFS_PATH_MAX + 64);
	for (uint32_t i = 0; line && i < n && !d.err; i++) {
		wdec_str(&d, line, CHFS_PATH_MAX + 64);
		if (!d.err)
			log_err("chfs_sync: not on the backend (kept in CHFS, server %s): %s", addr, line);
	}
	free(line);
	return d.err ? 1 : n;
}

int client_flush_backend(void)
{
	struct srvlist *s;
	int rc = client_begin(&s);
	if (rc)
		return rc;
	unsigned *idx = malloc(s->n * sizeof *idx);
	uint8_t *reps = malloc((size_t)s->n * FLUSH_REPLY);
	size_t *rl = malloc(s->n * sizeof *rl);
	int *rcs = malloc(s->n * sizeof *rcs);
	uint8_t msg[WIRE_HDR_LEN + 4];
	unsigned failed = 0;
	rc = -ENOMEM;
	for (uint32_t phase = 1; idx && reps && rl && rcs && phase <= 2 && (phase == 1 || rc == 0); phase++) {
		struct wenc e;
		wenc_init(&e, msg, sizeof msg);
		wenc_reserve(&e, WIRE_HDR_LEN);
		wenc_u32(&e, phase);
		for (unsigned i = 0; i < s->n; i++)
			idx[i] = i;
		rc = rpc_multi(s, idx, s->n, msg, e.len, WOP_FLUSH, reps, FLUSH_REPLY, rl, rcs);
		for (unsigned i = 0; i < s->n; i++)
			if (rcs[i] == 0 && rl[i] >= WIRE_HDR_LEN + 4)
				failed += report(reps + (size_t)i * FLUSH_REPLY, rl[i], s->addrs[i]);
	}
	free(idx);
	free(reps);
	free(rl);
	free(rcs);
	return rc ? rc : failed ? -EIO : 0;
}

int chfs_sync_backend(void)
{
	int rc = fd_sync_sizes(0);
	if (rc == 0)
		rc = client_flush_backend();
	return set_err(rc);
}
