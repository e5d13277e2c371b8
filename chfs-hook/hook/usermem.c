/*
 * usermem.c — reading and writing the application's memory without crashing it.
 *
 * The kernel answers EFAULT when a system call is given a pointer it cannot read or write (NULL,
 * an unmapped page, a PROT_NONE page). The hook reads the same arguments itself — the filter
 * glances at every path, the handlers copy names and fill struct stat — so a bad pointer that the
 * kernel would have refused would crash the program instead. Here every such access goes through
 * process_vm_readv/process_vm_writev on the process itself, which fail with EFAULT exactly where
 * the kernel's copy would. Page 0 and the rest of the first 4 KiB are refused outright: the
 * hook's trampoline lives there, so it is mapped, but no argument may point into it.
 *
 * The filter runs for every system call and may not call libc (no vector registers; see hook.c),
 * so it asks hook_user_readable(), which remembers the last pages it found readable per thread
 * and forgets them all when any thread unmaps or re-protects memory (munmap, mprotect, mremap,
 * madvise, shmdt, brk: hook_usermem_changed(), called after such a call returns). A page that
 * became unreadable through a call the hook did not see (code generated at run time, which the
 * rewriter never patched) is out of reach, as everything else is for such code.
 */
#define _GNU_SOURCE
#include "hook.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#define PAGE 4096UL
#define LOW_LIMIT PAGE /* the trampoline's page */
#define REMEMBERED 8

static _Atomic unsigned long map_generation = 1;

/* Per thread, in the loader's scratch (never __thread here: see gate.h). */
struct good_pages {
	uintptr_t page[REMEMBERED];
	unsigned long generation;
	unsigned next;
};
_Static_assert(sizeof(struct good_pages) <= CHFS_HOOK_SCRATCH, "the loader's scratch is too small");
static long scratch_offset;

void hook_usermem_init(long offset) { scratch_offset = offset; }

static struct good_pages *good(void)
{
	return (struct good_pages *)((char *)__builtin_thread_pointer() + scratch_offset);
}

void hook_usermem_changed(void) { atomic_fetch_add_explicit(&map_generation, 1, memory_order_release); }

static long self_copy(long nr, void *local, const void *remote, size_t n)
{
	struct iovec l = {local, n}, r = {(void *)remote, n};
	return hook_raw(nr, hook_raw(SYS_getpid, 0, 0, 0, 0, 0, 0), (long)&l, 1, (long)&r, 1, 0);
}

static int page_readable(uintptr_t page)
{
	unsigned long gen = atomic_load_explicit(&map_generation, memory_order_acquire);
	struct good_pages *g = good();
	if (g->generation != gen) {
		for (unsigned i = 0; i < REMEMBERED; i++)
			g->page[i] = 0;
		g->generation = gen;
	}
	if (page < LOW_LIMIT)
		return 0;
	for (unsigned i = 0; i < REMEMBERED; i++)
		if (g->page[i] == page)
			return 1;
	char c;
	if (self_copy(SYS_process_vm_readv, &c, (const void *)page, 1) != 1)
		return 0;
	g->page[g->next++ % REMEMBERED] = page;
	return 1;
}

int hook_user_readable(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	if (a < LOW_LIMIT || a + n < a)
		return 0;
	for (uintptr_t page = a & ~(PAGE - 1); page < a + n; page += PAGE)
		if (!page_readable(page))
			return 0;
	return 1;
}

long hook_user_strcpy(const char *src, char *dst, size_t size)
{
	uintptr_t a = (uintptr_t)src;
	size_t done = 0;
	if (a < LOW_LIMIT)
		return -EFAULT;
	while (done < size) {
		size_t chunk = PAGE - ((a + done) & (PAGE - 1));
		if (chunk > size - done)
			chunk = size - done;
		if (self_copy(SYS_process_vm_readv, dst + done, src + done, chunk) != (long)chunk)
			return -EFAULT;
		char *nul = memchr(dst + done, 0, chunk);
		if (nul)
			return nul - dst;
		done += chunk;
	}
	return -ENAMETOOLONG;
}

long hook_user_get(void *dst, const void *src, size_t n)
{
	if ((uintptr_t)src < LOW_LIMIT)
		return -EFAULT;
	return n == 0 || self_copy(SYS_process_vm_readv, dst, src, n) == (long)n ? 0 : -EFAULT;
}

long hook_user_put(void *dst, const void *src, size_t n)
{
	if ((uintptr_t)dst < LOW_LIMIT)
		return -EFAULT;
	/* process_vm_writev: local = what we write (src), remote = the application's dst */
	return n == 0 || self_copy(SYS_process_vm_writev, (void *)src, dst, n) == (long)n ? 0 : -EFAULT;
}
