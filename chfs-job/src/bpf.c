/* bpf.c — the seccomp BPF program (see bpf.h): a linear list of "nr == N -> trap" tests after
 * the architecture check. Linear is enough: at most ~70 comparisons on the trapped path only
 * for the calls that are listed, and the untrapped calls (most of them) fall through in the same
 * count; a binary tree would matter only with hundreds of entries. With chfs: mappings, close()
 * is trapped too, but only for descriptors >= CJ_CHFS_FD_MIN (where staged CHFS files live), and
 * dup2/dup3 (rare calls) whose target may be one. */
#include "bpf.h"
#include "chfs_serve.h"
#include "sysc.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>

#define X32_SYSCALL_BIT 0x40000000u

int cj_bpf_traps(const struct cj_policy *p, int nr)
{
	const struct cj_sysc *sc = cj_sysc_find(nr);
	if (!sc)
		return 0;
	if (sc->kind == CJ_SK_IO)
		return cj_policy_has_limits(p);
	if (sc->kind == CJ_SK_DIRENT)
		return cj_policy_has(p, CJ_DENY);
	return p->nrules > 0;
}

int cj_bpf_build(const struct cj_policy *p, uint32_t action, struct sock_fprog *prog)
{
	int n = 0;
	for (int i = 0; i < cj_sysc_count; i++)
		n += cj_bpf_traps(p, cj_sysc_table[i].nr);
	struct sock_filter *f = calloc((size_t)(n * 2 + 16), sizeof(*f));
	if (!f)
		return -ENOMEM;
	int k = 0;
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
	for (int i = 0; i < cj_sysc_count; i++) {
		if (!cj_bpf_traps(p, cj_sysc_table[i].nr))
			continue;
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		                                      (uint32_t)cj_sysc_table[i].nr, 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
	}
	if (cj_policy_has(p, CJ_CHFS)) {
		/* dup2/dup3 close their target: it may hold a staged file (a shell's redirection) */
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_dup2, 1, 0);
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_dup3, 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close, 0, 3);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		                                      offsetof(struct seccomp_data, args[0]));
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, CJ_CHFS_FD_MIN, 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
	}
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog->len = (unsigned short)k;
	prog->filter = f;
	return n;
}
