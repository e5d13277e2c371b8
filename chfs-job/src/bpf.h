/* bpf.h — the seccomp filter both methods install: trap only the system calls the policy needs
 * (path calls if it has path rules, the read/write family if it has limits), let the rest run. */
#ifndef CHFS_JOB_BPF_H
#define CHFS_JOB_BPF_H

#include "policy.h"

#include <linux/filter.h>
#include <stdint.h>

/* Build the program into *prog (prog->filter malloc'ed): the policy's calls get action
 * (SECCOMP_RET_USER_NOTIF or SECCOMP_RET_TRACE), other x86-64 calls SECCOMP_RET_ALLOW, and
 * i386/x32 calls ENOSYS (they would be a way around the table). Returns the number trapped. */
int cj_bpf_build(const struct cj_policy *p, uint32_t action, struct sock_fprog *prog);
/* Is system call nr trapped for policy p? */
int cj_bpf_traps(const struct cj_policy *p, int nr);

#endif
