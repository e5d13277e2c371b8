/*
 * config.h — every CHFS_* environment variable, parsed and validated in one place.
 *
 * chfs_config_load() fills a struct from the environment; a malformed value is an error with a
 * one-line message naming the variable (never a silent default). Afterwards the values are only
 * read (the chfs_set_* setters of chfs.h change the client's copy).
 */
#ifndef CHFS_CONFIG_H
#define CHFS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum chfs_placement_mode { CHFS_PLACE_HASH = 0, CHFS_PLACE_LOCAL = 1 };

struct chfs_config {
	char server[4096];           /* CHFS_SERVER, comma separated ("" if unset) */
	char secret_file[4096];      /* CHFS_SECRET_FILE or $HOME/.chfs/secret */
	int secret_fd;               /* CHFS_SECRET_FD: the secret file opened by a launcher (-1: none) */
	uint32_t chunk_size;         /* CHFS_CHUNK_SIZE */
	int placement;               /* CHFS_PLACEMENT */
	int async_access;            /* CHFS_ASYNC_ACCESS */
	uint32_t buf_size;           /* CHFS_BUF_SIZE */
	uint64_t rdma_thresh;        /* CHFS_RDMA_THRESH (UINT64_MAX = never) */
	int rpc_timeout_msec;        /* CHFS_RPC_TIMEOUT_MSEC (0 = none) */
	int node_list_cache_timeout; /* CHFS_NODE_LIST_CACHE_TIMEOUT seconds (0 = never refresh) */
	int log_priority;            /* CHFS_LOG_PRIORITY */
	int local_fastpath;          /* CHFS_LOCAL_FASTPATH: chunks on this node's servers by pread/pwrite */
	char list_cache[4096];       /* CHFS_LIST_CACHE: "0" (off), a directory, or "" (default) */
	int list_cache_msec;         /* CHFS_LIST_CACHE_MSEC: age up to which a cached list is used */
	char backend_path[4096];     /* CHFS_BACKEND_PATH: the pool's backend directory ("" if none) */
};

#define CHFS_DEFAULT_CHUNK_SIZE 65536u
#define CHFS_MAX_CHUNK_SIZE (1u << 30)
#define CHFS_DEFAULT_RDMA_THRESH 32768u
#define CHFS_DEFAULT_RPC_TIMEOUT 30000
#define CHFS_DEFAULT_NODE_LIST_CACHE_TIMEOUT 120
#define CHFS_DEFAULT_LIST_CACHE_MSEC 500

/* Defaults, then the environment. Returns 0 or -EINVAL with a message in err. */
int chfs_config_load(struct chfs_config *c, char *err, size_t errlen);
/* The default secret file: $CHFS_SECRET_FILE, else $HOME/.chfs/secret. */
void chfs_config_default_secret_file(char *buf, size_t size);
/* "64K", "1M", "123" -> bytes. Returns 0 or -EINVAL. */
int chfs_parse_size(const char *s, uint64_t *out);

#endif
