/*
 * mmap.c — mappings of CHFS files.
 *
 * A private mapping is emulated: anonymous memory filled with chfs_pread and then given the
 * requested protection (private writes never reach the file, exactly as with MAP_PRIVATE).
 * A shared mapping cannot be kept coherent with other clients: ENODEV, the errno of a file
 * system without mmap support. Fast-path descriptors are the backing file itself, so the
 * kernel maps them, shared or not.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

long hook_do_mmap(const struct chfs_sysargs *s)
{
	const long *a = s->a;
	struct hook_file *h = hook_file_of(a[4]);
	if (!h)
		return hook_pass(s);
	size_t len = (size_t)a[1];
	int prot = (int)a[2], flags = (int)a[3];
	off_t off = a[5];
	if (h->local)
		return hook_pass(s);
	if (h->is_dir)
		return -ENODEV;
	if ((flags & MAP_TYPE) != MAP_PRIVATE)
		return -ENODEV;
	if ((h->flags & O_ACCMODE) == O_WRONLY)
		return -EACCES;
	if (len == 0 || (off & 4095))
		return -EINVAL;
	long p = hook_raw(SYS_mmap, a[0], (long)len, PROT_READ | PROT_WRITE,
	                  (flags & ~MAP_TYPE) | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p < 0 && p > -4096)
		return p;
	size_t done = 0;
	while (done < len) {
		ssize_t r = chfs_pread(h->cfd, (char *)p + done, len - done, off + (off_t)done);
		if (r < 0) {
			int e = errno ? errno : EIO;
			RAW2(SYS_munmap, p, len);
			return -e;
		}
		if (r == 0)
			break; /* beyond the end: zeros, as the anonymous memory already is */
		done += (size_t)r;
	}
	if (prot != (PROT_READ | PROT_WRITE))
		RAW3(SYS_mprotect, p, len, prot);
	return p;
}
