/*
 * orphan.c — files that outlive their name: a regular file unlinked (or renamed over) while
 * this process has it open stays readable and writable through its descriptors until the last
 * of them is closed, with fstat's st_nlink 0, as on a local file system.
 *
 * Design (client-held orphans). A file's data are keyed by its file id on the data servers,
 * its size and times live in the record at the owner of its name. Removing the name removes
 * the record; chfs_unlink and chfs_rename then remove the data (DATA_REMOVE to every server)
 * unless orphan_hold() finds descriptors of that file id open in this process: those become
 * orphans (f->orphan), keep the removed record's size and times in f->md, and answer size,
 * fstat and truncate from it without asking any owner. The data go when the last orphan
 * descriptor of the file id is closed (chfs_close, or chfs_term at process exit). Every access
 * path is covered by this: chfuse is one libchfs process for every program on its mount, and a
 * hooked process holds its own descriptors.
 *
 * A client killed while holding an orphan cannot remove the data: each orphan is leased at a
 * server (orphan_lease.c, server/orphans.c), which removes the data once the process stops
 * renewing the lease (60 s by default).
 *
 * Other processes' descriptors (another hooked program, another node or chfuse mount) keep
 * the data through their open leases (open_lease.c, server/open_leases.c): the owner answers
 * the unlink or rename with MD_HELD and removes the data itself after their last close; this
 * process's own descriptors of such a file become ORPHAN_LEASED orphans (no removal at their
 * close: their lease is dropped instead), and so do another process's descriptors once they
 * find the name gone (orphan_mark_leased).
 *
 * Bounds, said plainly: a forked child's copies never remove the data (the process that made
 * the orphan does), so a child closing inherited descriptors cannot destroy a file its parent
 * still uses; and they hold no lease, so once the parent closed its own, another process's
 * unlink removes the data under the child.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <unistd.h>

struct hold {
	const struct chfs_md *md;
	int n;
};

/* f->lock held: f is an orphan of `who` from now on. */
static void become_orphan(struct chfs_file *f, pid_t who)
{
	if (!f->orphan)
		f->orphan = who;
	if (f->dirty) { /* no name to report a size to any more: the descriptor keeps it */
		f->dirty = 0;
		atomic_fetch_sub(&chfs_client.dirty_fds, 1);
	}
	if (f->written_end > f->md.size)
		f->md.size = f->written_end;
}

static void hold_one(struct chfs_file *f, void *arg)
{
	struct hold *h = arg;
	pthread_mutex_lock(&f->lock);
	if (!f->orphan) {
		uint64_t size = f->md.size > h->md->size ? f->md.size : h->md->size;
		f->md = *h->md;
		f->md.flags &= ~(uint32_t)MD_HELD;
		f->md.size = size;
	}
	become_orphan(f, h->md->flags & MD_HELD ? ORPHAN_LEASED : getpid());
	pthread_mutex_unlock(&f->lock);
	h->n++;
}

void orphan_mark_leased(struct chfs_file *f)
{
	pthread_mutex_lock(&f->lock);
	become_orphan(f, ORPHAN_LEASED);
	pthread_mutex_unlock(&f->lock);
}

int orphan_hold(const struct chfs_md *removed)
{
	if (!S_ISREG(removed->mode) || !removed->fileid)
		return 0;
	struct hold h = {removed, 0};
	fd_foreach_fileid(removed->fileid, hold_one, &h);
	if (removed->flags & MD_HELD)
		return 1; /* other processes hold it open: the owner keeps the data for all */
	struct srvlist *s;
	if (h.n && client_begin(&s) == 0)
		orphan_lease_hold(s, removed); /* if this process dies, a server removes the data */
	return h.n;
}

/* The size is the largest any descriptor of the file knows (chfuse writes through one and
 * answers stat through another). */
static void grow(struct chfs_file *f, void *arg)
{
	struct chfs_md *md = arg;
	io_flush(f);
	pthread_mutex_lock(&f->lock);
	if (f->orphan && f->md.size > md->size)
		md->size = f->md.size;
	if (f->orphan && f->written_end > md->size)
		md->size = f->written_end;
	pthread_mutex_unlock(&f->lock);
}

void orphan_size(struct chfs_file *f, struct chfs_md *md)
{
	pthread_mutex_lock(&f->lock);
	*md = f->md;
	pthread_mutex_unlock(&f->lock);
	fd_foreach_fileid(md->fileid, grow, md);
}

static void count_open(struct chfs_file *f, void *arg) { ++*(int *)arg; }

void orphan_release(struct chfs_file *f)
{
	if (f->orphan != getpid())
		return;
	int others = 0; /* f is out of the table already: count the descriptors still open */
	fd_foreach_fileid(f->md.fileid, count_open, &others);
	struct srvlist *s;
	if (others == 0 && client_begin(&s) == 0) {
		int rc = data_remove_all(s, &f->md); /* best effort, as chfs_unlink's */
		orphan_lease_drop(s, f->md.fileid, rc == 0);
	}
}

int orphan_truncate(struct srvlist *s, struct chfs_file *f, off_t len)
{
	if (len < 0)
		return -EINVAL;
	if ((uint64_t)len > WIRE_MAX_OFFSET)
		return -EFBIG;
	int rc = data_truncate_all(s, &f->md, (uint64_t)len, UINT64_MAX);
	if (rc == 0) {
		uint64_t l = (uint64_t)len;
		fd_foreach_fileid(f->md.fileid, fd_clamp_size, &l);
	}
	return rc;
}

struct term_ctx {
	uint64_t *ids;
	int n, cap;
};

static void note_orphan(struct chfs_file *f, void *arg)
{
	struct term_ctx *t = arg;
	if (f->orphan != getpid())
		return;
	for (int i = 0; i < t->n; i++)
		if (t->ids[i] == f->md.fileid)
			return;
	if (t->n < t->cap) /* past it a file id may be removed twice: harmless */
		t->ids[t->n++] = f->md.fileid;
	struct srvlist *s;
	if (client_begin(&s) == 0) {
		int rc = data_remove_all(s, &f->md);
		orphan_lease_drop(s, f->md.fileid, rc == 0);
	}
}

void orphan_term(void)
{
	struct term_ctx t = {.cap = 256};
	if (!(t.ids = malloc((size_t)t.cap * sizeof *t.ids)))
		t.cap = 0;
	fd_foreach_fileid(0, note_orphan, &t);
	free(t.ids);
	orphan_lease_stop();
}
