/*
 * raw.c — the system call itself, issued from the hook's own (unpatched) code: hook_raw() for
 * any call, hook_pass() for the application's call unchanged. No libc, no vector registers.
 */
#define _GNU_SOURCE
#include "hook.h"

long hook_raw(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;
	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
	                 : "rcx", "r11", "memory");
	return ret;
}

long hook_pass(const struct chfs_sysargs *s)
{
	return hook_raw(s->nr, s->a[0], s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]);
}
