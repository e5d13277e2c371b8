/*
 * bulk_io.c — pipelined RMA <-> backing-file transfers (see bulk_io.h).
 *
 * Piece size: 4 MiB with the synchronous engine (as before); 1 MiB (the transport's RMA chunk)
 * with an asynchronous one: smaller pieces cost more in RMA operations than their overlap gains
 * (measured: 256 KiB pieces halved the 1 MiB rate). $CHFS_IO_PIECE overrides it (experiments:
 * 4 KiB … 4 MiB). At most one file operation per thread is in flight beside
 * its RMA, and it is always collected before the function returns, also on errors.
 */
#define _GNU_SOURCE
#include "bulk_io.h"

#include "io_engine.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#define PIECE_MAX ((size_t)4 << 20)
#define PIECE_ASYNC ((size_t)1 << 20)

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

int bulk_read_seg(xprt_req_t *r, const struct xprt_rma_desc *rd, uint64_t bufoff, int fd, uint64_t off,
                  uint64_t len, uint64_t *got)
{
	const size_t piece = piece_size();
	struct ioe_op op[2];
	int rc = buffers(), cur = 0;
	*got = 0;
	if (rc < 0 || len == 0)
		return rc;
	op[0] = (struct ioe_op){.fd = fd, .buf = bufs[0], .n = len > piece ? piece : (size_t)len, .off = off};
	ioe_begin(&op[0]);
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
