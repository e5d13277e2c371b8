/*
 * rewrite.c — replace every `syscall` instruction (0f 05) of the process by `call *%rax`
 * (ff d0), both two bytes long, so no other instruction moves.
 *
 * Only bytes that capstone decodes as a `syscall` instruction are rewritten; a `0f 05` inside
 * another instruction (an immediate, a displacement) is left alone. Disassembling every
 * executable byte linearly costs seconds for a large program (a 30 MB Python binary took 38 s),
 * so decoding starts at known instruction boundaries instead: the candidate `0f 05` pairs of a
 * mapping are found first, and each is decoded from the start of the function containing it,
 * taken from the object's unwind table (.eh_frame_hdr, a sorted list of every function entry
 * that has unwind info — in practice all compiled code). Candidates in the same function share
 * one sweep. A mapping without an unwind table (JIT code, hand-written objects without CFI) is
 * swept linearly from its start. Undecodable bytes are skipped one at a time (capstone
 * SKIPDATA), which resynchronises a sweep that crosses data.
 *
 * Skipped: the trampoline page, [vsyscall], [vdso]/[vvar] (their fallbacks are harmless time
 * syscalls), stacks, and the loader's own two real syscall sites. Pages are made writable with
 * the raw syscall (the libc mprotect wrapper may sit on the very page being rewritten) and then
 * given back their protection. /proc/self/maps is read completely before anything changes,
 * since rewriting splits mappings.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <capstone/capstone.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

struct region {
	uintptr_t from, to;
	int prot;
	const uint8_t *eh_hdr; /* .eh_frame_hdr of the object mapping this region, if any */
};

/* ---- unwind tables --------------------------------------------------------------------- */

struct object_text {
	uintptr_t from, to; /* an executable PT_LOAD segment */
	const uint8_t *eh_hdr;
};

struct objects {
	struct object_text *v;
	size_t n, cap;
};

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct objects *o = data;
	const uint8_t *hdr = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			hdr = (const uint8_t *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (o->n == o->cap) {
			size_t cap = o->cap ? 2 * o->cap : 32;
			struct object_text *v = realloc(o->v, cap * sizeof *v);
			if (!v)
				return 1;
			o->v = v;
			o->cap = cap;
		}
		uintptr_t from = info->dlpi_addr + ph->p_vaddr;
		o->v[o->n++] = (struct object_text){from, from + ph->p_memsz, hdr};
	}
	return 0;
}

/* The .eh_frame_hdr search table: "version 1, eh_frame_ptr pcrel|sdata4, fde_count udata4,
 * table datarel|sdata4" is what every GNU toolchain emits; anything else is not used. */
static const int32_t *fde_table(const uint8_t *hdr, size_t *n)
{
	if (!hdr || hdr[0] != 1 || hdr[1] != 0x1b || hdr[2] != 0x03 || hdr[3] != 0x3b)
		return NULL;
	uint32_t count;
	memcpy(&count, hdr + 8, 4);
	*n = count;
	return (const int32_t *)(hdr + 12);
}

/* Start of the last function beginning at or before addr, or 0. */
static uintptr_t function_start(const uint8_t *hdr, uintptr_t addr)
{
	size_t n;
	const int32_t *t = fde_table(hdr, &n);
	if (!t || n == 0)
		return 0;
	size_t lo = 0, hi = n; /* first entry with start > addr */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if ((uintptr_t)(hdr + t[2 * mid]) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? 0 : (uintptr_t)(hdr + t[2 * (lo - 1)]);
}

/* ---- mappings -------------------------------------------------------------------------- */

static int skip_mapping(const char *name, uintptr_t from)
{
	if (from == 0)
		return 1;
	return strstr(name, "[vsyscall]") || strstr(name, "[vdso]") || strstr(name, "[vvar]") ||
	       strstr(name, "[stack");
}

static int read_regions(struct region **out, size_t *n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f) {
		perror("chfs-hook: /proc/self/maps");
		return -1;
	}
	size_t cap = 64, len = 0;
	struct region *r = malloc(cap * sizeof *r);
	char line[4096];
	while (r && fgets(line, sizeof line, f)) {
		unsigned long from, to;
		char perms[8] = "", name[4096] = "";
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095[^\n]", &from, &to, perms, name) < 3)
			continue;
		if (perms[2] != 'x' || skip_mapping(name, from))
			continue;
		if (len == cap) {
			struct region *g = realloc(r, 2 * cap * sizeof *r);
			if (!g) {
				free(r);
				r = NULL;
				break;
			}
			r = g;
			cap *= 2;
		}
		r[len++] = (struct region){from, to,
		                           (perms[0] == 'r' ? PROT_READ : 0) |
		                                   (perms[1] == 'w' ? PROT_WRITE : 0) | PROT_EXEC,
		                           NULL};
	}
	fclose(f);
	if (!r) {
		fputs("chfs-hook: out of memory reading /proc/self/maps\n", stderr);
		return -1;
	}
	*out = r;
	*n = len;
	return 0;
}

/* ---- rewriting ------------------------------------------------------------------------- */

static int is_own_site(uintptr_t a)
{
	return a == (uintptr_t)chfs_raw_syscall_site || a == (uintptr_t)chfs_sigreturn_site;
}

struct sweep {
	csh cs;
	cs_insn *insn;
	const struct region *r;
	uintptr_t start;     /* where the current sweep began (0: none) */
	const uint8_t *code; /* next byte to decode */
	size_t left;
	uint64_t addr;
	int writable;
	long rewritten;
};

static int make_writable(struct sweep *s)
{
	if (s->writable)
		return 0;
	long rc = chfs_raw_syscall(__NR_mprotect, (long)s->r->from, (long)(s->r->to - s->r->from),
	                           PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0);
	if (rc < 0)
		return -1;
	s->writable = 1;
	return 0;
}

/* Decode forward from the sweep position through `target`; rewrite it if it is a syscall. */
static void sweep_to(struct sweep *s, uintptr_t target)
{
	while (s->addr <= target && s->left > 0) {
		uint64_t at = s->addr;
		if (!cs_disasm_iter(s->cs, &s->code, &s->left, &s->addr, s->insn))
			break;
		if (at == target && s->insn->id == X86_INS_SYSCALL && s->insn->size == 2 &&
		    !is_own_site(at) && make_writable(s) == 0) {
			uint8_t *p = (uint8_t *)(uintptr_t)at;
			p[0] = 0xff; /* call *%rax */
			p[1] = 0xd0;
			s->rewritten++;
		}
	}
}

static long rewrite_region(csh cs, cs_insn *insn, const struct region *r)
{
	if (!(r->prot & PROT_READ) && chfs_raw_syscall(__NR_mprotect, (long)r->from, (long)(r->to - r->from),
	                                               PROT_READ | PROT_EXEC, 0, 0, 0) < 0)
		return 0;
	struct sweep s = {cs, insn, r, 0, NULL, 0, 0, 0, 0};
	const uint8_t *base = (const uint8_t *)r->from, *end = (const uint8_t *)r->to;
	for (const uint8_t *c = base; c + 1 < end; c++) {
		c = memmem(c, (size_t)(end - c), "\x0f\x05", 2);
		if (!c)
			break;
		uintptr_t cand = (uintptr_t)c;
		uintptr_t start = function_start(r->eh_hdr, cand);
		if (start < r->from || start > cand)
			start = r->from;
		if (s.start != start || s.addr > cand) { /* a new function: restart the sweep there */
			s.start = start;
			s.code = (const uint8_t *)start;
			s.left = r->to - start;
			s.addr = start;
		}
		sweep_to(&s, cand);
	}
	if (s.writable || !(r->prot & PROT_READ))
		chfs_raw_syscall(__NR_mprotect, (long)r->from, (long)(r->to - r->from), r->prot, 0, 0, 0);
	if (s.writable == 0 && s.rewritten == 0)
		return 0;
	return s.rewritten;
}

long chfs_rewrite_all(void)
{
	struct region *regions;
	size_t nregions;
	if (read_regions(&regions, &nregions) < 0)
		return -1;
	struct objects objs = {NULL, 0, 0};
	dl_iterate_phdr(collect_object, &objs);
	for (size_t i = 0; i < nregions; i++)
		for (size_t j = 0; j < objs.n; j++)
			if (regions[i].from < objs.v[j].to && objs.v[j].from < regions[i].to)
				regions[i].eh_hdr = objs.v[j].eh_hdr;
	free(objs.v);
	csh cs;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		fputs("chfs-hook: capstone cannot open an x86-64 disassembler\n", stderr);
		free(regions);
		return -1;
	}
	cs_option(cs, CS_OPT_SKIPDATA, CS_OPT_ON);
	cs_insn *insn = cs_malloc(cs);
	long total = 0;
	for (size_t i = 0; i < nregions; i++)
		total += rewrite_region(cs, insn, &regions[i]);
	cs_free(insn, 1);
	cs_close(&cs);
	free(regions);
	return total;
}
