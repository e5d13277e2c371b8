/*
 * hook.c — entry of the hook library: chfs_hook_init(), and the function every syscall of the
 * process goes through.
 *
 * Fast path: a filter decides from the syscall number and a glance at its arguments (is this
 * descriptor in the CHFS table? does this absolute path start with a mount point? is the
 * virtual cwd active for a relative path?) whether CHFS can be concerned; if not, the syscall
 * goes to the kernel at once. This file is compiled with -mgeneral-regs-only and calls nothing
 * that could touch vector registers: the application expects them preserved across a syscall.
 *
 * Slow path: the handler modules use libc and libchfs, which do use SSE/AVX, so the extended
 * register state is saved with XSAVE (XRSTOR afterwards) around them. A handler may still
 * decide the call is not for CHFS and pass it on (e.g. "../x" from a CHFS cwd).
 */
#define _GNU_SOURCE
#include "hook.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>

struct hook_config hook_cfg;
static unsigned xsave_size; /* 0: use FXSAVE (512 bytes) */

/* ---- filter ---------------------------------------------------------------------------- */

static int under_mount(const char *p)
{
	for (int m = 0; m < hook_cfg.nmounts; m++) {
		const char *d = hook_cfg.mounts[m].dir;
		size_t i = 0;
		while (d[i] && p[i] == d[i])
			i++;
		if (d[i] == 0 && (p[i] == 0 || p[i] == '/'))
			return 1;
	}
	return 0;
}

static int starts_with(const char *s, const char *prefix)
{
	while (*prefix)
		if (*s++ != *prefix++)
			return 0;
	return 1;
}

/* Has the relative name p a component equal to a mount point's last one ("chfs/f", "../chfs")?
 * From a local directory it may walk into that mount point (enter.c decides). Read as far as its
 * NUL, each page checked before it is read; an unreadable one is the handler's (EFAULT). */
static int may_enter_mount(const char *p)
{
	size_t start = 0;
	for (size_t i = 0; i < PATH_MAX; i++) {
		if ((i == 0 || ((uintptr_t)(p + i) & 4095) == 0) && !hook_user_readable(p + i, 1))
			return 1;
		if (p[i] != '/' && p[i] != 0)
			continue;
		for (int m = 0; m < hook_cfg.nmounts; m++) {
			const struct hook_mount *mt = &hook_cfg.mounts[m];
			size_t k = 0, len = i - start;
			while (len == mt->baselen && k < len && p[start + k] == mt->base[k]) /* (no libc) */
				k++;
			if (len == mt->baselen && k == len)
				return 1;
		}
		if (p[i] == 0)
			return 0;
		start = i + 1;
	}
	return 0;
}

/* May (dirfd, path) name something under a mount point? False positives are fine (the
 * handler resolves exactly); false negatives are not, except for absolute paths that reach a
 * mount only through "..", which we do not chase. */
static int maybe_path(long dirfd, long path)
{
	const char *p = (const char *)path;
	/* A name the kernel could not read either: the handler answers EFAULT (and the filter
	 * reads no further than the longest mount point and the /proc/self/fd/ prefix). */
	if (!hook_user_readable(p, hook_cfg.longest_prefix + 1))
		return 1;
	if (p[0] == '/')
		return under_mount(p) || (atomic_load_explicit(&hook_nfiles, memory_order_relaxed) > 0 &&
		                          (starts_with(p, "/proc/self/fd/") || starts_with(p, "/dev/fd/")));
	if ((int)dirfd == AT_FDCWD)
		return atomic_load_explicit(&hook_vcwd_active, memory_order_relaxed) || may_enter_mount(p);
	return hook_file_of((int)dirfd) != NULL || may_enter_mount(p);
}

/* May the socket address (addr, len) be a Unix socket name under a mount point? */
static int maybe_sun_path(long addr, long len)
{
	const char *sa = (const char *)addr;
	if ((socklen_t)len <= sizeof(sa_family_t) || !hook_user_readable(sa, sizeof(sa_family_t) + 1))
		return 0; /* too short for a name, or unreadable: the kernel answers */
	return *(const sa_family_t *)sa == AF_UNIX && sa[sizeof(sa_family_t)] != 0 /* abstract */ &&
	       maybe_path(AT_FDCWD, addr + (long)sizeof(sa_family_t));
}

static int maybe_msg_sun_path(long msg)
{
	const struct msghdr *m = (const struct msghdr *)msg;
	return hook_user_readable(m, sizeof *m) && m->msg_name &&
	       maybe_sun_path((long)m->msg_name, m->msg_namelen);
}

static int is_chfs_fd(long fd) { return hook_file_of(fd) != NULL; }

/* Read/write/seek on a fast-path descriptor go straight to the backing file. */
static int is_direct_fd(long fd)
{
	struct hook_file *h = hook_file_of(fd);
	return h && h->local;
}

static int routed(const struct chfs_sysargs *s)
{
	const long *a = s->a;
	switch (s->nr) {
	case SYS_read:
	case SYS_write:
	case SYS_pread64:
	case SYS_pwrite64:
	case SYS_readv:
	case SYS_writev:
	case SYS_preadv:
	case SYS_pwritev:
	case SYS_preadv2:
	case SYS_pwritev2:
	case SYS_lseek: return is_chfs_fd(a[0]) && !is_direct_fd(a[0]);
	case SYS_close:
	case SYS_fstat:
	case SYS_fsync:
	case SYS_fdatasync:
	case SYS_ftruncate:
	case SYS_getdents64:
	case SYS_getdents:
	case SYS_fcntl:
	case SYS_dup:
	case SYS_fallocate:
	case SYS_fadvise64:
	case SYS_readahead:
	case SYS_fstatfs:
	case SYS_fchmod:
	case SYS_fchown:
	case SYS_fgetxattr:
	case SYS_fsetxattr:
	case SYS_flistxattr:
	case SYS_fremovexattr:
	case SYS_sync_file_range: return is_chfs_fd(a[0]);
	case SYS_mmap: return is_chfs_fd(a[4]);
	case SYS_dup2:
	case SYS_dup3:
	case SYS_sendfile: return is_chfs_fd(a[0]) || is_chfs_fd(a[1]);
	case SYS_copy_file_range:
	case SYS_splice: return is_chfs_fd(a[0]) || is_chfs_fd(a[2]);
	case SYS_close_range: return atomic_load_explicit(&hook_nfiles, memory_order_relaxed) > 0;
	case SYS_open:
	case SYS_creat:
	case SYS_stat:
	case SYS_lstat:
	case SYS_access:
	case SYS_truncate:
	case SYS_mkdir:
	case SYS_rmdir:
	case SYS_unlink:
	case SYS_readlink:
	case SYS_chmod:
	case SYS_chown:
	case SYS_lchown:
	case SYS_utime:
	case SYS_utimes:
	case SYS_statfs:
	case SYS_getxattr:
	case SYS_lgetxattr:
	case SYS_setxattr:
	case SYS_lsetxattr:
	case SYS_listxattr:
	case SYS_llistxattr:
	case SYS_removexattr:
	case SYS_lremovexattr:
	case SYS_mknod: return maybe_path(AT_FDCWD, a[0]);
	case SYS_rename:
	case SYS_link: return maybe_path(AT_FDCWD, a[0]) || maybe_path(AT_FDCWD, a[1]);
	case SYS_symlink: return maybe_path(AT_FDCWD, a[1]);
	case SYS_openat:
	case SYS_openat2:
	case SYS_newfstatat:
	case SYS_statx:
	case SYS_faccessat:
	case SYS_faccessat2:
	case SYS_mkdirat:
	case SYS_unlinkat:
	case SYS_readlinkat:
	case SYS_fchmodat:
	case SYS_fchownat:
	case SYS_futimesat:
	case SYS_mknodat:
		return maybe_path(a[0], a[1]) ||
		       (is_chfs_fd(a[0]) && hook_user_readable((const char *)a[1], 1) &&
		        !*(const char *)a[1]);
	case SYS_utimensat: /* NULL path: the descriptor itself */
		return a[1] ? maybe_path(a[0], a[1]) : is_chfs_fd(a[0]);
	case SYS_renameat:
	case SYS_renameat2:
	case SYS_linkat: return maybe_path(a[0], a[1]) || maybe_path(a[2], a[3]);
	case SYS_symlinkat: return maybe_path(a[1], a[2]);
	case SYS_chdir:
	case SYS_fchdir:
	case SYS_execve:
	case SYS_execveat:
	case SYS_umask: return 1;
	case SYS_getcwd: return atomic_load_explicit(&hook_vcwd_active, memory_order_relaxed);
	case SYS_bind:
	case SYS_connect: return maybe_sun_path(a[1], a[2]);
	case SYS_sendto: return a[4] && maybe_sun_path(a[4], a[5]);
	case SYS_sendmsg: return maybe_msg_sun_path(a[1]);
	case SYS_exit_group: return hook_chfs_used();
	default: return 0;
	}
}

/* ---- slow path ------------------------------------------------------------------------- */

static long handle(struct chfs_sysargs *s)
{
	const long *a = s->a;
	switch (s->nr) {
	case SYS_open: return hook_do_open(AT_FDCWD, (const char *)a[0], (int)a[1], (mode_t)a[2], s);
	case SYS_creat:
		return hook_do_open(AT_FDCWD, (const char *)a[0], O_CREAT | O_WRONLY | O_TRUNC, (mode_t)a[1],
		                    s);
	case SYS_openat: return hook_do_open((int)a[0], (const char *)a[1], (int)a[2], (mode_t)a[3], s);
	case SYS_close: return hook_do_close((int)a[0]);
	case SYS_read: return hook_do_read((int)a[0], (void *)a[1], (size_t)a[2], -1);
	case SYS_write: return hook_do_write((int)a[0], (const void *)a[1], (size_t)a[2], -1);
	case SYS_pread64:
		return a[3] < 0 ? -EINVAL : hook_do_read((int)a[0], (void *)a[1], (size_t)a[2], a[3]);
	case SYS_pwrite64:
		return a[3] < 0 ? -EINVAL : hook_do_write((int)a[0], (const void *)a[1], (size_t)a[2], a[3]);
	case SYS_readv: return hook_do_readv((int)a[0], (const struct iovec *)a[1], (int)a[2], -1);
	case SYS_writev: return hook_do_writev((int)a[0], (const struct iovec *)a[1], (int)a[2], -1);
	case SYS_preadv:
	case SYS_preadv2:
		if (a[3] < -1 || (s->nr == SYS_preadv && a[3] < 0))
			return -EINVAL;
		return hook_do_readv((int)a[0], (const struct iovec *)a[1], (int)a[2], a[3]);
	case SYS_pwritev:
	case SYS_pwritev2:
		if (a[3] < -1 || (s->nr == SYS_pwritev && a[3] < 0))
			return -EINVAL;
		return hook_do_writev((int)a[0], (const struct iovec *)a[1], (int)a[2], a[3]);
	case SYS_lseek: return hook_do_lseek((int)a[0], (off_t)a[1], (int)a[2]);
	case SYS_dup:
	case SYS_dup2:
	case SYS_dup3: return hook_do_dup(s);
	case SYS_fcntl: return hook_do_fcntl((int)a[0], (int)a[1], a[2]);
	case SYS_close_range: return hook_do_close_range(s);
	case SYS_copy_file_range:
	case SYS_sendfile:
	case SYS_splice: return hook_do_copy(s);
	case SYS_getdents64: return hook_do_getdents64((int)a[0], (void *)a[1], (size_t)a[2]);
	case SYS_getdents: return -ENOSYS; /* glibc uses getdents64; the old layout is not emulated */
	case SYS_fsync:
	case SYS_fdatasync:
	case SYS_ftruncate:
	case SYS_fallocate:
	case SYS_fadvise64:
	case SYS_readahead:
	case SYS_sync_file_range: return hook_do_fdop(s);
	case SYS_mmap: return hook_do_mmap(s);
	case SYS_chdir:
	case SYS_fchdir:
	case SYS_getcwd: return hook_do_cwd(s);
	case SYS_execve:
	case SYS_execveat: return hook_do_exec(s);
	case SYS_exit_group: return hook_do_exit(s);
	case SYS_bind:
	case SYS_connect:
	case SYS_sendto:
	case SYS_sendmsg: return hook_do_sock(s);
	case SYS_umask: {
		long old = hook_pass(s);
		atomic_store(&hook_umask, (unsigned)a[0] & 0777);
		return old;
	}
	default: return hook_do_meta(s);
	}
}

/* XSAVE needs a 64-byte aligned area whose header (bytes 512..575) starts zeroed. */
static long with_vector_state_saved(long (*fn)(struct chfs_sysargs *), struct chfs_sysargs *s)
{
	unsigned size = xsave_size ? xsave_size : 512;
	unsigned char raw[size + 64];
	unsigned char *area = (unsigned char *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
	for (unsigned i = 512; i < 576 && i < size; i++)
		area[i] = 0;
	if (xsave_size)
		__asm__ volatile("xsave64 (%0)" : : "r"(area), "a"(-1), "d"(-1) : "memory");
	else
		__asm__ volatile("fxsave64 (%0)" : : "r"(area) : "memory");
	long r = fn(s);
	if (xsave_size)
		__asm__ volatile("xrstor64 (%0)" : : "r"(area), "a"(-1), "d"(-1) : "memory");
	else
		__asm__ volatile("fxrstor64 (%0)" : : "r"(area) : "memory");
	return r;
}

/* Threads are started by the application's libc, which initialises only its own per-thread
 * locale pointers; ours (this namespace's libc) stay NULL and the first toupper() in, e.g.,
 * libfabric would crash. The pointers live in static TLS, so checking costs one load. */
extern void __ctype_init(void);
extern const unsigned short **__ctype_b_loc(void);

static long handle_in_thread(struct chfs_sysargs *s)
{
	if (*__ctype_b_loc() == NULL)
		__ctype_init();
	long r = handle(s);
	if (r == -ENOENT && hook_follow_bases(s))
		r = handle(s); /* from the new name of a directory renamed away (follow.c) */
	return r;
}

static int changes_mappings(long nr)
{
	return nr == SYS_munmap || nr == SYS_mprotect || nr == SYS_mremap || nr == SYS_madvise ||
	       nr == SYS_shmdt || nr == SYS_brk || nr == SYS_pkey_mprotect;
}

static long hook_syscall(struct chfs_sysargs *s)
{
	long rc = routed(s) ? with_vector_state_saved(handle_in_thread, s) : hook_pass(s);
	if (changes_mappings(s->nr))
		hook_usermem_changed();
	return rc;
}

static long after_fork_thunk(struct chfs_sysargs *s)
{
	(void)s;
	hook_after_fork();
	return 0;
}

static void hook_after_fork_saved(void)
{
	struct chfs_sysargs dummy = {0, {0}};
	with_vector_state_saved(after_fork_thunk, &dummy);
}

static void detect_xsave(void)
{
	unsigned eax, ebx, ecx, edx;
	if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 27)) /* OSXSAVE */) {
		__cpuid_count(0xd, 0, eax, ebx, ecx, edx);
		xsave_size = ebx;
	}
}

__attribute__((visibility("default"))) int chfs_hook_init(const struct chfs_hook_host *host,
                                                          struct chfs_hook_ops *ops)
{
	if (host->version != CHFS_HOOK_ABI_VERSION)
		return -1;
	hook_usermem_init(host->scratch_offset);
	detect_xsave();
	hook_cfg.loader_path = host->loader_path;
	if (hook_init_modules() < 0)
		return -1;
	hook_join_early();
	ops->syscall = hook_syscall;
	ops->after_fork = hook_after_fork_saved;
	return 0;
}
