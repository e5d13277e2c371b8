/*
 * io_engine.h — how chfsd's storage moves bytes to and from its files: "sync" (pread/pwrite on
 * the calling thread, the engine chfsd always had) or "uring" (libasyncsys: io_uring, or its
 * execution threads where io_uring is unavailable). One engine per process, chosen at start-up
 * (chfsd --io=uring|sync, else $CHFS_IO_ENGINE, else uring). Until ioe_start() runs — the
 * storage unit tests — every call is synchronous.
 *
 * A started operation (ioe_begin) runs while its caller does something else, e.g. receives the
 * next piece of a transfer (bulk_io.h); ioe_end waits for it. With "sync", ioe_begin does the
 * work itself. Requests placed by several threads go to the kernel in one submit: whatever is
 * queued when a thread starts or waits is submitted, nothing waits for more to arrive.
 * All calls return 0 / a byte count or -errno.
 */
#ifndef CHFSD_IO_ENGINE_H
#define CHFSD_IO_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* mode: "uring", "sync" or NULL ($CHFS_IO_ENGINE, default uring). -EINVAL for another name.
 * io_uring being unavailable is not an error (libasyncsys falls back and says so once). */
int ioe_start(const char *mode);
void ioe_stop(void);
/* "sync", "uring" or "uring (execution threads)", for the log. */
const char *ioe_describe(void);
/* 1 when operations run asynchronously (ioe_begin returns before the I/O is done). */
int ioe_async(void);

/* Whole-buffer I/O, waiting: ioe_pwrite writes all n bytes (0 or -errno); ioe_pread returns the
 * bytes read before end of file (< n only at EOF) or -errno. */
int ioe_pwrite(int fd, const void *buf, size_t n, uint64_t off);
ssize_t ioe_pread(int fd, void *buf, size_t n, uint64_t off);

/* One started operation: fill fd/buf/n/off/write, ioe_begin, ..., ioe_end (exactly once). */
struct ioe_op {
	int fd;
	int write; /* 1 = pwrite, 0 = pread */
	void *buf;
	size_t n;
	uint64_t off;
	int slot;    /* internal: libasyncsys slot, or -1 (done synchronously) */
	ssize_t res; /* internal: result when done synchronously */
};
void ioe_begin(struct ioe_op *op);
/* Does op now, on the calling thread, as ioe_pwrite / ioe_pread do (no hand-off to a kernel
 * worker): for a piece its caller would wait for at once, with nothing to overlap. */
void ioe_run(struct ioe_op *op);
/* Does op now with pread/pwrite on the calling thread, bypassing io_uring (whose buffered
 * writes the kernel may still hand to an io-wq worker). */
void ioe_run_here(struct ioe_op *op);
/* Same results as ioe_pwrite / ioe_pread. */
ssize_t ioe_end(struct ioe_op *op);

#endif
