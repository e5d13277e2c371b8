/* inspect.h — what `auto` learns about a program before it runs: ELF class and machine, static
 * or dynamic (PT_INTERP), setuid/setgid, and whether an MPI library is among its DT_NEEDED;
 * a script (#!) is inspected through its interpreter. */
#ifndef CHFS_JOB_INSPECT_H
#define CHFS_JOB_INSPECT_H

#include <stdbool.h>
#include <stddef.h>

struct cj_prog {
	char path[4096];
	bool found, elf, x86_64, dynamic, setuid, mpi, script;
	char interp[256]; /* "#!" interpreter, if a script */
};

/* Inspect argv0 (searched in PATH like execvp). Returns 0, or -errno if not found/readable. */
int cj_inspect(const char *argv0, struct cj_prog *out);

#endif
