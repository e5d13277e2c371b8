/*
 * log.c — see log.h. A single FILE* protected by stdio's own locking; each message is written
 * with one fprintf so lines from several threads never interleave.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int chfs_log_level = LOG_NOTICE;
static const char *log_prog = "chfs";
static FILE *log_file;

static const char *const prio_names[] = {"emerg",   "alert",  "crit", "err",
                                         "warning", "notice", "info", "debug"};

void chfs_log_set_prog(const char *prog) { log_prog = prog; }

int chfs_log_open(const char *path)
{
	FILE *f = fopen(path, "a");
	if (!f)
		return -errno;
	setvbuf(f, NULL, _IOLBF, 0);
	log_file = f;
	return 0;
}

int chfs_log_parse_priority(const char *name)
{
	for (int i = 0; i < 8; i++)
		if (strcmp(name, prio_names[i]) == 0)
			return i;
	if (strcmp(name, "error") == 0)
		return LOG_ERR;
	if (strcmp(name, "warn") == 0)
		return LOG_WARNING;
	return -1;
}

void chfs_log_msg(int prio, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (prio < 0 || prio > 7)
		prio = LOG_ERR;
	fprintf(log_file ? log_file : stderr, "%s: %s: %s\n", log_prog, prio_names[prio], msg);
}
