/*
 * trampoline.c — the page at virtual address 0 that every rewritten `call *%rax` lands in.
 *
 * %rax holds the syscall number (0..~470), so the call target is a byte inside a 512-byte nop
 * sled. The sled is made of 8-byte blocks "66 66 66 66 66 66 66 90": wherever the call lands in
 * a block, the bytes up to its 0x90 decode as one (prefixed) nop, so reaching the end takes at
 * most 64 instructions instead of 512 one-byte nops (the hot syscalls, read and write, have
 * the lowest numbers and so the longest way). The sled runs into a 3-instruction tail: `lea -0x80(%rsp),%rsp` (step over the red zone
 * of the interrupted leaf function), `movabs $chfs_gate_entry,%r11`, `jmp *%r11` (r11 is
 * clobbered by a real syscall anyway, so the application cannot expect it preserved). The page
 * is then made execute-only, so stray NULL reads still fault where the CPU has protection keys.
 *
 * Mapping page 0 needs vm.mmap_min_addr = 0; otherwise we print one clear line and exit.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SLED_BYTES 512 /* larger than the highest syscall number */

static long mmap_min_addr(void)
{
	FILE *f = fopen("/proc/sys/vm/mmap_min_addr", "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

int chfs_trampoline_setup(void)
{
	long min = mmap_min_addr();
	if (min != 0) {
		fprintf(stderr,
		        "chfs-hook: vm.mmap_min_addr is %ld but must be 0 for the syscall hook's trampoline "
		        "(as root: sysctl -w vm.mmap_min_addr=0)\n",
		        min);
		return -1;
	}
	long p = chfs_raw_syscall(__NR_mmap, 0, 4096, PROT_READ | PROT_WRITE,
	                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != 0) {
		fprintf(stderr, "chfs-hook: cannot map the trampoline page at address 0: %s\n",
		        p < 0 ? strerror((int)-p) : "kernel chose another address");
		if (p > 0)
			chfs_raw_syscall(__NR_munmap, p, 4096, 0, 0, 0, 0);
		return -1;
	}
	/* The compiler knows p == 0 here and would treat stores through it as undefined: launder
   * the value through an empty asm so it is just an address again. */
	__asm__("" : "+r"(p));
	volatile uint8_t *page = (volatile uint8_t *)(uintptr_t)p;
	for (int i = 0; i < SLED_BYTES; i++)
		page[i] = (i % 8 == 7) ? 0x90 : 0x66;
	static const uint8_t lea[] = {0x48, 0x8d, 0x64, 0x24, 0x80}; /* lea -0x80(%rsp),%rsp */
	int o = SLED_BYTES;
	for (size_t i = 0; i < sizeof lea; i++)
		page[o++] = lea[i];
	page[o++] = 0x49; /* movabs $imm64,%r11 */
	page[o++] = 0xbb;
	uint64_t target = (uint64_t)(uintptr_t)chfs_gate_entry;
	for (int i = 0; i < 8; i++)
		page[o++] = (uint8_t)(target >> (8 * i));
	page[o++] = 0x41; /* jmp *%r11 */
	page[o++] = 0xff;
	page[o++] = 0xe3;
	long rc = chfs_raw_syscall(__NR_mprotect, 0, 4096, PROT_EXEC, 0, 0, 0);
	if (rc < 0) {
		fprintf(stderr, "chfs-hook: cannot make the trampoline executable: %s\n", strerror((int)-rc));
		return -1;
	}
	return 0;
}
