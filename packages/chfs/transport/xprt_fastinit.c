/*
 * xprt_fastinit.c — keep libfabric 1.17's one-time provider initialisation cheap.
 *
 * The first fi_getinfo of a process initialises every built-in provider. Debian's libfabric
 * 1.17 has verbs built in, and its init scans /proc/kallsyms twice (~120k lines each, looking for
 * the peer-memory and dma-buf symbols used only for GPU/HMEM registration) even on machines
 * without an RDMA device. Those two scans were ~80-90 % of chfs_init (tcp 0.13 s -> 0.03 s,
 * shm 0.09 s -> 0.005 s measured; several times more on a loaded machine), paid by every process
 * that uses CHFS — each hooked Montage task, each MPI rank. (The memory-registration cache
 * monitor, suspected first, costs nothing measurable here.) CHFS never registers device memory.
 *
 * So, for the duration of our first fi_getinfo only, libfabric's own GOT entry for fopen is
 * pointed at a wrapper that answers ENOENT for "/proc/kallsyms" (verbs then assumes no
 * peer-memory support) and forwards everything else. Nothing else in the process is affected
 * and no symbol is exported. If libfabric cannot be found or patched, nothing changes (init is
 * just slower). CHFS_FABRIC_PROBE_KALLSYMS=1 turns this off.
 */
#define _GNU_SOURCE
#include "xprt_internal.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static FILE *(*real_fopen)(const char *, const char *);

static FILE *fopen_without_kallsyms(const char *path, const char *mode)
{
	if (path && strcmp(path, "/proc/kallsyms") == 0) {
		errno = ENOENT;
		return NULL;
	}
	return real_fopen(path, mode);
}

/* glibc may or may not have relocated d_ptr values of a loaded object's dynamic section. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

static void **find_slot(const struct dl_phdr_info *info, const ElfW(Rela) * rel, size_t n,
                        const ElfW(Sym) * symtab, const char *strtab, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		unsigned long t = ELF64_R_TYPE(rel[i].r_info);
		if (t != R_X86_64_JUMP_SLOT && t != R_X86_64_GLOB_DAT)
			continue;
		const ElfW(Sym) *s = &symtab[ELF64_R_SYM(rel[i].r_info)];
		if (strcmp(strtab + s->st_name, name) == 0)
			return (void **)(info->dlpi_addr + rel[i].r_offset);
	}
	return NULL;
}

struct slot_info {
	void **slot;
	bool relro; /* the slot lies in the object's RELRO segment (read-only after start-up) */
};

static int find_fopen_slot(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct slot_info *si = arg;
	(void)size;
	const char *base = strrchr(info->dlpi_name, '/');
	if (strncmp(base ? base + 1 : info->dlpi_name, "libfabric.so", 12) != 0)
		return 0;
	const ElfW(Dyn) *dyn = NULL;
	uintptr_t relro_lo = 0, relro_hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
		if (ph->p_type == PT_GNU_RELRO) {
			relro_lo = info->dlpi_addr + ph->p_vaddr;
			relro_hi = relro_lo + ph->p_memsz;
		}
	}
	if (!dyn)
		return 1;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Rela) *jmprel = NULL, *rela = NULL;
	size_t jmpsz = 0, relasz = 0;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_STRTAB: strtab = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_JMPREL: jmprel = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: jmpsz = dyn->d_un.d_val; break;
		case DT_RELA: rela = (const void *)dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_RELASZ: relasz = dyn->d_un.d_val; break;
		}
	}
	if (!symtab || !strtab)
		return 1;
	void **slot = NULL;
	if (jmprel)
		slot = find_slot(info, jmprel, jmpsz / sizeof *jmprel, symtab, strtab, "fopen");
	if (!slot && rela)
		slot = find_slot(info, rela, relasz / sizeof *rela, symtab, strtab, "fopen");
	si->slot = slot;
	si->relro = slot && (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
	return 1;
}

static struct slot_info patched;
static void *saved_value;

/* Write *slot = v; a RELRO page (full RELRO: read-only once relocated) is opened briefly. */
static bool poke(const struct slot_info *si, void *v)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *page = (void *)((uintptr_t)si->slot & ~(uintptr_t)(pg - 1));
	if (si->relro && mprotect(page, (size_t)pg, PROT_READ | PROT_WRITE) != 0)
		return false;
	__atomic_store_n(si->slot, v, __ATOMIC_SEQ_CST);
	if (si->relro)
		mprotect(page, (size_t)pg, PROT_READ);
	return true;
}

void xprt_fastinit_begin(void)
{
	const char *e = getenv("CHFS_FABRIC_PROBE_KALLSYMS");
	if (e && *e && strcmp(e, "0") != 0)
		return;
	struct slot_info si = {0};
	dl_iterate_phdr(find_fopen_slot, &si);
	if (!si.slot || !*si.slot)
		return;
	real_fopen = fopen;
	saved_value = *si.slot;
	if (poke(&si, (void *)fopen_without_kallsyms))
		patched = si;
}

void xprt_fastinit_end(void)
{
	if (!patched.slot)
		return;
	poke(&patched, saved_value);
	patched.slot = NULL;
}
