/*
 * futex.c — sleep and wake on a 32-bit counter (FUTEX_WAIT/FUTEX_WAKE, process-private): the
 * execution threads and waiting requesters sleep here instead of spinning.
 */
#include "internal.h"
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void as_futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	/* Returns on a wake, on a value change (EAGAIN) or on a signal; callers re-check. */
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void as_futex_wake(_Atomic uint32_t *addr, int n)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}
