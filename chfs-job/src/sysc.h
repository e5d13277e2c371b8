/* sysc.h — the x86-64 system calls chfs-job intercepts, with where their paths and sizes are.
 * Both the seccomp supervisor and the ptrace tracer read this one table (sysc.c) and build their
 * filters from it, so the two methods trap exactly the same calls for the same policy. */
#ifndef CHFS_JOB_SYSC_H
#define CHFS_JOB_SYSC_H

#include <stdbool.h>

enum cj_sysc_kind {
	CJ_SK_OPEN,     /* open/openat/creat/openat2: returns a descriptor */
	CJ_SK_STAT,     /* writes a struct to a buffer argument */
	CJ_SK_READLINK, /* writes the link text to a buffer argument */
	CJ_SK_SCALAR,   /* every other argument is a number (or a second path): can be replayed */
	CJ_SK_OTHER,    /* cannot be replayed by the seccomp supervisor (execve, chdir, xattr, ...) */
	CJ_SK_IO,       /* read/write family: counted against io_limit */
	CJ_SK_DIRENT,   /* getdents64: denied names are removed from what it returns */
};

struct cj_sysc {
	int nr;
	const char *name;
	enum cj_sysc_kind kind;
	signed char dirfd[2]; /* argument index of the directory fd of path 0/1, -1 = AT_FDCWD */
	signed char path[2];  /* argument index of path 0/1, -1 = none */
	signed char nofollow; /* argument index of the AT_ flags (or -2: always nofollow), -1 = follows */
	signed char buf;      /* CJ_SK_STAT/READLINK: output buffer argument */
	signed char fdarg;    /* CJ_SK_IO: the descriptor argument */
	signed char iov;      /* CJ_SK_IO: 1 if args[1..2] are iovec/count, 2 if a msghdr at args[1] */
};

extern const struct cj_sysc cj_sysc_table[];
extern const int cj_sysc_count;
/* The entry for nr, or NULL if chfs-job never intercepts it. */
const struct cj_sysc *cj_sysc_find(int nr);

#endif
