/*
 * gate.c — the C half of the gate: process-control syscalls that only work if the hook knows
 * about stacks, then the hook library for everything else.
 *
 * - clone(CLONE_VM) with a new stack (threads, posix_spawn): the child starts on an empty stack
 *   inside chfs_raw_syscall, so the caller's return address is pushed onto the child's stack
 *   first; the child's `ret` then resumes the application right after its syscall site.
 * - vfork, and clone(CLONE_VM|CLONE_VFORK) without a new stack, run as a plain fork. A real
 *   vfork child would return through this gate on the parent's stack and overwrite the frame the
 *   suspended parent later returns through (what crashes stock zpoline on every `sh -c`).
 *   Programs that use vfork only to exec or _exit (shells, make, Python) see no difference.
 * - clone3 with CLONE_VM returns -ENOSYS: glibc then falls back to clone, handled above; its
 *   clone_args stack cannot be extended safely in place.
 * - In the child of every fork-like call the hook library's after_fork re-initialises the CHFS
 *   client (the app's pthread_atfork handlers live in the other namespace's libc).
 * - The hook library (libchfs, libfabric and a second libc: ~0.2 s to load on a busy node) is
 *   loaded on the first syscall that can concern CHFS: a name under a mount point, or an
 *   execve whose environment lost the loader. Until then there are no CHFS descriptors and no
 *   virtual cwd, so nothing else can. Programs that never touch CHFS never pay for it; an
 *   MPI rank whose command line names a path under a mount point loads it at start (loader.c).
 *
 * Compiled with -mgeneral-regs-only: this runs on every syscall of the process, and must not
 * touch the application's vector registers, which the kernel would have preserved.
 */
#define _GNU_SOURCE
#include "gate.h"

#include <cpuid.h>
#include <errno.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

static long pass_through(struct chfs_sysargs *s)
{
	return chfs_raw_syscall(s->nr, s->a[0], s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]);
}

static long (*hook_syscall)(struct chfs_sysargs *s) = pass_through;
static void (*hook_after_fork)(void);
static int (*lazy_load)(void); /* set while the hook library is still to be loaded */
static const char *gate_loader_path;
static char mounts[16][256];
static const char *bases[16]; /* each mount point's last component, in mounts[] */
static int nmounts;
static uintptr_t longest; /* the longest mount point's length */

void chfs_gate_install(const struct chfs_hook_ops *ops)
{
	hook_after_fork = ops->after_fork;
	__atomic_store_n(&hook_syscall, ops->syscall, __ATOMIC_RELEASE);
	__atomic_store_n(&lazy_load, NULL, __ATOMIC_RELEASE);
}

void chfs_gate_set_lazy(int (*load)(void), const char *mount_list, const char *loader_path)
{
	const char *p = mount_list && *mount_list ? mount_list : "/chfs";
	nmounts = 0;
	while (*p && nmounts < 16) { /* DIR or DIR=CHFSDIR, ':'-separated; the hook validates */
		int n = 0;
		while (*p && *p != ':' && *p != '=' && n < 255)
			mounts[nmounts][n++] = *p++;
		while (n > 1 && mounts[nmounts][n - 1] == '/')
			n--;
		mounts[nmounts][n] = 0;
		if (n > 0) {
			bases[nmounts] = mounts[nmounts];
			for (int i = 0; i < n; i++)
				if (mounts[nmounts][i] == '/')
					bases[nmounts] = mounts[nmounts] + i + 1;
			if ((uintptr_t)n > longest)
				longest = (uintptr_t)n;
			nmounts++;
		}
		while (*p && *p != ':')
			p++;
		if (*p == ':')
			p++;
	}
	gate_loader_path = loader_path;
	lazy_load = load;
}

/* ---- reading the application's names without crashing it ----
 * Before the hook library is loaded the gate glances at every name a path call passes, and a
 * pointer the kernel would refuse (EFAULT) must not crash the program here: each page of a name
 * is checked with process_vm_readv on the process itself, and the pages found readable are
 * remembered per thread until a call that may unmap or re-protect memory passes the gate (as the
 * hook library's usermem.c does once it is loaded). The memory is the loader's own static TLS. */
#define GATE_PAGE 4096UL
#define GATE_PAGES 4
struct gate_pages {
	uintptr_t page[GATE_PAGES];
	unsigned long gen;
	unsigned next;
};
static __thread struct gate_pages gate_pages __attribute__((tls_model("initial-exec")));
static unsigned long map_gen = 1;

static int changes_mappings(long nr)
{
	return nr == __NR_munmap || nr == __NR_mprotect || nr == __NR_mremap || nr == __NR_madvise ||
	       nr == __NR_shmdt || nr == __NR_brk || nr == __NR_pkey_mprotect;
}

static int page_readable(uintptr_t page)
{
	unsigned long gen = __atomic_load_n(&map_gen, __ATOMIC_ACQUIRE);
	struct gate_pages *g = &gate_pages;
	if (g->gen != gen) {
		for (int i = 0; i < GATE_PAGES; i++)
			g->page[i] = 0;
		g->gen = gen;
	}
	if (page < GATE_PAGE) /* page 0 holds the trampoline: mapped, but no name points there */
		return 0;
	for (int i = 0; i < GATE_PAGES; i++)
		if (g->page[i] == page)
			return 1;
	char c;
	struct iovec l = {&c, 1}, r = {(void *)page, 1};
	long pid = chfs_raw_syscall(__NR_getpid, 0, 0, 0, 0, 0, 0);
	if (chfs_raw_syscall(__NR_process_vm_readv, pid, (long)&l, 1, (long)&r, 1, 0) != 1)
		return 0;
	g->page[g->next++ % GATE_PAGES] = page;
	return 1;
}

/* Can p be read as far as the gate reads it — an absolute name up to the longest mount point and
 * one byte more (under_mount), a relative one to its NUL (enters_mount)? If not, the kernel
 * answers the call (EFAULT). */
static int name_readable(const char *p)
{
	uintptr_t a = (uintptr_t)p, n = 4096;
	for (uintptr_t i = 0; i < n; i++) {
		if ((i == 0 || ((a + i) & (GATE_PAGE - 1)) == 0) &&
		    !page_readable((a + i) & ~(GATE_PAGE - 1)))
			return 0;
		if (p[i] == 0)
			return 1;
		if (i == 0 && p[0] == '/')
			n = longest + 1;
	}
	return 1;
}

static int under_mount(const char *p)
{
	if (!p || p[0] != '/')
		return 0;
	for (int m = 0; m < nmounts; m++) {
		const char *d = mounts[m];
		int i = 0;
		while (d[i] && p[i] == d[i])
			i++;
		if (d[i] == 0 && (p[i] == 0 || p[i] == '/'))
			return 1;
	}
	return 0;
}

/* Device and inode of name ("" = dirfd itself) relative to dirfd, as the kernel sees them. */
static int ident(long dirfd, const char *name, unsigned long id[2])
{
	struct stat st;
	if (chfs_raw_syscall(__NR_newfstatat, dirfd, (long)name, (long)&st, *name ? 0 : AT_EMPTY_PATH, 0,
	                     0) != 0)
		return -1;
	id[0] = st.st_dev;
	id[1] = st.st_ino;
	return 0;
}

/* Is the directory that p[0..len) names from dirfd the parent of mount point m? 1 also when
 * it cannot be told here (a name too long for these buffers): the hook library decides. */
static int at_mount_parent(long dirfd, const char *p, size_t len, int m)
{
	char prefix[256], parent[256];
	size_t plen = (size_t)(bases[m] - mounts[m]) - 1; /* the mount point's name without "/base" */
	if (len >= sizeof prefix)
		return 1;
	for (size_t i = 0; i < len; i++)
		prefix[i] = p[i];
	prefix[len] = 0;
	for (size_t i = 0; i < plen; i++)
		parent[i] = mounts[m][i];
	parent[plen ? plen : 1] = 0;
	parent[0] = '/';
	unsigned long a[2], b[2];
	return ident(dirfd, prefix, a) == 0 && ident(AT_FDCWD, parent, b) == 0 && a[0] == b[0] &&
	       a[1] == b[1];
}

/* Does the relative name p walk from dirfd into a mount point ("chfs/f" from its parent,
 * "../chfs")? Only through a component equal to the mount point's last one, reached in the
 * mount point's parent (by identity: a local namesake elsewhere does not load the hook). */
static int enters_mount(long dirfd, const char *p)
{
	if (!p || p[0] == '/')
		return 0;
	for (int m = 0; m < nmounts; m++) {
		size_t bl = 0;
		while (bases[m][bl])
			bl++;
		for (const char *c = p; bl && (c = chfs_find_component(c, bases[m], bl)); c += bl)
			if (at_mount_parent(dirfd, p, c > p ? (size_t)(c - p) - 1 : 0, m))
				return 1;
	}
	return 0;
}

int chfs_gate_names_mount(const char *arg)
{
	if (under_mount(arg))
		return 1;
	while (*arg && *arg != '=') /* --option=/chfs/... */
		arg++;
	return *arg == '=' && under_mount(arg + 1);
}

/* Bit i set: argument i of the syscall is a file name. AT_NAMES: an *at call, each name argument i
 * follows its directory descriptor (argument i - 1). */
#define AT_NAMES 0x100u
static unsigned name_args(long nr)
{
	switch (nr) {
	case __NR_open:
	case __NR_creat:
	case __NR_stat:
	case __NR_lstat:
	case __NR_access:
	case __NR_truncate:
	case __NR_mkdir:
	case __NR_rmdir:
	case __NR_unlink:
	case __NR_readlink:
	case __NR_chmod:
	case __NR_chown:
	case __NR_lchown:
	case __NR_utime:
	case __NR_utimes:
	case __NR_statfs:
	case __NR_getxattr:
	case __NR_lgetxattr:
	case __NR_setxattr:
	case __NR_lsetxattr:
	case __NR_listxattr:
	case __NR_llistxattr:
	case __NR_removexattr:
	case __NR_lremovexattr:
	case __NR_mknod:
	case __NR_chdir: return 1;
	case __NR_rename:
	case __NR_link: return 3;
	case __NR_symlink: return 2;
	case __NR_openat:
	case __NR_openat2:
	case __NR_newfstatat:
	case __NR_statx:
	case __NR_faccessat:
	case __NR_faccessat2:
	case __NR_mkdirat:
	case __NR_unlinkat:
	case __NR_readlinkat:
	case __NR_fchmodat:
	case __NR_fchownat:
	case __NR_futimesat:
	case __NR_mknodat:
	case __NR_utimensat: return AT_NAMES | 2;
	case __NR_renameat:
	case __NR_renameat2:
	case __NR_linkat: return AT_NAMES | 2 | 8;
	case __NR_symlinkat: return AT_NAMES | 4;
	default: return 0;
	}
}

/* Does this environment still preload us? (execve must keep the hook alive.) */
static int env_keeps_loader(char *const *envp)
{
	for (; envp && *envp; envp++) {
		const char *e = *envp, *k = "LD_PRELOAD=";
		while (*k && *e == *k)
			e++, k++;
		if (*k)
			continue;
		for (; *e; e++) {
			const char *a = e, *b = gate_loader_path;
			while (*b && *a == *b)
				a++, b++;
			if (*b == 0)
				return 1;
		}
	}
	return 0;
}

static int needs_hook_library(const struct chfs_sysargs *s)
{
	if (s->nr == __NR_execve)
		return name_readable((const char *)s->a[0]) &&
		       (under_mount((const char *)s->a[0]) || !env_keeps_loader((char *const *)s->a[2]));
	if (s->nr == __NR_execveat)
		return name_readable((const char *)s->a[1]) &&
		       (under_mount((const char *)s->a[1]) || !env_keeps_loader((char *const *)s->a[3]));
	unsigned m = name_args(s->nr), at = m & AT_NAMES;
	m &= ~AT_NAMES;
	for (int i = 0; m; i++, m >>= 1)
		if ((m & 1) && name_readable((const char *)s->a[i]) &&
		    (under_mount((const char *)s->a[i]) ||
		     enters_mount(at ? s->a[i - 1] : AT_FDCWD, (const char *)s->a[i])))
			return 1;
	return 0;
}

/* dlmopen and the library's start-up use vector registers; the application's must survive.
 * XSAVE (all enabled state) when the OS supports it and the area fits, else FXSAVE. */
static int load_saving_vector_state(int (*load)(void))
{
	unsigned eax, ebx, ecx, edx, size = 0;
	__cpuid(1, eax, ebx, ecx, edx);
	if (ecx & (1u << 27)) {
		__cpuid_count(0xd, 0, eax, ebx, ecx, edx);
		size = ebx;
	}
	int use_xsave = size > 0 && size <= 8192;
	unsigned char raw[8192 + 64];
	unsigned char *area = (unsigned char *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
	for (int i = 512; i < 576; i++)
		area[i] = 0;
	if (use_xsave)
		__asm__ volatile("xsave64 (%0)" : : "r"(area), "a"(-1), "d"(-1) : "memory");
	else
		__asm__ volatile("fxsave64 (%0)" : : "r"(area) : "memory");
	int rc = load();
	if (use_xsave)
		__asm__ volatile("xrstor64 (%0)" : : "r"(area), "a"(-1), "d"(-1) : "memory");
	else
		__asm__ volatile("fxrstor64 (%0)" : : "r"(area) : "memory");
	return rc;
}

/* A name pointer into the trampoline's page, other than NULL. Without the hook nothing is mapped
 * there and the kernel answers EFAULT; with it the page is mapped PROT_EXEC, which is execute-only
 * only where the CPU has protection keys — elsewhere the kernel would read the trampoline's bytes
 * as the name (ENAMETOOLONG for stat((char *)8)). NULL is the kernel's to judge (utimensat and
 * statx take it). */
static int name_in_trampoline(const struct chfs_sysargs *s)
{
	unsigned m = name_args(s->nr) & ~AT_NAMES;
	if (s->nr == __NR_execve)
		m = 1;
	else if (s->nr == __NR_execveat)
		m = 2;
	for (int i = 0; m; i++, m >>= 1)
		if ((m & 1) && s->a[i] != 0 && (uintptr_t)s->a[i] < GATE_PAGE)
			return 1;
	return 0;
}

static long to_hook(struct chfs_sysargs *s)
{
	if (name_in_trampoline(s))
		return -EFAULT;
	int (*load)(void) = __atomic_load_n(&lazy_load, __ATOMIC_ACQUIRE);
	if (load && needs_hook_library(s) && load_saving_vector_state(load) < 0)
		return -EIO; /* the loader printed why */
	long r = __atomic_load_n(&hook_syscall, __ATOMIC_ACQUIRE)(s);
	if (changes_mappings(s->nr))
		__atomic_add_fetch(&map_gen, 1, __ATOMIC_RELEASE);
	return r;
}

static long forked(long rv)
{
	if (rv == 0 && hook_after_fork)
		hook_after_fork();
	return rv;
}

static long gate_clone(struct chfs_sysargs *s, uintptr_t ret_addr)
{
	unsigned long flags = (unsigned long)s->a[0];
	uintptr_t stack = (uintptr_t)s->a[1];
	if ((flags & CLONE_VM) && stack != 0) {
		stack -= sizeof(uintptr_t);
		*(uintptr_t *)stack = ret_addr;
		return chfs_raw_syscall(__NR_clone, (long)flags, (long)stack, s->a[2], s->a[3], s->a[4],
		                        s->a[5]);
	}
	if ((flags & CLONE_VM) && (flags & CLONE_VFORK))
		flags &= ~(unsigned long)(CLONE_VM | CLONE_VFORK);
	if (flags & CLONE_VM) /* shares our stack without CLONE_VFORK: cannot be made safe */
		return pass_through(s);
	return forked(chfs_raw_syscall(__NR_clone, (long)flags, s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]));
}

static long gate_clone3(struct chfs_sysargs *s)
{
	const struct clone_args *ca = (const struct clone_args *)s->a[0];
	if ((size_t)s->a[1] < sizeof(ca->flags))
		return -EINVAL;
	if (ca->flags & CLONE_VM)
		return -ENOSYS;
	return forked(pass_through(s));
}

long chfs_gate_dispatch(struct chfs_sysargs *s, uintptr_t ret_addr)
{
	switch (s->nr) {
	case __NR_clone: return gate_clone(s, ret_addr);
	case __NR_clone3: return gate_clone3(s);
	case __NR_vfork:
	case __NR_fork: return forked(chfs_raw_syscall(__NR_fork, 0, 0, 0, 0, 0, 0));
	default: return to_hook(s);
	}
}
