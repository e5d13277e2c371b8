/*
 * bulk_io.c — pipelined RMA <-> backing-file transfers (see bulk_io.h).
 *
 * Piece size: 4 MiB with the synchronous engine (as before); 1 MiB (the transport's RMA chunk)
 * with an asynchronous one: smaller pieces cost more in RMA operations than their overlap gains
 * (measured: 256 KiB pieces halved the 1 MiB rate). $CHFS_IO_PIECE overrides it (experiments:
 * 4 KiB … 4 MiB). At most one file operation per thread is in flight beside
 * its RMA, and it is always collected before the function returns, also on errors. The first
 * piece of a read, waited for at once, is read on this thread (ioe_run): no hand-off to an
 * io-wq worker and back. The last piece of a write — the only one of a transfer up to 1 MiB —
 * is written by pwrite(2) on this thread (ioe_run_here): with nothing after it to overlap,
 * io_uring only adds the hand-off to an io-wq worker (which inline submission does not avoid
 * for every ext4 buffered write: `perf` shows iou-wrk threads copying with
 * CHFS_IO_URING_ASYNC=0 too). Measured on an idle 2-vCPU VM, uring / sync engine, 2 ranks:
 * 64 KiB and 1 MiB writes 0.61–0.77 before, 0.93–1.03 with it; 16 MiB unchanged (0.78–0.88). (Done
 * through ioe_run — io_uring inline — it had measured 0.6–1.0× on a loaded machine.)
 *
 * Reads of at least MAP_MIN bytes skip the piece buffer: the backing file's pages are mapped
 * and pushed to the client from the page cache, one copy per byte instead of two (pread into a
 * buffer, then the RMA; 1 MiB reads 1.3–1.8× over libfabric, 1.7–3.5× locally). A page of the
 * mapping beyond the file's end faults: in a system call's copy (the node-local transport's
 * process_vm_writev, tcp's sendmsg) that is EFAULT, but a provider may memcpy (shm without
 * CMA, small transfers), where it is SIGBUS and chfsd dies. So a mapping is used only where
 * the file cannot shrink under it (the caller holds the data store's shrink gate: pinned) or
 * the transport copies in the kernel (xprt_rma_by_kernel, whose failed copy also sends the rest
 * the old way). A mapping that a failed RMA may still read (tcp sends from it later) is not
 * unmapped: anonymous zero pages replace it in place, which lets the file go, and stay — as a
 * retired piece buffer stays.
 */
#define _GNU_SOURCE
#include "bulk_io.h"

#include "io_engine.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIECE_MAX ((size_t)4 << 20)
#define PIECE_ASYNC ((size_t)1 << 20)
#define MAP_MIN ((uint64_t)64 << 10)

static __thread uint8_t *bufs[2];

static size_t piece_size(void)
{
	/* 0: not read yet; racing first readers compute and store the same value (atomic: a plain
	 * static here was a data race ThreadSanitizer reported) */
	static _Atomic size_t env_piece;
	if (!ioe_async())
		return PIECE_MAX;
	size_t p = atomic_load_explicit(&env_piece, memory_order_relaxed);
	if (!p) {
		const char *e = getenv("CHFS_IO_PIECE");
		size_t v = e ? (size_t)strtoull(e, NULL, 0) : 0;
		p = v >= 4096 && v <= PIECE_MAX ? v : PIECE_ASYNC;
		atomic_store_explicit(&env_piece, p, memory_order_relaxed);
	}
	return p;
}

static int buffers(void)
{
	for (int i = 0; i < 2; i++)
		if (!bufs[i] && !(bufs[i] = malloc(PIECE_MAX)))
			return -ENOMEM;
	return 0;
}

/* A failed RMA may still touch bufs[i]: the transport frees it when it cannot any more. */
static void retire(xprt_req_t *r, int i)
{
	xprt_rma_retire(r, bufs[i]);
	bufs[i] = NULL;
}

int bulk_write_seg(xprt_req_t *r, const struct xprt_rma_desc *rd, uint64_t bufoff, int fd, uint64_t off,
                   uint64_t len)
{
	int rc = buffers(), pending = 0, cur = 0;
	const size_t piece = piece_size();
	struct ioe_op op;
	for (uint64_t k = 0; k < len && rc == 0; cur ^= 1) {
		size_t p = len - k > piece ? piece : (size_t)(len - k);
		rc = xprt_rma_read(r, rd, bufoff + k, bufs[cur], p); /* while piece k-1 is written */
		if (rc < 0) {
			retire(r, cur);
			break;
		}
		if (pending) {
			pending = 0;
			if ((rc = (int)ioe_end(&op)) < 0)
				break;
		}
		op = (struct ioe_op){.fd = fd, .write = 1, .buf = bufs[cur], .n = p, .off = off + k};
		if (k + p == len)
			ioe_run_here(&op); /* the last piece: nothing left to overlap it with */
		else
			ioe_begin(&op);
		pending = 1;
		k += p;
	}
	if (pending) {
		int e = (int)ioe_end(&op);
		if (rc == 0)
			rc = e;
	}
	return rc;
}

/* Reads through the piece buffers (see the top). */
static int copy_read(xprt_req_t *r, const struct xprt_rma_desc *rd, uint64_t bufoff, int fd, uint64_t off,
                     uint64_t len, uint64_t *got)
{
	const size_t piece = piece_size();
	struct ioe_op op[2];
	int rc = buffers(), cur = 0;
	*got = 0;
	if (rc < 0 || len == 0)
		return rc;
	op[0] = (struct ioe_op){.fd = fd, .buf = bufs[0], .n = len > piece ? piece : (size_t)len, .off = off};
	ioe_run(&op[0]); /* waited for at once below */
	for (uint64_t k = 0;; cur ^= 1) {
		ssize_t n = ioe_end(&op[cur]);
		if (n < 0)
			return (int)n;
		uint64_t next = k + op[cur].n;
		int more = (size_t)n == op[cur].n && next < len;
		if (more) { /* read piece k+1 while piece k goes to the client */
			size_t p = len - next > piece ? piece : (size_t)(len - next);
			op[cur ^ 1] =
			        (struct ioe_op){.fd = fd, .buf = bufs[cur ^ 1], .n = p, .off = off + next};
			ioe_begin(&op[cur ^ 1]);
		}
		if (n > 0 && (rc = xprt_rma_write(r, rd, bufoff + k, bufs[cur], (size_t)n)) < 0) {
			retire(r, cur);
			if (more)
				ioe_end(&op[cur ^ 1]);
			return rc;
		}
		*got += (uint64_t)n;
		if (!more)
			return 0;
		k = next;
	}
}

/* n bytes of fd at off, all before its end, pushed from a mapping of the file: 1 done, 0 not
 * mappable (read them the old way), or -errno from the RMA. The kernel's copy (by_kernel) has
 * ended when the RMA returns; a provider's may go on after a failure. */
static int mapped_piece(xprt_req_t *r, const struct xprt_rma_desc *rd, uint64_t bufoff, int fd, uint64_t off,
                        size_t n, int by_kernel)
{
	const uint64_t moff = off & ~((uint64_t)sysconf(_SC_PAGESIZE) - 1);
	const size_t mlen = n + (size_t)(off - moff);
	uint8_t *m = mmap(NULL, mlen, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)moff);
	if (m == MAP_FAILED)
		return 0;
	int rc = xprt_rma_write(r, rd, bufoff, m + (off - moff), n);
	if (rc == 0 || by_kernel)
		munmap(m, mlen);
	else /* zero pages in place, for whatever may still read there: the file is let go */
		(void)mmap(m, mlen, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return rc == 0 ? 1 : by_kernel ? 0 : rc;
}

int bulk_read_seg(xprt_req_t *r, const struct xprt_rma_desc *rd, uint64_t bufoff, int fd, uint64_t off,
                  uint64_t len, int pinned, uint64_t *got)
{
	struct stat st;
	const int by_kernel = xprt_rma_by_kernel(r);
	*got = 0;
	if (len < MAP_MIN || !(pinned || by_kernel) || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return copy_read(r, rd, bufoff, fd, off, len, got);
	const uint64_t size = (uint64_t)st.st_size;
	const uint64_t avail = size <= off ? 0 : size - off < len ? size - off : len;
	for (uint64_t k = 0; k < avail;) {
		size_t p = avail - k > PIECE_MAX ? PIECE_MAX : (size_t)(avail - k);
		int rc = mapped_piece(r, rd, bufoff + k, fd, off + k, p, by_kernel);
		if (rc < 0)
			return rc;
		if (rc == 0) { /* not mappable, or the kernel's copy failed (the file shrank) */
			rc = copy_read(r, rd, bufoff + k, fd, off + k, len - k, got);
			*got += k;
			return rc;
		}
		k += p;
	}
	*got = avail;
	return 0;
}
