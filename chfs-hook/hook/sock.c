/*
 * sock.c — Unix sockets named in CHFS under the hook: bind, connect, sendto, sendmsg.
 *
 * bind() of a CHFS name makes the name a socket entry in CHFS (chfs_mknod, exclusive: an
 * existing name is EADDRINUSE, as Linux's bind) and binds the socket to its node-local shadow
 * (shadow.c), named by the new entry's file id. connect(), sendto() and sendmsg() to a CHFS
 * name look the entry up (symlinks followed, write permission needed, as Linux's connect) and
 * go to its shadow, so hooked processes of one node talk through the name, as through a socket
 * on NFS. A name that is not a socket, or a socket entry nobody bound on this node, is
 * ECONNREFUSED, as Linux says for a socket file without a listener. If the kernel's bind of
 * the shadow fails (the socket is already bound, is not a Unix socket, ...), the entry just
 * made is removed again, as Linux removes the file it made.
 *
 * A relative name is resolved against the virtual cwd, so with the working directory under a
 * mount point it lands in CHFS (the kernel would bind it in the process's real directory on the
 * local disk); one that leaves CHFS ("../x") goes to the kernel as an absolute name.
 * Not translated back: getsockname(), getpeername(), accept() and recvfrom() report the
 * shadow's name, not the CHFS one; sendmmsg() destinations are not redirected.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define SUN_OFF offsetof(struct sockaddr_un, sun_path)

static long chfs_err(void) { return errno ? -errno : -EIO; }

/* The name a sockaddr_un of len bytes carries (Linux: up to its first NUL or its end). 1 if it
 * is a path name, 0 for anything the kernel alone handles (another family, an abstract or
 * unnamed address, a bad length), -EFAULT. */
static long sun_name(const void *uaddr, long len, char *name)
{
	struct sockaddr_un sa;
	if (len <= (long)SUN_OFF || len > (long)sizeof sa)
		return 0;
	if (hook_user_get(&sa, uaddr, (size_t)len) < 0)
		return -EFAULT;
	if (sa.sun_family != AF_UNIX || sa.sun_path[0] == 0)
		return 0;
	size_t n = (size_t)len - SUN_OFF;
	memcpy(name, sa.sun_path, n);
	name[n] = 0;
	return 1;
}

/* sa = the address of path; its length, or -ENAMETOOLONG (the kernel's limit). */
static long sun_make(const char *path, struct sockaddr_un *sa)
{
	size_t n = strlen(path);
	if (n >= sizeof sa->sun_path)
		return -ENAMETOOLONG;
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n + 1);
	return (long)(SUN_OFF + n + 1);
}

static long bind_chfs(int fd, const char *cpath, struct sockaddr_un *sa)
{
	mode_t perm = 0777 & ~atomic_load(&hook_umask);
	errno = 0;
	if (chfs_mknod(cpath, S_IFSOCK | perm, 0) != 0) {
		long rc = chfs_err();
		return rc == -EEXIST ? -EADDRINUSE : rc == -ENOENT ? hook_path_err(cpath) : rc;
	}
	struct stat st;
	char shadow[96];
	long rc = chfs_lstat(cpath, &st) == 0 ? 0 : chfs_err();
	if (rc == 0)
		rc = hook_shadow_path("s", (unsigned long long)st.st_ino, shadow, sizeof shadow);
	long len = rc < 0 ? rc : sun_make(shadow, sa);
	if (len >= 0) {
		RAW1(SYS_unlink, shadow); /* a leftover of this file id cannot be in use: it is new */
		rc = RAW3(SYS_bind, fd, sa, len);
	} else {
		rc = len;
	}
	if (rc < 0)
		chfs_unlink(cpath);
	return rc;
}

/* The shadow address of the socket entry cpath, for connect/sendto/sendmsg. */
static long peer_chfs(const char *cpath, struct sockaddr_un *sa)
{
	struct stat st;
	errno = 0;
	if (chfs_stat(cpath, &st) != 0)
		return hook_path_err(cpath);
	if (!S_ISSOCK(st.st_mode))
		return -ECONNREFUSED;
	errno = 0;
	if (chfs_access(cpath, W_OK) != 0)
		return chfs_err();
	char shadow[96];
	long rc = hook_shadow_path("s", (unsigned long long)st.st_ino, shadow, sizeof shadow);
	return rc < 0 ? rc : sun_make(shadow, sa);
}

/* The kernel's answer for a shadow that is not there: nobody bound the entry on this node. */
static long refused(long rc) { return rc == -ENOENT ? -ECONNREFUSED : rc; }

static long send_to(const struct chfs_sysargs *s, const struct sockaddr_un *sa, long len)
{
	const long *a = s->a;
	if (s->nr == SYS_sendto)
		return refused(hook_raw(SYS_sendto, a[0], a[1], a[2], a[3], (long)sa, len));
	struct msghdr m;
	if (hook_user_get(&m, (const void *)a[1], sizeof m) < 0)
		return -EFAULT;
	m.msg_name = (void *)sa;
	m.msg_namelen = (socklen_t)len;
	return refused(hook_raw(SYS_sendmsg, a[0], (long)&m, a[2], 0, 0, 0));
}

/* The address argument of each call: (pointer, length), or 0 when it has none. */
static int addr_arg(const struct chfs_sysargs *s, const void **addr, long *len)
{
	const long *a = s->a;
	switch (s->nr) {
	case SYS_bind:
	case SYS_connect: *addr = (const void *)a[1], *len = (socklen_t)a[2]; return 1;
	case SYS_sendto: *addr = (const void *)a[4], *len = (socklen_t)a[5]; return a[4] != 0;
	default: { /* sendmsg */
		struct msghdr m;
		if (hook_user_get(&m, (const void *)a[1], sizeof m) < 0)
			return 0; /* the kernel says EFAULT */
		*addr = m.msg_name, *len = m.msg_namelen;
		return m.msg_name != NULL;
	}
	}
}

static long sock_call(const struct chfs_sysargs *s, const char *name, struct hook_target *t,
                      struct sockaddr_un *sa)
{
	long rc = hook_resolve(AT_FDCWD, name, t);
	if (rc < 0)
		return rc;
	if (!t->chfs) {
		if (name[0] == '/')
			return hook_pass(s); /* the kernel's own name, untouched */
		/* relative to a virtual cwd but outside CHFS: the absolute name */
		long len = sun_make(t->path, sa);
		if (len < 0)
			return len;
		if (s->nr == SYS_bind || s->nr == SYS_connect)
			return hook_raw(s->nr, s->a[0], (long)sa, len, 0, 0, 0);
		return send_to(s, sa, len);
	}
	if ((rc = hook_chfs_ready()) < 0)
		return rc;
	if (s->nr == SYS_bind)
		return bind_chfs((int)s->a[0], t->path, sa);
	long len = peer_chfs(t->path, sa);
	if (len < 0)
		return len;
	if (s->nr == SYS_connect)
		return refused(hook_raw(SYS_connect, s->a[0], (long)sa, len, 0, 0, 0));
	return send_to(s, sa, len);
}

long hook_do_sock(const struct chfs_sysargs *s)
{
	const void *addr;
	long len;
	char name[sizeof(struct sockaddr_un)];
	if (!addr_arg(s, &addr, &len))
		return hook_pass(s);
	long rc = sun_name(addr, len, name);
	if (rc <= 0)
		return rc < 0 ? rc : hook_pass(s);
	struct hook_target *t = malloc(sizeof *t);
	struct sockaddr_un *sa = malloc(sizeof *sa);
	if (t)
		hook_target_init(t);
	rc = t && sa ? sock_call(s, name, t, sa) : -ENOMEM;
	if (t)
		hook_target_release(t);
	free(t);
	free(sa);
	return rc;
}
