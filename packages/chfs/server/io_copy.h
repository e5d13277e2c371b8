/*
 * io_copy.h — file-to-file copies: the flush of a written file to the backend (flush.c,
 * flush_local.c) and the stage-in of a backend file (backend_cache.c), by copy_file_range, and
 * where the kernel cannot through the storage I/O engine (io_engine.h): with an asynchronous
 * engine the pread of piece k+1 runs while piece k is written; otherwise each piece is read,
 * then written.
 */
#ifndef CHFSD_IO_COPY_H
#define CHFSD_IO_COPY_H

#include <stddef.h>
#include <stdint.h>

/* Copies [start, end) of from to the same offsets of to, stopping early at from's end, through
 * buf (piece bytes; a second buffer of that size is taken for the pipeline). *copied (may be
 * NULL) grows by the bytes written. 0 or -errno. */
int ioe_copy(int from, int to, uint8_t *buf, size_t piece, uint64_t start, uint64_t end, uint64_t *copied);

/* The same, in the kernel first (copy_file_range: no copy through user space, one memcpy instead
 * of two, reflinks where the file systems can), through ioe_copy where the kernel cannot (another
 * file system type on an older kernel, or none at all). */
int ioe_copy_range(int from, int to, uint8_t *buf, size_t piece, uint64_t start, uint64_t end,
                   uint64_t *copied);

/* The end of a copy to the backend: fsync the destination `to` (where ENOSPC or EIO surface late,
 * on NFS) and close it when >= 0, close `from` when >= 0, free buf. Returns rc, or the first
 * fsync/close error when rc is 0. */
int ioe_copy_end(int from, int to, void *buf, int rc);

#endif
