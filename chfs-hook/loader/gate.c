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
 *
 * Compiled with -mgeneral-regs-only: this runs on every syscall of the process, and must not
 * touch the application's vector registers, which the kernel would have preserved.
 */
#define _GNU_SOURCE
#include "gate.h"

#include <errno.h>
#include <linux/sched.h>
#include <stddef.h>
#include <sys/syscall.h>

static long pass_through(struct chfs_sysargs *s)
{
  return chfs_raw_syscall(s->nr, s->a[0], s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]);
}

static long (*hook_syscall)(struct chfs_sysargs *s) = pass_through;
static void (*hook_after_fork)(void);

void chfs_gate_install(const struct chfs_hook_ops *ops)
{
  hook_after_fork = ops->after_fork;
  __atomic_store_n(&hook_syscall, ops->syscall, __ATOMIC_RELEASE);
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
  return forked(chfs_raw_syscall(__NR_clone, (long)flags, s->a[1], s->a[2], s->a[3], s->a[4],
                                 s->a[5]));
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
  case __NR_clone:
    return gate_clone(s, ret_addr);
  case __NR_clone3:
    return gate_clone3(s);
  case __NR_vfork:
  case __NR_fork:
    return forked(chfs_raw_syscall(__NR_fork, 0, 0, 0, 0, 0, 0));
  default:
    return __atomic_load_n(&hook_syscall, __ATOMIC_ACQUIRE)(s);
  }
}
