/* methods.h — the interception methods chfs-job can run a program under, one file each:
 * method_seccomp.c (user-notification supervisor), method_ptrace.c (tracer), method_exec.c
 * (rewrite = chfs-run, fuse = chfuse mount, none). Each returns the program's exit status
 * (128+signal if killed) or a negative errno if it could not start, with a one-line message. */
#ifndef CHFS_JOB_METHODS_H
#define CHFS_JOB_METHODS_H

#include "policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cj_opts {
	int verbose;
	bool ptrace_plain; /* ptrace without the seccomp accelerator (measurement, or no seccomp) */
};

/* Why method m cannot run p here, or NULL if it can (used by auto and by an explicit method). */
const char *cj_method_unusable(enum cj_method m, const struct cj_policy *p, char *why, size_t len);

int cj_run_seccomp(struct cj_policy *p, char **argv, const struct cj_opts *o);
int cj_run_ptrace(struct cj_policy *p, char **argv, const struct cj_opts *o);
int cj_run_exec(enum cj_method m, struct cj_policy *p, char **argv, const struct cj_opts *o);

/* Exit status of a waited-for process as a shell reports it. */
int cj_wait_status(int status);
/* SIGINT, SIGTERM, SIGHUP, SIGQUIT sent to us go to pid (the program) instead. */
void cj_forward_signals(pid_t pid);

#endif
