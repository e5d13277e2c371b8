/*
 * config.c — see config.h. Each variable has one parse step; errors say which variable and why.
 */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int chfs_parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	unsigned shift = 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default: break;
	}
	if (*end == 'i' && shift)
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (ULLONG_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

void chfs_config_default_secret_file(char *buf, size_t size)
{
	const char *f = getenv("CHFS_SECRET_FILE");
	if (f && *f) {
		snprintf(buf, size, "%s", f);
		return;
	}
	const char *home = getenv("HOME");
	snprintf(buf, size, "%s/.chfs/secret", home && *home ? home : "/tmp");
}

#define BAD(var, why)                                                \
	do {                                                         \
		snprintf(err, errlen, "%s=\"%s\": %s", var, v, why); \
		return -EINVAL;                                      \
	} while (0)

int chfs_config_load(struct chfs_config *c, char *err, size_t errlen)
{
	const char *v;
	uint64_t u;
	long l;

	memset(c, 0, sizeof *c);
	c->chunk_size = CHFS_DEFAULT_CHUNK_SIZE;
	c->placement = CHFS_PLACE_HASH;
	c->rdma_thresh = CHFS_DEFAULT_RDMA_THRESH;
	c->rpc_timeout_msec = CHFS_DEFAULT_RPC_TIMEOUT;
	c->node_list_cache_timeout = CHFS_DEFAULT_NODE_LIST_CACHE_TIMEOUT;
	c->list_cache_msec = CHFS_DEFAULT_LIST_CACHE_MSEC;
	c->log_priority = LOG_NOTICE;
	c->local_fastpath = 1;
	err[0] = '\0';

	if ((v = getenv("CHFS_SERVER")) != NULL) {
		if (strlen(v) >= sizeof c->server)
			BAD("CHFS_SERVER", "too long");
		strcpy(c->server, v);
	}
	chfs_config_default_secret_file(c->secret_file, sizeof c->secret_file);
	c->secret_fd = -1;
	if ((v = getenv("CHFS_SECRET_FD")) && *v) {
		if (parse_int(v, 0, INT_MAX, &l))
			BAD("CHFS_SECRET_FD", "expected a file descriptor number");
		c->secret_fd = (int)l;
	}
	if ((v = getenv("CHFS_CHUNK_SIZE")) && *v) {
		if (chfs_parse_size(v, &u) || u == 0 || u > CHFS_MAX_CHUNK_SIZE)
			BAD("CHFS_CHUNK_SIZE", "expected a size between 1 and 1G (K/M/G suffix allowed)");
		c->chunk_size = (uint32_t)u;
	}
	if ((v = getenv("CHFS_PLACEMENT")) && *v) {
		if (strcmp(v, "hash") == 0)
			c->placement = CHFS_PLACE_HASH;
		else if (strcmp(v, "local") == 0)
			c->placement = CHFS_PLACE_LOCAL;
		else
			BAD("CHFS_PLACEMENT", "expected \"hash\" or \"local\"");
	}
	if ((v = getenv("CHFS_ASYNC_ACCESS")) && *v) {
		if (parse_int(v, 0, 1, &l))
			BAD("CHFS_ASYNC_ACCESS", "expected 0 or 1");
		c->async_access = (int)l;
	}
	if ((v = getenv("CHFS_BUF_SIZE")) && *v) {
		if (chfs_parse_size(v, &u) || u > CHFS_MAX_CHUNK_SIZE)
			BAD("CHFS_BUF_SIZE", "expected a size between 0 and 1G");
		c->buf_size = (uint32_t)u;
	}
	if ((v = getenv("CHFS_RDMA_THRESH")) && *v) {
		if (strcmp(v, "-1") == 0)
			c->rdma_thresh = UINT64_MAX;
		else if (chfs_parse_size(v, &u))
			BAD("CHFS_RDMA_THRESH", "expected a size in bytes or -1 (never)");
		else
			c->rdma_thresh = u;
	}
	if ((v = getenv("CHFS_RPC_TIMEOUT_MSEC")) && *v) {
		if (parse_int(v, 0, INT_MAX, &l))
			BAD("CHFS_RPC_TIMEOUT_MSEC", "expected milliseconds >= 0");
		c->rpc_timeout_msec = (int)l;
	}
	if ((v = getenv("CHFS_NODE_LIST_CACHE_TIMEOUT")) && *v) {
		if (parse_int(v, 0, INT_MAX, &l))
			BAD("CHFS_NODE_LIST_CACHE_TIMEOUT", "expected seconds >= 0");
		c->node_list_cache_timeout = (int)l;
	}
	if ((v = getenv("CHFS_LOCAL_FASTPATH")) && *v) {
		if (parse_int(v, 0, 1, &l))
			BAD("CHFS_LOCAL_FASTPATH", "expected 0 or 1");
		c->local_fastpath = (int)l;
	}
	if ((v = getenv("CHFS_LIST_CACHE")) && *v) {
		if (strcmp(v, "0") != 0 && (v[0] != '/' || strlen(v) >= sizeof c->list_cache - 64))
			BAD("CHFS_LIST_CACHE", "expected 0 (no cache) or an absolute directory path");
		strcpy(c->list_cache, v);
	}
	if ((v = getenv("CHFS_LIST_CACHE_MSEC")) && *v) {
		if (parse_int(v, 0, INT_MAX, &l))
			BAD("CHFS_LIST_CACHE_MSEC", "expected milliseconds >= 0");
		c->list_cache_msec = (int)l;
	}
	if ((v = getenv("CHFS_BACKEND_PATH")) && *v) {
		if (strlen(v) >= sizeof c->backend_path)
			BAD("CHFS_BACKEND_PATH", "too long");
		strcpy(c->backend_path, v);
	}
	if ((v = getenv("CHFS_LOG_PRIORITY")) && *v) {
		int p = chfs_log_parse_priority(v);
		if (p < 0)
			BAD("CHFS_LOG_PRIORITY", "expected emerg|alert|crit|err|warning|notice|info|debug");
		c->log_priority = p;
	}
	return 0;
}
