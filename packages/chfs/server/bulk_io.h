/*
 * bulk_io.h — one segment of a WRITE or READ request moved between the client's memory (RMA)
 * and a backing file, piece by piece through the storage I/O engine (io_engine.h).
 *
 * With an asynchronous engine the pieces are pipelined: the RMA of piece k+1 runs while the
 * pwrite of piece k is in flight (write), the pread of piece k+1 while piece k is pushed to the
 * client (read). With the synchronous engine each piece is moved, then written (read), in turn,
 * 4 MiB at a time: the loop chfsd always had. Each calling thread keeps two piece buffers; a
 * buffer a failed RMA may still touch is handed to the transport (xprt_rma_retire) and
 * replaced. A read is pushed from a mapping of the file instead (one copy per byte) where that
 * mapping cannot fault in a user-space copy: the caller keeps the file from shrinking (pinned:
 * st_data_shrink_hold), or the transport copies in the kernel. Both return 0 or -errno and
 * wait for everything they started.
 */
#ifndef CHFSD_BULK_IO_H
#define CHFSD_BULK_IO_H

#include <stdint.h>

#include "xprt.h"

/* len bytes from the client's rd at bufoff to fd at off. */
int bulk_write_seg(xprt_req_t *r, const struct xprt_rma_desc *rd, uint64_t bufoff, int fd, uint64_t off,
                   uint64_t len);
/* Up to len bytes of fd at off to the client's rd at bufoff; *got: the bytes before end of
 * file (what was pushed). */
int bulk_read_seg(xprt_req_t *r, const struct xprt_rma_desc *rd, uint64_t bufoff, int fd, uint64_t off,
                  uint64_t len, int pinned, uint64_t *got);

#endif
