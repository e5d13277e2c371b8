/*
 * log.h — one-line logging shared by chfsd, libchfs and the tools.
 *
 * Messages go to stderr (or the file given to chfs_log_open) as "prog: level: message". The
 * threshold is a syslog priority (CHFS_LOG_PRIORITY / chfsd -L); messages above it are dropped
 * before formatting, so debug logging costs one comparison when disabled.
 */
#ifndef CHFS_LOG_H
#define CHFS_LOG_H

#include <syslog.h>

extern int chfs_log_level;
void chfs_log_set_prog(const char *prog);
/* Returns -errno if the file cannot be opened for appending. */
int chfs_log_open(const char *path);
/* Priority name ("err", "debug", ...) to number; -1 if unknown. */
int chfs_log_parse_priority(const char *name);
void chfs_log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define chfs_log(prio, ...)                                \
	do {                                               \
		if ((prio) <= chfs_log_level)              \
			chfs_log_msg((prio), __VA_ARGS__); \
	} while (0)
#define log_err(...) chfs_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...) chfs_log(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) chfs_log(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) chfs_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) chfs_log(LOG_DEBUG, __VA_ARGS__)

#endif
