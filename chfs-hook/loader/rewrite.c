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
#include "rewrite_cache.h"

#include <capstone/capstone.h>
#include <dlfcn.h>
#include <stdbool.h>
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
	int has_key;           /* a file mapping: its sites may be cached (rewrite_cache.c) */
	struct chfs_rcache_key key;
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
		unsigned long from, to, off = 0, ino = 0;
		unsigned maj = 0, min = 0;
		char perms[8] = "", name[4096] = "";
		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %4095[^\n]", &from, &to, perms, &off, &maj, &min,
		           &ino, name) < 3)
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
		struct region *g = &r[len++];
		*g = (struct region){
		        from,
		        to,
		        (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | PROT_EXEC,
		        NULL,
		        0,
		        {0}};
		/* Writable code may change before we look (JIT): only read-only file text is cached. */
		g->has_key =
		        perms[1] != 'w' && chfs_rcache_key(name, maj, min, ino, off, to - from, &g->key) == 0;
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

/* Capstone, loaded and opened on the first mapping that needs a scan — none when every mapping
 * is in the rewrite cache: just loading the library (relocating ~3 MB) cost ~1 ms per process,
 * a third of what a hooked process that never touches CHFS may pay. */
#define CS_STR2(x) #x
#define CS_STR(x) CS_STR2(x)
static struct {
	cs_err (*open)(cs_arch, cs_mode, csh *);
	cs_err (*option)(csh, cs_opt_type, size_t);
	cs_insn *(*malloc)(csh);
	bool (*iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
	void (*free)(cs_insn *, size_t);
	cs_err (*close)(csh *);
} cs_fn;

static int capstone_load(void)
{
	void *h = dlopen("libcapstone.so." CS_STR(CS_API_MAJOR), RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libcapstone.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	*(void **)&cs_fn.open = dlsym(h, "cs_open");
	*(void **)&cs_fn.option = dlsym(h, "cs_option");
	*(void **)&cs_fn.malloc = dlsym(h, "cs_malloc");
	*(void **)&cs_fn.iter = dlsym(h, "cs_disasm_iter");
	*(void **)&cs_fn.free = dlsym(h, "cs_free");
	*(void **)&cs_fn.close = dlsym(h, "cs_close");
	return cs_fn.open && cs_fn.option && cs_fn.malloc && cs_fn.iter && cs_fn.free && cs_fn.close ? 0 : -1;
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
	uint32_t *sites; /* offsets rewritten (for the cache); NULL after an allocation failure */
	size_t cap;
	int sites_lost;
};

static void note_site(struct sweep *s, uintptr_t at)
{
	if ((size_t)s->rewritten >= s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		uint32_t *v = realloc(s->sites, cap * sizeof *v);
		if (!v) {
			s->sites_lost = 1;
			return;
		}
		s->sites = v;
		s->cap = cap;
	}
	s->sites[s->rewritten] = (uint32_t)(at - s->r->from);
}

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
		if (!cs_fn.iter(s->cs, &s->code, &s->left, &s->addr, s->insn))
			break;
		if (at != target || s->insn->id != X86_INS_SYSCALL || s->insn->size != 2 || is_own_site(at))
			continue;
		if (make_writable(s) < 0) {
			s->sites_lost = 1; /* a site left as it is: do not record this scan */
		} else {
			uint8_t *p = (uint8_t *)(uintptr_t)at;
			p[0] = 0xff; /* call *%rax */
			p[1] = 0xd0;
			if (!s->sites_lost)
				note_site(s, at);
			s->rewritten++;
		}
	}
}

struct disasm {
	int open; /* 1 open, -1 failed */
	csh cs;
	cs_insn *insn;
};

static int disasm_open(struct disasm *d)
{
	if (d->open == 0) {
		d->open = -1;
		if (capstone_load() == 0 && cs_fn.open(CS_ARCH_X86, CS_MODE_64, &d->cs) == CS_ERR_OK) {
			cs_fn.option(d->cs, CS_OPT_SKIPDATA, CS_OPT_ON);
			if ((d->insn = cs_fn.malloc(d->cs)))
				d->open = 1;
			else
				cs_fn.close(&d->cs);
		}
		if (d->open < 0)
			fputs("chfs-hook: cannot load capstone (libcapstone.so." CS_STR(
			              CS_API_MAJOR) ") for an x86-64 disassembler\n",
			      stderr);
	}
	return d->open > 0 ? 0 : -1;
}

/* Rewrite the cached sites of r if they are all still `syscall` instructions; -1 if not. */
static long apply_cached(const struct region *r, const uint32_t *sites, long n)
{
	for (long i = 0; i < n; i++) {
		const uint8_t *p = (const uint8_t *)(r->from + sites[i]);
		if (p[0] != 0x0f || p[1] != 0x05 || is_own_site((uintptr_t)p))
			return -1;
	}
	if (n == 0)
		return 0;
	if (chfs_raw_syscall(__NR_mprotect, (long)r->from, (long)(r->to - r->from),
	                     PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0) < 0)
		return 0;
	for (long i = 0; i < n; i++) {
		uint8_t *p = (uint8_t *)(r->from + sites[i]);
		p[0] = 0xff; /* call *%rax */
		p[1] = 0xd0;
	}
	return n;
}

/* Returns the number of sites rewritten, or -1 if capstone is unusable. */
static long rewrite_region(struct disasm *d, const struct region *r)
{
	if (!(r->prot & PROT_READ) && chfs_raw_syscall(__NR_mprotect, (long)r->from, (long)(r->to - r->from),
	                                               PROT_READ | PROT_EXEC, 0, 0, 0) < 0)
		return 0;
	const uint8_t *base = (const uint8_t *)r->from, *end = (const uint8_t *)r->to;
	uint32_t *cached = NULL;
	uint64_t hash = 0;
	long n = r->has_key ? chfs_rcache_lookup(&r->key, &cached, &hash) : -1;
	if (n >= 0 && chfs_rcache_site_hash(base, r->to - r->from, cached, n) != hash)
		n = -1; /* the bytes around the sites are not the ones recorded */
	if (n >= 0 && (n = apply_cached(r, cached, n)) >= 0) {
		free(cached);
		if (n > 0 || !(r->prot & PROT_READ))
			chfs_raw_syscall(__NR_mprotect, (long)r->from, (long)(r->to - r->from), r->prot, 0, 0,
			                 0);
		return n;
	}
	free(cached);
	if (disasm_open(d) < 0)
		return -1;
	struct sweep s = {d->cs, d->insn, r, 0, NULL, 0, 0, 0, 0, NULL, 0, 0};
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
	if (r->has_key && !s.sites_lost)
		chfs_rcache_store(&r->key, chfs_rcache_site_hash(base, r->to - r->from, s.sites, s.rewritten),
		                  s.sites, s.rewritten);
	free(s.sites);
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
	struct disasm d = {0};
	long total = 0;
	for (size_t i = 0; i < nregions; i++) {
		long n = rewrite_region(&d, &regions[i]);
		if (n < 0) {
			free(regions);
			return -1;
		}
		total += n;
	}
	if (d.open > 0) {
		cs_fn.free(d.insn, 1);
		cs_fn.close(&d.cs);
	}
	free(regions);
	return total;
}
