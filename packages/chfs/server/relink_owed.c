/*
 * relink_owed.c — the new backend names (WOP_RELINK, relink.c) a member did not get.
 *
 * When a rename reaches the backend while a member is down, that member still holds the file's
 * old backend name: its dirty chunks (STORAGE/bdirty maps survive a kill) and the writes it
 * serves after its restart would be flushed under the old name. So the server announcing the
 * rename keeps a debt per member it could not tell: in memory and appended to
 * STORAGE/bdirty/relink.owed (lines "fileid address"), so it survives that server's restart
 * too. A member starting again asks every other member for its debts (WOP_RELINK_OWED,
 * brelink_pull) before its flush threads begin (flush.c holds them until then); the debtor
 * sends the WOP_RELINKs, with the file's current backend name, before answering. Every
 * chfs_sync also retries what is still owed (a member that was only unreachable). A debt out
 * for delivery stays listed, and in the file, until the member has it: two deliveries at once
 * (a sync and a member's pull) each rewrite the file, and neither may drop what the other is
 * still sending.
 */
#define _GNU_SOURCE
#include "relink.h"

#include "chfsd.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct debt {
	uint64_t fileid;
	char addr[WIRE_ADDR_MAX];
	int sending; /* out for delivery: stays listed (and in the file) until told */
	int again;   /* owed anew while out: a delivery that succeeds keeps it */
	struct debt *next;
};

static struct {
	pthread_mutex_t lock;
	struct debt *head;
	int fd;
} ow = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static int add(uint64_t fileid, const char *addr)
{
	for (struct debt *x = ow.head; x; x = x->next)
		if (x->fileid == fileid && strcmp(x->addr, addr) == 0) {
			x->again = x->sending; /* the name being sent may be older than this rename */
			return 0;
		}
	struct debt *x = calloc(1, sizeof *x);
	if (!x || strlen(addr) >= sizeof x->addr) {
		free(x);
		return -ENOMEM;
	}
	x->fileid = fileid;
	strcpy(x->addr, addr);
	x->next = ow.head;
	ow.head = x;
	return 1;
}

/* The file: every debt, one line each (lock held). */
static void rewrite(void)
{
	int fd = ow.fd >= 0 && ftruncate(ow.fd, 0) == 0 ? dup(ow.fd) : -1;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f && fd >= 0)
		close(fd); /* (fdopen failed: the descriptor is still ours) */
	for (struct debt *x = ow.head; f && x; x = x->next)
		fprintf(f, "%016llx %s\n", (unsigned long long)x->fileid, x->addr);
	if (!f || fclose(f) != 0)
		log_err("backend names owed to other servers (relink.owed): not saved; lost if this server restarts");
}

int bowed_init(int bdirty_fd)
{
	ow.fd = openat(bdirty_fd, "relink.owed", O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ow.fd < 0)
		return -errno;
	int fd = dup(ow.fd);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	unsigned long long id;
	char addr[WIRE_ADDR_MAX];
	if (f && fseek(f, 0, SEEK_SET) == 0)
		while (fscanf(f, "%llx %255s", &id, addr) == 2)
			add(id, addr);
	if (f)
		fclose(f);
	else if (fd >= 0)
		close(fd);
	return 0;
}

void bowed_add(struct chfsd *d, const char *addr, uint64_t fileid)
{
	(void)d;
	pthread_mutex_lock(&ow.lock);
	int rc = add(fileid, addr);
	if (rc > 0 && dprintf(ow.fd, "%016llx %s\n", (unsigned long long)fileid, addr) < 0)
		rc = -errno;
	pthread_mutex_unlock(&ow.lock);
	if (rc < 0)
		log_err("backend name of file %016llx owed to %s: not saved (%s); it may flush the file under its old "
		        "name",
		        (unsigned long long)fileid, addr, strerror(-rc));
}

void brelink_deliver(struct chfsd *d, const char *addr)
{
	/* Debts out for delivery stay in the list, so a rewrite of the file by a concurrent
	 * delivery keeps them (a crash then loses nothing); another delivery skips them. The
	 * flags change under the lock only; this delivery's outcomes are its own array. */
	size_t n = 0, i;
	pthread_mutex_lock(&ow.lock);
	for (struct debt *x = ow.head; x; x = x->next)
		n += !x->sending && (!addr || strcmp(x->addr, addr) == 0);
	struct debt **v = n ? malloc(n * sizeof *v) : NULL;
	int *rcs = n ? malloc(n * sizeof *rcs) : NULL;
	n = v && rcs ? n : 0;
	i = 0;
	for (struct debt *x = ow.head; x && i < n; x = x->next)
		if (!x->sending && (!addr || strcmp(x->addr, addr) == 0)) {
			x->sending = 1;
			v[i++] = x;
		}
	pthread_mutex_unlock(&ow.lock);
	char *path = n ? malloc(CHFS_PATH_MAX) : NULL;
	uint8_t *msg = n ? malloc(WIRE_HDR_LEN + 16 + CHFS_PATH_MAX) : NULL, rep[WIRE_HDR_LEN + 16];
	for (i = 0; i < n; i++) { /* (a debt's fileid and addr never change: read unlocked) */
		int rc = path && msg ? brelink_name(d, v[i]->fileid, path, CHFS_PATH_MAX) : -ENOMEM;
		for (size_t j = 0; j < i && rc == 0; j++)
			if (rcs[j] && rcs[j] != -ENOENT && strcmp(v[j]->addr, v[i]->addr) == 0)
				rc = -EHOSTDOWN; /* not reached in this pass: one timeout per member */
		if (rc == 0) {
			struct wenc e;
			wenc_init(&e, msg, WIRE_HDR_LEN + 16 + CHFS_PATH_MAX);
			chfsd_req_hdr(d, &e, WOP_RELINK);
			wenc_u64(&e, v[i]->fileid);
			wenc_str(&e, path);
			rc = chfsd_call(d, v[i]->addr, &e, rep, sizeof rep, NULL, d->timeout_ms);
			if (rc == 0)
				log_notice("backend name %s of file %016llx: told %s, which missed it", path,
				           (unsigned long long)v[i]->fileid, v[i]->addr);
		}
		rcs[i] = rc; /* 0 told, -ENOENT the file is gone (nothing to tell): settled */
	}
	free(path);
	free(msg);
	pthread_mutex_lock(&ow.lock);
	for (i = 0; i < n; i++) {
		struct debt *x = v[i];
		int keep = (rcs[i] && rcs[i] != -ENOENT) || x->again; /* failed, or owed anew */
		x->sending = x->again = 0;
		for (struct debt **pp = &ow.head; !keep && *pp; pp = &(*pp)->next)
			if (*pp == x) {
				*pp = x->next;
				free(x);
				break;
			}
	}
	if (n)
		rewrite();
	pthread_mutex_unlock(&ow.lock);
	free(v);
	free(rcs);
}

static void not_asked(struct chfsd *d, const char *addr, int rc, void *arg)
{
	(void)d;
	(void)arg;
	if (rc != -EHOSTDOWN) /* (one found down asks us when it starts again) */
		log_warn("backend names: %s not asked for renames this server missed (%s)", addr,
		         strerror(-rc));
}

void brelink_pull(struct chfsd *d)
{
	if (!d->bk)
		return;
	uint8_t msg[WIRE_HDR_LEN + WIRE_ADDR_MAX + 8];
	struct wenc e;
	wenc_init(&e, msg, sizeof msg);
	chfsd_req_hdr(d, &e, WOP_RELINK_OWED);
	wenc_str(&e, d->self);
	if (chfsd_call_peers(d, &e, not_asked, NULL) != 0)
		log_err("backend names: out of memory; the other servers are not asked");
}
