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
 * chfs_sync also retries what is still owed (a member that was only unreachable).
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
		if (x->fileid == fileid && strcmp(x->addr, addr) == 0)
			return 0;
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
	struct debt *mine = NULL, **pp = &ow.head, *x;
	pthread_mutex_lock(&ow.lock);
	while ((x = *pp)) { /* taken out: delivered ones stay out */
		if (!addr || strcmp(x->addr, addr) == 0) {
			*pp = x->next;
			x->next = mine;
			mine = x;
		} else {
			pp = &x->next;
		}
	}
	pthread_mutex_unlock(&ow.lock);
	if (!mine)
		return;
	char *path = malloc(CHFS_PATH_MAX);
	uint8_t *msg = malloc(WIRE_HDR_LEN + 16 + CHFS_PATH_MAX), rep[WIRE_HDR_LEN + 16];
	struct debt *failed = NULL;
	while ((x = mine)) {
		mine = x->next;
		int rc = path && msg ? brelink_name(d, x->fileid, path, CHFS_PATH_MAX) : -ENOMEM;
		for (struct debt *f = failed; f && rc == 0; f = f->next)
			if (strcmp(f->addr, x->addr) == 0)
				rc = -EHOSTDOWN; /* not reached in this pass: one timeout per member */
		if (rc == 0) {
			struct wenc e;
			wenc_init(&e, msg, WIRE_HDR_LEN + 16 + CHFS_PATH_MAX);
			chfsd_req_hdr(d, &e, WOP_RELINK);
			wenc_u64(&e, x->fileid);
			wenc_str(&e, path);
			rc = chfsd_call(d, x->addr, &e, rep, sizeof rep, NULL, d->timeout_ms);
		}
		if (rc == 0 || rc == -ENOENT) { /* told; or the file is gone: nothing to tell */
			if (rc == 0)
				log_notice("backend name %s of file %016llx: told %s, which missed it", path,
				           (unsigned long long)x->fileid, x->addr);
			free(x);
			continue;
		}
		x->next = failed;
		failed = x;
	}
	free(path);
	free(msg);
	pthread_mutex_lock(&ow.lock);
	while ((x = failed)) {
		failed = x->next;
		x->next = ow.head;
		ow.head = x;
	}
	rewrite();
	pthread_mutex_unlock(&ow.lock);
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
