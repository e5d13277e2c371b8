/* loader.h — the loader's modules (private to libchfs-hook-loader.so). */
#ifndef CHFS_HOOK_LOADER_H
#define CHFS_HOOK_LOADER_H
#include "gate.h"
#include <stddef.h>

/* trampoline.c: map the sled at VA 0; -1 after printing why. */
int chfs_trampoline_setup(void);
/* rewrite.c: rewrite every `syscall` in the executable mappings; returns the number of sites
 * rewritten, or -1 after printing why. */
long chfs_rewrite_all(void);
/* loader.c: tell the program's libc the process is multi-threaded (the hook's threads). */
void chfs_loader_not_single_threaded(void);
#endif
