/* sysc.c — the table of intercepted x86-64 system calls (see sysc.h). Every call that takes a
 * path is here, so a denial holds for all of them (a raw syscall() included); a call missing
 * from the table would be a way around a denial, which is why the table and not each method
 * lists them. Lookup by number goes through an index built on first use. */
#include "sysc.h"

#include <stddef.h>
#include <sys/syscall.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_faccessat2
#define SYS_faccessat2 439
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

#define P1(nr, kind, p0)                                         \
	{                                                        \
		nr, #nr, kind, {-1, -1}, {p0, -1}, -1, -1, -1, 0 \
	}
#define PAT(nr, kind, d0, p0, nf)                                \
	{                                                        \
		nr, #nr, kind, {d0, -1}, {p0, -1}, nf, -1, -1, 0 \
	}
#define PBUF(nr, kind, d0, p0, nf, buf)                           \
	{                                                         \
		nr, #nr, kind, {d0, -1}, {p0, -1}, nf, buf, -1, 0 \
	}
/* rename and link act on a final symbolic link itself, not on its target */
#define P2(nr, kind, d0, p0, d1, p1)                             \
	{                                                        \
		nr, #nr, kind, {d0, d1}, {p0, p1}, -2, -1, -1, 0 \
	}
#define IO(nr, fd, iov)                                                \
	{                                                              \
		nr, #nr, CJ_SK_IO, {-1, -1}, {-1, -1}, -1, -1, fd, iov \
	}

const struct cj_sysc cj_sysc_table[] = {
        P1(SYS_open, CJ_SK_OPEN, 0),
        PAT(SYS_openat, CJ_SK_OPEN, 0, 1, -1),
        PAT(SYS_openat2, CJ_SK_OPEN, 0, 1, -1),
        P1(SYS_creat, CJ_SK_OPEN, 0),
        PBUF(SYS_stat, CJ_SK_STAT, -1, 0, -1, 1),
        PBUF(SYS_lstat, CJ_SK_STAT, -1, 0, -2, 1),
        PBUF(SYS_newfstatat, CJ_SK_STAT, 0, 1, 3, 2),
        PBUF(SYS_statx, CJ_SK_STAT, 0, 1, 2, 4),
        PBUF(SYS_statfs, CJ_SK_STAT, -1, 0, -1, 1),
        PBUF(SYS_readlink, CJ_SK_READLINK, -1, 0, -2, 1),
        PBUF(SYS_readlinkat, CJ_SK_READLINK, 0, 1, -2, 2),
        P1(SYS_access, CJ_SK_SCALAR, 0),
        PAT(SYS_faccessat, CJ_SK_SCALAR, 0, 1, -1),
        PAT(SYS_faccessat2, CJ_SK_SCALAR, 0, 1, 3),
        P1(SYS_mkdir, CJ_SK_SCALAR, 0),
        PAT(SYS_mkdirat, CJ_SK_SCALAR, 0, 1, -2),
        P1(SYS_rmdir, CJ_SK_SCALAR, 0),
        P1(SYS_unlink, CJ_SK_SCALAR, 0),
        PAT(SYS_unlinkat, CJ_SK_SCALAR, 0, 1, -2),
        P1(SYS_mknod, CJ_SK_SCALAR, 0),
        PAT(SYS_mknodat, CJ_SK_SCALAR, 0, 1, -2),
        P1(SYS_chmod, CJ_SK_SCALAR, 0),
        PAT(SYS_fchmodat, CJ_SK_SCALAR, 0, 1, -1),
        PAT(SYS_fchmodat2, CJ_SK_SCALAR, 0, 1, 3),
        P1(SYS_chown, CJ_SK_SCALAR, 0),
        PAT(SYS_lchown, CJ_SK_SCALAR, -1, 0, -2),
        PAT(SYS_fchownat, CJ_SK_SCALAR, 0, 1, 4),
        P1(SYS_truncate, CJ_SK_SCALAR, 0),
        P2(SYS_rename, CJ_SK_SCALAR, -1, 0, -1, 1),
        P2(SYS_renameat, CJ_SK_SCALAR, 0, 1, 2, 3),
        P2(SYS_renameat2, CJ_SK_SCALAR, 0, 1, 2, 3),
        P2(SYS_link, CJ_SK_SCALAR, -1, 0, -1, 1),
        P2(SYS_linkat, CJ_SK_SCALAR, 0, 1, 2, 3),
        /* symlink's first argument is the link's text, not a path looked up now */
        P1(SYS_symlink, CJ_SK_OTHER, 1),
        PAT(SYS_symlinkat, CJ_SK_OTHER, 1, 2, -2),
        P1(SYS_execve, CJ_SK_OTHER, 0),
        PAT(SYS_execveat, CJ_SK_OTHER, 0, 1, 4),
        P1(SYS_chdir, CJ_SK_OTHER, 0),
        P1(SYS_chroot, CJ_SK_OTHER, 0),
        PAT(SYS_utimensat, CJ_SK_OTHER, 0, 1, 3),
        P1(SYS_utime, CJ_SK_OTHER, 0),
        P1(SYS_utimes, CJ_SK_OTHER, 0),
        PAT(SYS_futimesat, CJ_SK_OTHER, 0, 1, -1),
        P1(SYS_getxattr, CJ_SK_OTHER, 0),
        PAT(SYS_lgetxattr, CJ_SK_OTHER, -1, 0, -2),
        P1(SYS_setxattr, CJ_SK_OTHER, 0),
        PAT(SYS_lsetxattr, CJ_SK_OTHER, -1, 0, -2),
        P1(SYS_listxattr, CJ_SK_OTHER, 0),
        PAT(SYS_llistxattr, CJ_SK_OTHER, -1, 0, -2),
        P1(SYS_removexattr, CJ_SK_OTHER, 0),
        PAT(SYS_lremovexattr, CJ_SK_OTHER, -1, 0, -2),
        PAT(SYS_name_to_handle_at, CJ_SK_OTHER, 0, 1, 4),
        P1(SYS_inotify_add_watch, CJ_SK_OTHER, 1),
        P1(SYS_swapon, CJ_SK_OTHER, 0),
        P1(SYS_acct, CJ_SK_OTHER, 0),
        {SYS_getdents64, "SYS_getdents64", CJ_SK_DIRENT, {-1, -1}, {-1, -1}, -1, 1, 0, 0},
        IO(SYS_read, 0, 0),
        IO(SYS_write, 0, 0),
        IO(SYS_pread64, 0, 0),
        IO(SYS_pwrite64, 0, 0),
        IO(SYS_readv, 0, 1),
        IO(SYS_writev, 0, 1),
        IO(SYS_preadv, 0, 1),
        IO(SYS_pwritev, 0, 1),
        IO(SYS_preadv2, 0, 1),
        IO(SYS_pwritev2, 0, 1),
        IO(SYS_sendto, 0, 0),
        IO(SYS_recvfrom, 0, 0),
        IO(SYS_sendmsg, 0, 2),
        IO(SYS_recvmsg, 0, 2),
};
const int cj_sysc_count = (int)(sizeof(cj_sysc_table) / sizeof(cj_sysc_table[0]));

#define CJ_SYSC_MAXNR 512
static signed char sysc_index[CJ_SYSC_MAXNR]; /* table index + 1, 0 = not intercepted */
static int sysc_indexed;

const struct cj_sysc *cj_sysc_find(int nr)
{
	if (!sysc_indexed) {
		for (int i = 0; i < cj_sysc_count; i++)
			sysc_index[cj_sysc_table[i].nr] = (signed char)(i + 1);
		sysc_indexed = 1;
	}
	if (nr < 0 || nr >= CJ_SYSC_MAXNR || !sysc_index[nr])
		return NULL;
	return &cj_sysc_table[sysc_index[nr] - 1];
}
