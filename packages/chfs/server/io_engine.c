/*
 * io_engine.c — chfsd's storage I/O engine (see io_engine.h) over libasyncsys.
 *
 * Two request areas: "pipe" for operations started with ioe_begin, set up with AS_URING_ASYNC
 * so the kernel runs them on its io-wq workers while the starting thread goes on (inline
 * submission would copy a page-cache write inside io_uring_enter, on the caller's own thread,
 * and nothing would overlap); "wait" for ioe_pwrite/ioe_pread, submitted inline (the caller
 * waits anyway: one system call, no hand-off). A thread that starts or waits submits everything
 * other threads placed in the same area meanwhile (libasyncsys submits what is queued, and never
 * waits for more). Short transfers are finished synchronously; a request the kernel cancelled
 * (-ECANCELED/-EINTR: the thread that submitted it exited) is redone synchronously; a full area
 * makes the operation synchronous. Without io_uring, libasyncsys's execution threads run the
 * same requests. A chfsd built without libasyncsys has the sync engine only.
 */
#define _GNU_SOURCE
#include "io_engine.h"

#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef CHFS_HAVE_ASYNCSYS
#include <asyncsys.h>
#else /* built without libasyncsys (chfs alone): as_init_params fails, only "sync" exists */
struct as;
struct as_params {
	unsigned nthreads, nreq, flags;
};
#define AS_URING_ASYNC 0
#define AS_F_URING 0
static int as_init_params(struct as **asp, const struct as_params *p) { return -ENOTSUP; }
static int as_exit(struct as *as, void *fn, void *arg) { return 0; }
static unsigned as_features(const struct as *as) { return 0; }
static int as_submit(struct as *as, long num, const long arg[6]) { return -ENOSYS; }
static int as_wait(struct as *as, unsigned slot, long *ret) { return -EINVAL; }
static int as_start(struct as *as) { return 0; }
#endif

static struct as *pipe_as, *wait_as; /* NULL: synchronous engine */

static int sync_rw(int write, int fd, void *buf, size_t n, uint64_t off, size_t done, ssize_t *res)
{
	while (done < n) {
		ssize_t k = write ? pwrite(fd, (char *)buf + done, n - done, (off_t)(off + done))
		                  : pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0 && !write)
			break;
		done += (size_t)k;
	}
	*res = (ssize_t)done;
	return 0;
}

/* The result of a whole transfer of which the kernel did `got` bytes (>= 0) or failed (< 0):
 * the rest is done here (a read that got 0 bytes hit end of file). */
static ssize_t finish(int write, int fd, void *buf, size_t n, uint64_t off, long got)
{
	ssize_t res = 0;
	int redo = got == -ECANCELED || got == -EINTR;
	if (redo)
		got = 0;
	if (got < 0)
		return got;
	if ((size_t)got == n || (got == 0 && !write && !redo))
		return write ? 0 : got;
	int rc = sync_rw(write, fd, buf, n, off, (size_t)got, &res);
	return rc < 0 ? rc : (write ? 0 : res);
}

static int as_up(struct as **asp, unsigned nthreads, unsigned flags)
{
	struct as_params p = {.nthreads = nthreads, .nreq = 448, .flags = flags};
	return as_init_params(asp, &p);
}

int ioe_start(const char *mode)
{
	if (!mode)
		mode = getenv("CHFS_IO_ENGINE");
	int chosen = mode && *mode;
	if (!chosen)
		mode = "uring";
	if (strcmp(mode, "sync") == 0)
		return 0;
	if (strcmp(mode, "uring") != 0)
		return -EINVAL;
	const char *a = getenv("CHFS_IO_URING_ASYNC"); /* experiments: 0 = inline submission */
	int rc = as_up(&pipe_as, 4, a && strcmp(a, "0") == 0 ? 0 : AS_URING_ASYNC);
	if (rc == 0 && (rc = as_up(&wait_as, 2, 0)) < 0) {
		as_exit(pipe_as, NULL, NULL);
		pipe_as = NULL;
	}
	return rc == -ENOTSUP && !chosen ? 0 : rc; /* no libasyncsys: sync unless uring was asked for */
}

void ioe_stop(void)
{
	if (pipe_as)
		as_exit(pipe_as, NULL, NULL);
	if (wait_as)
		as_exit(wait_as, NULL, NULL);
	pipe_as = wait_as = NULL;
}

const char *ioe_describe(void)
{
	if (!pipe_as)
		return "sync";
	return (as_features(pipe_as) & AS_F_URING) ? "uring" : "uring (execution threads)";
}

int ioe_async(void) { return pipe_as != NULL; }

static long submit(struct as *as, int write, int fd, void *buf, size_t n, uint64_t off)
{
	const long args[6] = {fd, (long)buf, (long)n, (long)off};
	return as_submit(as, write ? SYS_pwrite64 : SYS_pread64, args);
}

/* Waits for one request of as: its result, or -EAGAIN if it could not be placed. */
static ssize_t run_wait(struct as *as, int write, int fd, void *buf, size_t n, uint64_t off)
{
	long slot = submit(as, write, fd, buf, n, off), ret = 0;
	if (slot < 0)
		return -EAGAIN;
	int rc = as_wait(as, (unsigned)slot, &ret);
	return finish(write, fd, buf, n, off, rc < 0 ? rc : ret);
}

int ioe_pwrite(int fd, const void *buf, size_t n, uint64_t off)
{
	ssize_t res = -EAGAIN;
	if (wait_as)
		res = run_wait(wait_as, 1, fd, (void *)buf, n, off);
	if (res == -EAGAIN) {
		int rc = sync_rw(1, fd, (void *)buf, n, off, 0, &res);
		return rc;
	}
	return (int)res;
}

ssize_t ioe_pread(int fd, void *buf, size_t n, uint64_t off)
{
	ssize_t res = -EAGAIN;
	if (wait_as)
		res = run_wait(wait_as, 0, fd, buf, n, off);
	if (res == -EAGAIN) {
		int rc = sync_rw(0, fd, buf, n, off, 0, &res);
		return rc < 0 ? rc : res;
	}
	return res;
}

void ioe_begin(struct ioe_op *op)
{
	op->slot = -1;
	if (pipe_as) {
		long slot = submit(pipe_as, op->write, op->fd, op->buf, op->n, op->off);
		if (slot >= 0) {
			op->slot = (int)slot;
			as_start(pipe_as);
			return;
		}
	}
	ioe_run_here(op);
}

void ioe_run(struct ioe_op *op)
{
	op->slot = -1;
	op->res = op->write ? ioe_pwrite(op->fd, op->buf, op->n, op->off)
	                    : ioe_pread(op->fd, op->buf, op->n, op->off);
}

void ioe_run_here(struct ioe_op *op)
{
	op->slot = -1;
	int rc = sync_rw(op->write, op->fd, op->buf, op->n, op->off, 0, &op->res);
	if (rc < 0)
		op->res = rc;
	else if (op->write)
		op->res = 0;
}

ssize_t ioe_end(struct ioe_op *op)
{
	if (op->slot < 0)
		return op->res;
	long ret = 0;
	int rc = as_wait(pipe_as, (unsigned)op->slot, &ret);
	op->slot = -1;
	return finish(op->write, op->fd, op->buf, op->n, op->off, rc < 0 ? rc : ret);
}
