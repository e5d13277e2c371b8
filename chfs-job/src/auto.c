/* auto.c — choosing a method (see auto.h).
 *
 * The job's kind comes from its program: MPI library linked -> "comm" (communication-heavy);
 * a shell, make or a script -> "procs" (many processes); anything else -> "syscall". The
 * guideline CSV (written by `chfs-job bench`) has one row per method with the measured cost
 * ratio against the bare program for each kind:
 *     method,syscall,procs,comm
 * Lines starting with '#' are comments (the shipped file names the machine and date it was
 * measured on). auto takes the usable method with the lowest ratio in the kind's column; a
 * method absent from the table is used only if nothing in it is usable. */
#define _GNU_SOURCE
#include "auto.h"
#include "methods.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum kind { K_SYSCALL, K_PROCS, K_COMM, K_N };
static const char *const kind_names[K_N] = {"syscall", "procs", "comm"};

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

static enum kind job_kind(char **argv, const struct cj_prog *prog)
{
	if (prog->mpi)
		return K_COMM;
	char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	static const char *const many[] = {"sh",    "bash",     "dash", "zsh", "make",
	                                   "xargs", "parallel", "rake", NULL};
	for (int i = 0; many[i]; i++)
		if (strcmp(base, many[i]) == 0)
			return K_PROCS;
	if (prog->script) {
		const char *ib = strrchr(prog->interp, '/');
		ib = ib ? ib + 1 : prog->interp;
		for (int i = 0; many[i]; i++)
			if (strcmp(ib, many[i]) == 0)
				return K_PROCS;
	}
	return K_SYSCALL;
}

int cj_auto_pick(const struct cj_policy *p, char **argv, const char *guideline, char *reason, size_t len)
{
	struct cj_prog *prog = calloc(1, sizeof(*prog));
	if (!prog)
		return -ENOMEM;
	int rc = cj_inspect(argv[0], prog);
	if (rc < 0) {
		snprintf(reason, len, "cannot inspect %s: %s", argv[0], strerror(-rc));
		free(prog);
		return rc;
	}
	enum kind k = job_kind(argv, prog);
	char gbuf[4200];
	if (!guideline)
		guideline = cj_default_guideline(gbuf, sizeof(gbuf));
	double cost[CJ_NMETHODS];
	for (int m = 0; m < CJ_NMETHODS; m++)
		cost[m] = -1;
	FILE *f = guideline ? fopen(guideline, "r") : NULL;
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char name[32];
		double v[K_N];
		if (line[0] == '#' || sscanf(line, "%31[^,],%lf,%lf,%lf", name, &v[0], &v[1], &v[2]) != 4)
			continue;
		int m = cj_method_parse(name);
		if (m > CJ_AUTO)
			cost[m] = v[k];
	}
	if (f)
		fclose(f);
	int best = -1;
	char why[256], skipped[1024] = "";
	static const enum cj_method order[] = {CJ_NONE, CJ_REWRITE, CJ_SECCOMP, CJ_FUSE, CJ_PTRACE};
	bool usable[CJ_NMETHODS] = {false};
	for (int i = 0; i < 5; i++) {
		enum cj_method m = order[i];
		usable[m] = !cj_method_unusable_for(m, p, prog, why, sizeof(why));
		if (!usable[m] && m != CJ_NONE)
			snprintf(skipped + strlen(skipped), sizeof(skipped) - strlen(skipped), "; not %s: %s",
			         cj_method_name(m), why);
	}
	/* the cheapest measured usable method; failing that, the first usable one in order */
	for (int pass = 0; pass < 2 && best < 0; pass++)
		for (int i = 0; i < 5; i++) {
			enum cj_method m = order[i];
			if (!usable[m] || (pass == 0 && cost[m] < 0))
				continue;
			if (best < 0 || (pass == 0 && cost[m] < cost[best]))
				best = (int)m;
		}
	const char *linkage = !prog->elf ? "not ELF" : prog->dynamic ? "dynamic" : "static";
	if (best < 0) {
		snprintf(reason, len, "no method can run %s (%s%s)%s", prog->path, linkage,
		         prog->mpi ? ", MPI" : "", skipped);
		free(prog);
		return -ENOEXEC;
	}
	if (cost[best] >= 0)
		snprintf(reason, len, "auto: %s for %s (%s%s%s, kind %s): cost %.2fx of bare in %s%s",
		         cj_method_name(best), prog->path, linkage, prog->mpi ? ", MPI" : "",
		         prog->script ? ", script" : "", kind_names[k], cost[best], guideline, skipped);
	else
		snprintf(reason, len, "auto: %s for %s (%s, kind %s): no usable method measured in %s%s",
		         cj_method_name(best), prog->path, linkage, kind_names[k],
		         guideline ? guideline : "(no guideline)", skipped);
	free(prog);
	return best;
}
