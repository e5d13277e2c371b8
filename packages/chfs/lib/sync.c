/*
 * sync.c — the backend half of chfs_sync: every server flushes what was written to it to the
 * backend directory (chfsd -b) before answering WOP_FLUSH, all servers concurrently. A server
 * Two rounds: every server flushes its data (phase 1), then every server applies the changes
 * of names and attributes it recorded (phase 2: a rename moves the file the data went to). A
 * server answers with the paths it could not flush (ENOSPC, EACCES, ...): their data stay in CHFS and
 * are named here, one log line each, and the call fails with EIO. A pool without a backend
 * answers at once with nothing to report.
 *
 * Phase 2 is asked again while fewer changes fail each time (up to META_ROUNDS): the servers
 * apply concurrently, and one server's change may wait for another's — an rmdir of a renamed
 * or emptied directory (lib/dir_rename.c) fails ENOTEMPTY on the backend until the servers
 * owning its entries' new names moved them out, which one round later they have. A change that
 * fails for good stops the rounds at once (no fewer failures).
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FLUSH_REPLY (WIRE_HDR_LEN + WIRE_READDIR_MAX + 1024)

#define META_ROUNDS 16

/* The failed paths of one server's reply (logged if `say`); their number. */
static unsigned report(const uint8_t *rep, size_t len, const char *addr, int say)
{
	struct wdec d;
	wdec_init(&d, rep + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
	uint32_t n = wdec_u32(&d);
	char *line = malloc(CHFS_PATH_MAX + 64);
	for (uint32_t i = 0; line && i < n && !d.err; i++) {
		wdec_str(&d, line, CHFS_PATH_MAX + 64);
		if (!d.err && say)
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
	struct rpc_fanout f;
	uint8_t msg[WIRE_HDR_LEN + 4];
	unsigned failed = 0, before = 0;
	rc = rpc_fanout_init(&f, s, FLUSH_REPLY);
	for (uint32_t phase = 1, round = 1; f.idx && phase <= 2 && (phase == 1 || rc == 0); round++) {
		struct wenc e;
		wenc_init(&e, msg, sizeof msg);
		wenc_reserve(&e, WIRE_HDR_LEN);
		wenc_u32(&e, phase);
		rc = rpc_fanout_call(s, &f, msg, e.len, WOP_FLUSH);
		unsigned now = 0;
		for (unsigned i = 0; i < f.n; i++)
			if (f.rcs[i] == 0 && f.rl[i] >= WIRE_HDR_LEN + 4)
				now += report(f.reps + (size_t)i * FLUSH_REPLY, f.rl[i], s->addrs[i], 0);
		if (phase == 2 && rc == 0 && now && (round == 2 || now < before) && round <= META_ROUNDS) {
			before = now; /* changes waiting for another server's: ask again */
			continue;
		}
		for (unsigned i = 0; i < f.n; i++)
			if (f.rcs[i] == 0 && f.rl[i] >= WIRE_HDR_LEN + 4)
				failed += report(f.reps + (size_t)i * FLUSH_REPLY, f.rl[i], s->addrs[i], 1);
		phase++;
	}
	rpc_fanout_free(&f);
	return rc ? rc : failed ? -EIO : 0;
}

int chfs_sync_backend(void)
{
	int rc = fd_sync_sizes(0);
	if (rc == 0)
		rc = client_flush_backend();
	return set_err(rc);
}
