/*
 * test_config.c — CHFS_* parsing: defaults, suffixes, and one clear error per bad value.
 */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <syslog.h>

static int load(struct chfs_config *c, char *err) { return chfs_config_load(c, err, 512); }

static void bad(const char *var, const char *val)
{
	struct chfs_config c;
	char err[512];
	setenv(var, val, 1);
	CHECK(load(&c, err) != 0);
	CHECK(strstr(err, var) != NULL);
	unsetenv(var);
}

int main(void)
{
	struct chfs_config c;
	char err[512];
	static const char *vars[] = {"CHFS_SERVER",           "CHFS_CHUNK_SIZE",
	                             "CHFS_PLACEMENT",        "CHFS_ASYNC_ACCESS",
	                             "CHFS_BUF_SIZE",         "CHFS_RDMA_THRESH",
	                             "CHFS_RPC_TIMEOUT_MSEC", "CHFS_NODE_LIST_CACHE_TIMEOUT",
	                             "CHFS_LOG_PRIORITY",     "CHFS_SECRET_FILE"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		unsetenv(vars[i]);
	setenv("HOME", "/home/u", 1);
	CHECK_EQ(load(&c, err), 0);
	CHECK_EQ(c.chunk_size, 65536u);
	CHECK_EQ(c.rdma_thresh, 32768u);
	CHECK_EQ(c.rpc_timeout_msec, 30000);
	CHECK_EQ(c.node_list_cache_timeout, 120);
	CHECK_EQ(c.log_priority, LOG_NOTICE);
	CHECK_EQ(c.placement, CHFS_PLACE_HASH);
	CHECK(strcmp(c.secret_file, "/home/u/.chfs/secret") == 0);

	setenv("CHFS_CHUNK_SIZE", "1M", 1);
	setenv("CHFS_RDMA_THRESH", "-1", 1);
	setenv("CHFS_PLACEMENT", "local", 1);
	setenv("CHFS_ASYNC_ACCESS", "1", 1);
	setenv("CHFS_LOG_PRIORITY", "debug", 1);
	setenv("CHFS_SECRET_FILE", "/s", 1);
	setenv("CHFS_SERVER", "tcp://1.2.3.4:5", 1);
	CHECK_EQ(load(&c, err), 0);
	CHECK_EQ(c.chunk_size, 1u << 20);
	CHECK_EQ(c.rdma_thresh, UINT64_MAX);
	CHECK_EQ(c.placement, CHFS_PLACE_LOCAL);
	CHECK_EQ(c.async_access, 1);
	CHECK_EQ(c.log_priority, LOG_DEBUG);
	CHECK(strcmp(c.secret_file, "/s") == 0);
	CHECK(strcmp(c.server, "tcp://1.2.3.4:5") == 0);
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		unsetenv(vars[i]);

	uint64_t v;
	CHECK(chfs_parse_size("64K", &v) == 0 && v == 65536);
	CHECK(chfs_parse_size("2GiB", &v) == 0 && v == 2ull << 30);
	CHECK(chfs_parse_size("12", &v) == 0 && v == 12);
	CHECK(chfs_parse_size("1X", &v) != 0);
	CHECK(chfs_parse_size("", &v) != 0);
	CHECK(chfs_parse_size("-5", &v) != 0);
	CHECK(chfs_parse_size("99999999999999999999G", &v) != 0);

	bad("CHFS_CHUNK_SIZE", "0");
	bad("CHFS_CHUNK_SIZE", "abc");
	bad("CHFS_CHUNK_SIZE", "2G");
	bad("CHFS_PLACEMENT", "random");
	bad("CHFS_ASYNC_ACCESS", "2");
	bad("CHFS_RDMA_THRESH", "lots");
	bad("CHFS_RPC_TIMEOUT_MSEC", "-1");
	bad("CHFS_NODE_LIST_CACHE_TIMEOUT", "1.5");
	bad("CHFS_LOG_PRIORITY", "chatty");
	bad("CHFS_BUF_SIZE", "4T");
	return check_result("test_config");
}
