/* guideline.h — the cost table `chfs-job bench` measures and `auto` reads (guideline.c). */
#ifndef CHFS_JOB_GUIDELINE_H
#define CHFS_JOB_GUIDELINE_H

#include "policy.h"

#include <stdbool.h>
#include <stddef.h>

/* What a job mostly does, hence which per-call figure prices it. */
enum cj_kind { CJ_K_SYSCALL, CJ_K_PROCS, CJ_K_COMM, CJ_K_N };
extern const char *const cj_kind_names[CJ_K_N];

/* Every figure is < 0 when the table does not have it. */
struct cj_guideline {
	double ratio[CJ_NMETHODS][CJ_K_N];   /* cost ratio to the bare program (micro-benchmark) */
	double startup_ms[CJ_NMETHODS];      /* fixed cost: the method around `true`, minus bare */
	double call_us[CJ_NMETHODS][CJ_K_N]; /* added cost of one call of the kind over bare */
	double expect[CJ_K_N];               /* calls a job of the kind is expected to make */
};

/* Read the CSV at path into g (figures it lacks left < 0). -errno if it cannot be read. */
int cj_guideline_read(const char *path, struct cj_guideline *g);
/* Estimated added wall time (ms) of method m for a job of kind k: start-up + expected path
 * calls x their cost (every job makes them) + for procs and comm, expected calls of the kind x
 * theirs; < 0 if the table lacks a figure. */
double cj_guideline_estimate_ms(const struct cj_guideline *g, enum cj_method m, enum cj_kind k);

#endif
