/*
 * io_copy.c — file-to-file copy (see io_copy.h). Pipelined: two buffers alternate; while the
 * write of one is in flight the read of the next piece fills the other, and the write of a
 * buffer is collected before that buffer is read into again. Everything started is collected
 * before returning, also on errors. Sequential (read, then write) with the synchronous engine,
 * or when the second buffer cannot be had. ioe_copy_range asks the kernel first.
 */
#define _GNU_SOURCE
#include "io_copy.h"

#include "io_engine.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static size_t want(size_t piece, uint64_t off, uint64_t end)
{
	return end - off < piece ? (size_t)(end - off) : piece;
}

static int copy_sequential(int from, int to, uint8_t *buf, size_t piece, uint64_t off, uint64_t end,
                           uint64_t *copied)
{
	while (off < end) {
		size_t w = want(piece, off, end);
		ssize_t n = ioe_pread(from, buf, w, off);
		if (n <= 0)
			return (int)n;
		int rc = ioe_pwrite(to, buf, (size_t)n, off);
		if (rc < 0)
			return rc;
		*copied += (uint64_t)n;
		off += (uint64_t)n;
		if ((size_t)n < w)
			return 0; /* from ends here */
	}
	return 0;
}

static int copy_pipelined(int from, int to, uint8_t *b[2], size_t piece, uint64_t off, uint64_t end,
                          uint64_t *copied)
{
	struct ioe_op rd = {.fd = from, .buf = b[0], .n = want(piece, off, end), .off = off}, wr;
	int rc = 0, writing = 0, cur = 0;
	ioe_begin(&rd);
	for (;;) {
		ssize_t n = ioe_end(&rd); /* piece at off, in b[cur] */
		if (writing) {            /* the previous piece, from b[cur ^ 1] */
			writing = 0;
			ssize_t w = ioe_end(&wr);
			if (w < 0 && n >= 0)
				n = w;
			else if (w >= 0)
				*copied += wr.n;
		}
		if (n <= 0) {
			rc = (int)n;
			break;
		}
		uint64_t next = off + (uint64_t)n;
		int more = (size_t)n == rd.n && next < end;
		if (more) {
			rd = (struct ioe_op){
			        .fd = from, .buf = b[cur ^ 1], .n = want(piece, next, end), .off = next};
			ioe_begin(&rd);
		}
		wr = (struct ioe_op){.fd = to, .write = 1, .buf = b[cur], .n = (size_t)n, .off = off};
		ioe_begin(&wr);
		writing = 1;
		if (!more)
			break;
		off = next;
		cur ^= 1;
	}
	if (writing) {
		ssize_t w = ioe_end(&wr);
		if (w < 0 && rc == 0)
			rc = (int)w;
		else if (w >= 0)
			*copied += wr.n;
	}
	return rc;
}

int ioe_copy(int from, int to, uint8_t *buf, size_t piece, uint64_t start, uint64_t end, uint64_t *copied)
{
	uint64_t none = 0;
	if (!copied)
		copied = &none;
	if (start >= end)
		return 0;
	uint8_t *other = ioe_async() && end - start > piece ? malloc(piece) : NULL;
	if (!other)
		return copy_sequential(from, to, buf, piece, start, end, copied);
	uint8_t *b[2] = {buf, other};
	int rc = copy_pipelined(from, to, b, piece, start, end, copied);
	free(other);
	return rc;
}

int ioe_copy_range(int from, int to, uint8_t *buf, size_t piece, uint64_t start, uint64_t end,
                   uint64_t *copied)
{
	uint64_t none = 0;
	if (!copied)
		copied = &none;
	for (loff_t in = (loff_t)start, out = (loff_t)start; (uint64_t)in < end;) {
		ssize_t k = copy_file_range(from, &in, to, &out, (size_t)(end - (uint64_t)in), 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0)
			return 0; /* from ends here */
		if (k < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
			start = (uint64_t)in;
			break;
		}
		if (k < 0)
			return -errno;
		*copied += (uint64_t)k;
		if ((uint64_t)in >= end)
			return 0;
	}
	return ioe_copy(from, to, buf, piece, start, end, copied);
}

int ioe_copy_end(int from, int to, void *buf, int rc)
{
	if (rc == 0 && to >= 0 && fsync(to) < 0)
		rc = -errno;
	if (to >= 0 && close(to) < 0 && rc == 0)
		rc = -errno;
	if (from >= 0)
		close(from);
	free(buf);
	return rc;
}
