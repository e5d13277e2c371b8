/*
 * gate.h — what the rewritten `syscall` sites land in, shared by the loader's modules and the
 * hook library (which is loaded into its own link-map namespace and never sees the loader's
 * symbols: the two talk only through the structs below, exchanged once at start).
 *
 * Every rewritten site executes `call *%rax`; the trampoline at VA 0 forwards to
 * chfs_gate_entry (entry.S), which packs the syscall registers into a chfs_sysargs on the stack
 * and calls chfs_gate_dispatch (gate.c). The gate handles the process-control syscalls whose
 * correctness depends on the stack (rt_sigreturn, clone with CLONE_VM, vfork, clone3) and hands
 * every other syscall to the hook library's `syscall` function.
 */
#ifndef CHFS_HOOK_GATE_H
#define CHFS_HOOK_GATE_H

#include <stddef.h>
#include <stdint.h>

/* Layout fixed by entry.S: nr, then rdi, rsi, rdx, r10, r8, r9. */
struct chfs_sysargs {
	long nr;
	long a[6];
};

/* Provided by the loader to the hook library. */
struct chfs_hook_host {
	int version;
	/* Issues the real system call (its `syscall` instruction is never rewritten). */
	long (*raw_syscall)(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
	const char *loader_path; /* absolute path of the preloaded loader, for execve */
	/* Per-thread memory for the hook library's filter: CHFS_HOOK_SCRATCH bytes at this offset
	 * from the thread pointer (%fs base) in every thread. The loader is preloaded, so its
	 * initial-exec TLS is part of every thread's static TLS from the start: reaching it never
	 * allocates. The hook's own __thread variables are allocated lazily on first use, by ld.so
	 * calling malloc — inside whatever syscall the application was making (a vfork child on a
	 * small stack, malloc itself), which the filter must never do. */
	long scratch_offset;
};
#define CHFS_HOOK_SCRATCH 128

/* Filled in by the hook library's chfs_hook_init(). */
struct chfs_hook_ops {
	/* Handles one syscall; returns the kernel-style result (>= 0 or -errno). */
	long (*syscall)(struct chfs_sysargs *s);
	/* Runs in the child of fork/vfork/clone without CLONE_VM, right after the syscall. */
	void (*after_fork)(void);
};

#define CHFS_HOOK_ABI_VERSION 2
/* getcwd(2) with this in its third argument (which the kernel ignores) asks the hook for its
 * working directory even when it is PATH_MAX bytes or longer, where the call itself answers
 * ENAMETOOLONG as the kernel does (loader/getcwd.c, for glibc's getcwd(3)). The answer is at
 * most CHFS_HOOK_CWD_MAX bytes with its NUL (a mount point + a CHFS name). */
#define CHFS_HOOK_GETCWD_LONG 0x6368667363776421L
#define CHFS_HOOK_CWD_MAX (4096 + 16384)
/* The first component of the relative name c (from c on) equal to base (bl bytes), or NULL: how
 * a name can walk from a local directory into a mount point whose last component is base (the
 * loader's gate, the hook's enter.c). No libc: the gate may not touch vector registers. */
static inline const char *chfs_find_component(const char *c, const char *base, size_t bl)
{
	while (*c) {
		size_t i = 0;
		while (i < bl && c[i] == base[i])
			i++;
		if (i == bl && (c[i] == 0 || c[i] == '/'))
			return c;
		while (*c && *c != '/')
			c++;
		while (*c == '/')
			c++;
	}
	return NULL;
}

typedef int (*chfs_hook_init_fn)(const struct chfs_hook_host *host, struct chfs_hook_ops *ops);

/* entry.S */
void chfs_gate_entry(void);
long chfs_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
extern const char chfs_raw_syscall_site[], chfs_sigreturn_site[];

/* gate.c */
long chfs_gate_dispatch(struct chfs_sysargs *s, uintptr_t ret_addr);
void chfs_gate_install(const struct chfs_hook_ops *ops);
/* Load the hook library (with `load`, which returns 0 or -1 after printing why) on the first
 * syscall naming something under one of `mount_list`'s mount points (CHFS_HOOK_MOUNTS syntax)
 * or exec'ing with an environment that lost `loader_path`. */
void chfs_gate_set_lazy(int (*load)(void), const char *mount_list, const char *loader_path);
/* 1 if arg (or what follows its first '=') is an absolute name under one of the mount points
 * given to chfs_gate_set_lazy. */
int chfs_gate_names_mount(const char *arg);

#endif
