/* auto.c — choosing a method (see auto.h).
 *
 * The job's kind comes from its program: MPI library linked -> "comm" (communication-heavy);
 * a shell, make or a script -> "procs" (many processes); anything else -> "syscall". The
 * guideline table (guideline.c, written by `chfs-job bench`) prices each method for each kind.
 * auto estimates each usable method's added wall time as its fixed start-up plus the calls a job
 * is expected to make times the method's added cost per call (path calls for every job, and
 * processes or round trips for a procs or comm job), and takes the smallest: a ratio alone
 * would pick a method that is cheap per call but slow to start for a job that makes few trapped
 * calls (a static writer whose writes no method traps). A table without those figures (the
 * original method,syscall,procs,comm) is read as before: the lowest ratio in the kind's column.
 * A method absent from the table is used only if nothing in it is usable. */
#define _GNU_SOURCE
#include "auto.h"
#include "guideline.h"
#include "methods.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cj_method_unusable_for(enum cj_method m, const struct cj_policy *p, const struct cj_prog *prog,
                                   char *why, size_t len)
{
	const char *w = cj_method_unusable(m, p, why, len);
	if (w || !prog || !prog->found)
		return w;
	if ((m == CJ_REWRITE || m == CJ_SECCOMP || m == CJ_PTRACE) && prog->elf && !prog->x86_64)
		return snprintf(why, len, "%s needs an x86-64 program (%s is not)", cj_method_name(m),
		                prog->path),
		       why;
	if (m == CJ_REWRITE && prog->elf && !prog->dynamic)
		return snprintf(why, len, "rewrite needs a dynamically linked program (%s is static)",
		                prog->path),
		       why;
	if ((m == CJ_REWRITE || m == CJ_SECCOMP || m == CJ_PTRACE) && prog->setuid)
		return snprintf(why, len, "%s would drop the set-user-ID bit of %s", cj_method_name(m),
		                prog->path),
		       why;
	return NULL;
}

const char *cj_default_guideline(char *buf, size_t len)
{
	const char *env = getenv("CHFS_JOB_GUIDELINE");
	if (env && *env)
		return env;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return NULL;
	exe[n] = '\0';
	snprintf(buf, len, "%s/../share/chfs-job/guideline.csv", dirname(exe));
	return buf;
}

static enum cj_kind job_kind(char **argv, const struct cj_prog *prog)
{
	if (prog->mpi)
		return CJ_K_COMM;
	char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	static const char *const many[] = {"sh",    "bash",     "dash", "zsh", "make",
	                                   "xargs", "parallel", "rake", NULL};
	for (int i = 0; many[i]; i++)
		if (strcmp(base, many[i]) == 0)
			return CJ_K_PROCS;
	if (prog->script) {
		const char *ib = strrchr(prog->interp, '/');
		ib = ib ? ib + 1 : prog->interp;
		for (int i = 0; many[i]; i++)
			if (strcmp(ib, many[i]) == 0)
				return CJ_K_PROCS;
	}
	return CJ_K_SYSCALL;
}

#define ORDER_N 5
/* the order ties and the no-figure fallback go by */
static const enum cj_method order[ORDER_N] = {CJ_NONE, CJ_REWRITE, CJ_SECCOMP, CJ_FUSE, CJ_PTRACE};

/* The usable method with the lowest figure (cost[m] < 0: no figure), or -1. */
static int cheapest(const bool *usable, const double *cost)
{
	int best = -1;
	for (int i = 0; i < ORDER_N; i++) {
		enum cj_method m = order[i];
		if (usable[m] && cost[m] >= 0 && (best < 0 || cost[m] < cost[best]))
			best = (int)m;
	}
	return best;
}

#define APPEND(buf, ...) snprintf((buf) + strlen(buf), sizeof(buf) - strlen(buf), __VA_ARGS__)

/* The usable method g prices lowest: by the estimates for kind priced, else by the ratios for
 * kind k (older tables), else the first in order; -1 if none is usable. figs: the figures it was
 * chosen by. */
static int choose(const struct cj_guideline *g, enum cj_kind k, enum cj_kind priced, const bool *usable,
                  char *figs, size_t flen)
{
	double est[CJ_NMETHODS], ratio[CJ_NMETHODS];
	for (int m = 0; m < CJ_NMETHODS; m++) {
		est[m] = cj_guideline_estimate_ms(g, (enum cj_method)m, priced);
		ratio[m] = g->ratio[m][k];
	}
	int best = cheapest(usable, est);
	figs[0] = '\0';
	if (best >= 0) {
		size_t n = 0;
		for (int i = 0; i < ORDER_N && n < flen; i++) {
			enum cj_method m = order[i];
			if (!usable[m] || est[m] < 0)
				continue;
			n += (size_t)snprintf(figs + n, flen - n,
			                      "%s%s %.1f ms = start-up %.1f + %.0f x %.2f us", n ? "; " : "",
			                      cj_method_name(m), est[m], g->startup_ms[m],
			                      g->expect[CJ_K_SYSCALL], g->call_us[m][CJ_K_SYSCALL]);
			if (priced != CJ_K_SYSCALL && n < flen)
				n += (size_t)snprintf(figs + n, flen - n, " + %.0f x %.2f us",
				                      g->expect[priced], g->call_us[m][priced]);
		}
		return best;
	}
	best = cheapest(usable, ratio);
	if (best >= 0)
		snprintf(figs, flen, "cost %.2fx of bare (no start-up or per-call figures: by ratio)",
		         ratio[best]);
	for (int i = 0; i < ORDER_N && best < 0; i++)
		if (usable[order[i]])
			best = (int)order[i];
	return best;
}

int cj_auto_pick(const struct cj_policy *p, char **argv, const char *guideline, char *reason, size_t len)
{
	struct cj_prog *prog = calloc(1, sizeof(*prog));
	struct cj_guideline *g = calloc(1, sizeof(*g));
	int rc = prog && g ? cj_inspect(argv[0], prog) : -ENOMEM;
	if (rc < 0) {
		snprintf(reason, len, "cannot inspect %s: %s", argv[0], strerror(-rc));
		free(prog);
		free(g);
		return rc;
	}
	enum cj_kind k = job_kind(argv, prog);
	char gbuf[4200];
	if (!guideline)
		guideline = cj_default_guideline(gbuf, sizeof(gbuf));
	cj_guideline_read(guideline, g); /* unreadable: no figures, the fallback order decides */
	char why[256], skipped[1024] = "", figs[1024];
	bool usable[CJ_NMETHODS] = {false};
	for (int i = 0; i < ORDER_N; i++) {
		enum cj_method m = order[i];
		usable[m] = !cj_method_unusable_for(m, p, prog, why, sizeof(why));
		if (!usable[m] && m != CJ_NONE)
			APPEND(skipped, "; not %s: %s", cj_method_name(m), why);
	}
	/* round trips are trapped only to hold them to io_limit.net: without it they cost no method
	 * anything and a comm job is priced by its path calls alone */
	enum cj_kind priced = k == CJ_K_COMM && !p->limit[CJ_NET] ? CJ_K_SYSCALL : k;
	int best = choose(g, k, priced, usable, figs, sizeof(figs));
	const char *linkage = !prog->elf ? "not ELF" : prog->dynamic ? "dynamic" : "static";
	if (best < 0)
		snprintf(reason, len, "no method can run %s (%s%s)%s", prog->path, linkage,
		         prog->mpi ? ", MPI" : "", skipped);
	else if (figs[0])
		snprintf(reason, len, "auto: %s for %s (%s%s%s, kind %s%s): %s in %s%s", cj_method_name(best),
		         prog->path, linkage, prog->mpi ? ", MPI" : "", prog->script ? ", script" : "",
		         cj_kind_names[k],
		         priced != k ? ", round trips not trapped without io_limit.net" : "", figs, guideline,
		         skipped);
	else
		snprintf(reason, len, "auto: %s for %s (%s, kind %s): no usable method measured in %s%s",
		         cj_method_name(best), prog->path, linkage, cj_kind_names[k],
		         guideline ? guideline : "(no guideline)", skipped);
	free(prog);
	free(g);
	return best < 0 ? -ENOEXEC : best;
}
