/*
 * io_copy.h — file-to-file copies through the storage I/O engine (io_engine.h): the flush of a
 * written file to the backend (flush.c) and the stage-in of a backend file where
 * copy_file_range cannot (backend_cache.c). With an asynchronous engine the pread of piece k+1
 * runs while piece k is written; otherwise each piece is read, then written.
 */
#ifndef CHFSD_IO_COPY_H
#define CHFSD_IO_COPY_H

#include <stddef.h>
#include <stdint.h>

/* Copies [start, end) of from to the same offsets of to, stopping early at from's end, through
 * buf (piece bytes; a second buffer of that size is taken for the pipeline). *copied (may be
 * NULL) grows by the bytes written. 0 or -errno. */
int ioe_copy(int from, int to, uint8_t *buf, size_t piece, uint64_t start, uint64_t end, uint64_t *copied);

/* The end of a copy to the backend: fsync the destination `to` (where ENOSPC or EIO surface late,
 * on NFS) and close it when >= 0, close `from` when >= 0, free buf. Returns rc, or the first
 * fsync/close error when rc is 0. */
int ioe_copy_end(int from, int to, void *buf, int rc);

#endif
