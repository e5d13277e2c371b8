/* guideline.c — reading the guideline table (see guideline.h).
 *
 * The table is CSV; its header names the columns, so older tables with fewer columns still read:
 *     method,syscall,procs,comm,startup_ms,syscall_us,procs_us,comm_us
 *     seccomp,7.35,5.80,0.71,3.1,9.0,410,0
 *     ...
 *     expected_calls,2000,50,100000
 * syscall/procs/comm are ratios to the bare program of the three micro-benchmarks (a trapped
 * open/close pair, a 64-process fork fan-out, a socket ping-pong). startup_ms is the method's fixed
 * cost (chfs-job -m M -- true, less bare true); X_us the added cost of one call of kind X over
 * bare (an open/close pair, one process of the fan-out, one round trip). The `expected_calls` row
 * says how many such calls a job of each kind is assumed to make. Every job makes path calls
 * (its libraries, its files; MPI's start-up alone makes hundreds), so the estimate of a procs
 * or comm job counts the syscall term too. Lines starting with '#' are comments; an empty field
 * is a figure not measured. */
#define _GNU_SOURCE
#include "guideline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cj_kind_names[CJ_K_N] = {"syscall", "procs", "comm"};

enum col { C_RATIO, C_STARTUP = C_RATIO + CJ_K_N, C_CALL, C_N = C_CALL + CJ_K_N, C_OTHER = C_N };

static int column_of(const char *name)
{
	for (int k = 0; k < CJ_K_N; k++) {
		if (strcmp(name, cj_kind_names[k]) == 0)
			return C_RATIO + k;
		size_t n = strlen(cj_kind_names[k]);
		if (strncmp(name, cj_kind_names[k], n) == 0 && strcmp(name + n, "_us") == 0)
			return C_CALL + k;
	}
	return strcmp(name, "startup_ms") == 0 ? C_STARTUP : C_OTHER;
}

/* One field as a figure; empty or malformed -> -1 (not measured). */
static double figure(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	return end == s || (*end && *end != '\n' && *end != '\r') || v < 0 ? -1 : v;
}

static void put(struct cj_guideline *g, int row, int col, double v)
{
	if (row == CJ_NMETHODS) { /* expected_calls */
		if (col < C_STARTUP)
			g->expect[col - C_RATIO] = v;
	} else if (col < C_STARTUP)
		g->ratio[row][col - C_RATIO] = v;
	else if (col == C_STARTUP)
		g->startup_ms[row] = v;
	else if (col < C_N)
		g->call_us[row][col - C_CALL] = v;
}

int cj_guideline_read(const char *path, struct cj_guideline *g)
{
	for (int m = 0; m < CJ_NMETHODS; m++) {
		g->startup_ms[m] = -1;
		for (int k = 0; k < CJ_K_N; k++)
			g->ratio[m][k] = g->call_us[m][k] = -1;
	}
	for (int k = 0; k < CJ_K_N; k++)
		g->expect[k] = -1;
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f)
		return path ? -errno : -ENOENT;
	/* before a header: the original four columns */
	int cols[16] = {C_OTHER, C_RATIO, C_RATIO + 1, C_RATIO + 2}, ncols = 4;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#')
			continue;
		char *rest = line, *name = strsep(&rest, ",");
		bool header = strcmp(name, "method") == 0;
		int row = header                                ? -1
		          : strcmp(name, "expected_calls") == 0 ? CJ_NMETHODS
		                                                : cj_method_parse(name);
		if (header)
			ncols = 1;
		for (int c = 1; rest && c < 16; c++) {
			char *field = strsep(&rest, ",");
			if (header) {
				field[strcspn(field, "\r\n")] = '\0';
				cols[ncols++] = column_of(field);
			} else if (row > CJ_AUTO && c < ncols && cols[c] != C_OTHER)
				put(g, row, cols[c], figure(field));
		}
	}
	fclose(f);
	return 0;
}

double cj_guideline_estimate_ms(const struct cj_guideline *g, enum cj_method m, enum cj_kind k)
{
	const enum cj_kind ks[2] = {CJ_K_SYSCALL, k};
	double ms = g->startup_ms[m];
	for (int i = 0; i < (k == CJ_K_SYSCALL ? 1 : 2) && ms >= 0; i++)
		ms = g->call_us[m][ks[i]] < 0 || g->expect[ks[i]] < 0
		             ? -1
		             : ms + g->expect[ks[i]] * g->call_us[m][ks[i]] / 1000.0;
	return ms;
}
