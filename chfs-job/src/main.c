/* main.c — the chfs-job command line: load the policy (--policy, CHFS_JOB_POLICY or
 * ~/.chfs-job.yaml; none = an empty policy), pick the method (--method, the policy's, or auto),
 * refuse one that cannot run here with its reason, and run the program under it. Subcommands:
 * convert-policy, check-policy, explain (auto's pick without running), bench (the guideline). */
#define _GNU_SOURCE
#include "auto.h"
#include "decide.h"
#include "methods.h"
#include "policy.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
        "usage: chfs-job [-v] [--policy FILE] [--method M] [--guideline CSV] [--ptrace-plain] -- PROGRAM [ARGS...]\n"
        "       chfs-job convert-policy OLD      print the published-format policy OLD as YAML\n"
        "       chfs-job check-policy FILE       parse FILE, print it normalised (exit 2 if bad)\n"
        "       chfs-job explain [OPTIONS] -- PROGRAM   print auto's pick and why, run nothing\n"
        "       chfs-job bench [--quick] [--out DIR]    measure the methods, write the guideline CSV\n"
        "Run PROGRAM under the access method its policy calls for: path mappings and denials,\n"
        "CHFS mount points, disk/network bandwidth limits, fork tracing (see chfs-job(1): README.md).\n"
        "  -p, --policy FILE    YAML policy (default: $CHFS_JOB_POLICY, else ~/.chfs-job.yaml if it exists)\n"
        "  -m, --method M       auto|rewrite|seccomp|ptrace|fuse|none (default: the policy's, else auto)\n"
        "  -g, --guideline CSV  auto's cost table (default: $CHFS_JOB_GUIDELINE, else the installed one)\n"
        "      --ptrace-plain   ptrace without the seccomp accelerator (every syscall stops)\n"
        "  -v, --verbose        say which method runs and why (-vv: more)\n"
        "  -h, --help           this text\n"
        "Exit status: PROGRAM's (128+N if killed by signal N); 2 bad usage or policy; 3 method refused.\n";

static int load_policy(const char *file, struct cj_policy *p)
{
	char err[1024];
	char home[4200];
	if (!file)
		file = getenv("CHFS_JOB_POLICY");
	if ((!file || !*file) && getenv("HOME")) {
		snprintf(home, sizeof(home), "%s/.chfs-job.yaml", getenv("HOME"));
		if (access(home, F_OK) == 0)
			file = home;
	}
	if (!file || !*file)
		return cj_policy_parse("(no policy)", "", p, err, sizeof(err));
	if (cj_policy_load(file, p, err, sizeof(err)) < 0) {
		fprintf(stderr, "chfs-job: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

static int bench(int argc, char **argv)
{
	char exe[4096], script[4200];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return 2;
	exe[n] = '\0';
	snprintf(script, sizeof(script), "%s/../libexec/chfs-job/chfs-job-bench", dirname(exe));
	argv[0] = script;
	execv(script, argv);
	fprintf(stderr, "chfs-job: bench: %s: %s\n", script, strerror(errno));
	(void)argc;
	return 2;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "convert-policy") == 0) {
		if (argc != 3) {
			fprintf(stderr, "chfs-job: convert-policy needs one file (try --help)\n");
			return 2;
		}
		char err[1024];
		if (cj_policy_convert(argv[2], stdout, err, sizeof(err)) < 0) {
			fprintf(stderr, "chfs-job: %s\n", err);
			return 2;
		}
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "check-policy") == 0) {
		struct cj_policy p;
		if (argc != 3) {
			fprintf(stderr, "chfs-job: check-policy needs one file (try --help)\n");
			return 2;
		}
		if (load_policy(argv[2], &p) < 0)
			return 2;
		cj_policy_write(stdout, &p);
		cj_policy_free(&p);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "bench") == 0)
		return bench(argc - 1, argv + 1);
	bool explain = argc >= 2 && strcmp(argv[1], "explain") == 0;
	if (explain) {
		argv++;
		argc--;
	}
	static const struct option longopts[] = {{"policy", required_argument, NULL, 'p'},
	                                         {"method", required_argument, NULL, 'm'},
	                                         {"guideline", required_argument, NULL, 'g'},
	                                         {"ptrace-plain", no_argument, NULL, 'P'},
	                                         {"verbose", no_argument, NULL, 'v'},
	                                         {"help", no_argument, NULL, 'h'},
	                                         {NULL, 0, NULL, 0}};
	const char *policy_file = NULL, *method_arg = NULL, *guideline = NULL;
	struct cj_opts o = {0};
	int c;
	while ((c = getopt_long(argc, argv, "+p:m:g:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': policy_file = optarg; break;
		case 'm': method_arg = optarg; break;
		case 'g': guideline = optarg; break;
		case 'P': o.ptrace_plain = true; break;
		case 'v': o.verbose++; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: fprintf(stderr, "chfs-job: bad usage (try --help)\n"); return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "chfs-job: no program given (try --help)\n");
		return 2;
	}
	char **prog = argv + optind;
	struct cj_policy p;
	if (load_policy(policy_file, &p) < 0)
		return 2;
	int m = p.method;
	if (method_arg && (m = cj_method_parse(method_arg)) < 0) {
		fprintf(stderr,
		        "chfs-job: --method: '%s' is not one of auto, rewrite, seccomp, ptrace, fuse, none\n",
		        method_arg);
		return 2;
	}
	char why[2048];
	if (m == CJ_AUTO || explain) {
		int pick = m == CJ_AUTO ? cj_auto_pick(&p, prog, guideline, why, sizeof(why)) : m;
		if (pick < 0) {
			fprintf(stderr, "chfs-job: %s\n", why);
			return 3;
		}
		if (explain) {
			if (m == CJ_AUTO)
				printf("%s\n", why);
			else
				printf("%s (given)\n", cj_method_name(m));
			return 0;
		}
		if (o.verbose)
			fprintf(stderr, "chfs-job: %s\n", why);
		m = pick;
	} else {
		struct cj_prog *pi = calloc(1, sizeof(*pi));
		if (pi && cj_inspect(prog[0], pi) < 0)
			pi->found = false;
		const char *w = cj_method_unusable_for((enum cj_method)m, &p, pi, why, sizeof(why));
		free(pi);
		if (w && m != CJ_NONE) {
			fprintf(stderr, "chfs-job: %s refused: %s\n", cj_method_name(m), w);
			return 3;
		}
		if (o.verbose)
			fprintf(stderr, "chfs-job: %s (given)\n", cj_method_name(m));
	}
	if (cj_decide_prepare(&p) < 0)
		return 2;
	int rc;
	if (m == CJ_SECCOMP)
		rc = cj_run_seccomp(&p, prog, &o);
	else if (m == CJ_PTRACE)
		rc = cj_run_ptrace(&p, prog, &o);
	else
		rc = cj_run_exec((enum cj_method)m, &p, prog, &o);
	cj_policy_free(&p);
	if (rc < 0) {
		fprintf(stderr, "chfs-job: %s: %s\n", cj_method_name(m), strerror(-rc));
		return 3;
	}
	return rc;
}
