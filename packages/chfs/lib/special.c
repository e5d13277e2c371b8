/*
 * special.c — FIFOs and sockets as CHFS entries (chfs_mknod).
 *
 * A FIFO or a socket is a name with a type and an owner, no data: it is created like a
 * symlink, one exclusive CREATE at the owner of its path, and is listed, stat-ed, renamed and
 * unlinked like any entry. What runs behind it is node-local, as on NFS: on a chfuse mount the
 * kernel opens a FIFO and binds a socket on the inode itself (chfuse never sees those opens),
 * so processes of one node talk through it; the hook opens a FIFO as a node-local shadow
 * FIFO (chfs-hook/hook/fifo.c). libchfs itself cannot open one (ENXIO, the errno of opening a
 * socket). Device nodes (character and block) are records with their device number
 * (md.rdev, Linux's 32-bit encoding: majors below 4096, minors below 2^20, else EINVAL), made
 * only by a caller that may (uid 0, or a FUSE daemon acting for a request the kernel checked;
 * EPERM otherwise, as without CAP_MKNOD); on a chfuse mount the kernel opens them, libchfs and
 * the hook do not (ENXIO). mknod of a regular file creates an empty file, as mknod(2) does.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

int chfs_mknod(const char *path, mode_t mode, dev_t dev)
{
	mode_t type = mode & S_IFMT;
	if (type == 0 || type == S_IFREG) {
		int fd = chfs_open_posix(path, O_CREAT | O_EXCL | O_WRONLY, mode & 07777, 0);
		return fd < 0 ? -1 : chfs_close(fd);
	}
	int device = type == S_IFCHR || type == S_IFBLK;
	if (device && !perm_exempt())
		return set_err(-EPERM);
	if (device && (major(dev) >= 4096 || minor(dev) >= (1u << 20)))
		return set_err(-EINVAL);
	if (type != S_IFIFO && type != S_IFSOCK && !device)
		return set_err(-EINVAL);
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_PARENT, c);
	if (rc)
		return set_err(rc); /* the root: EEXIST */
	struct chfs_md *md = &c->md;
	memset(md, 0, sizeof *md);
	md->mode = type | (mode & 07777);
	perm_new_owner(md, &c->parent);
	if (device) /* Linux's new_encode_dev */
		md->rdev = (minor(dev) & 0xff) | (major(dev) << 8) | ((minor(dev) & ~0xffu) << 12);
	md->chunk_size = chfs_client.cfg.chunk_size;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	md->atime_ns = md->mtime_ns = md->ctime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	RPC_DECL(r);
	for (int again = 0;; again++) {
		rpc_begin(&r, WOP_CREATE);
		wenc_str(&r.e, c->cp);
		wenc_md(&r.e, md);
		wenc_u32(&r.e, WIRE_CREATE_EXCL);
		wenc_u64(&r.e, c->parent.fileid);
		rc = rpc_call_path(c->s, c->cp, &r);
		if (rc != -ENOENT || (rc = ns_parent_again(c->s, c->cp, &c->parent, again)) != 0)
			break; /* (ENOENT: the parent fenced, server/fence.c, or gone) */
	}
	if (rc == 0)
		dir_touch(c->s, c->cp, placement_owner(c->s->ring, c->cp), 0);
	return set_err(rc);
}
