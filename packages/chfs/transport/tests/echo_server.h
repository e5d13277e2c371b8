/*
 * echo_server.h — a real xprt server in a child process (this program run again: fork, exec;
 * see echo_server.c), for the transport tests and xprt-bench.
 *
 * The child opens a server xprt_t, writes its address to a pipe and serves a tiny protocol
 * (first body byte = operation) until killed:
 *   'E' echo the rest of the body            'S' sleep <u32 ms>, then echo
 *   'R' RMA-read <desc,len> from the caller, reply {rc, FNV-1a hash of the bytes}
 *   'W' RMA-write <len> bytes of pattern(seed) into the caller's <desc>, reply {rc, 0}
 *   (seed 0: no hashing / pattern — pure transfer, for xprt-bench)
 *   'Z' reply with <u32 n> bytes of pattern
 *   'T' reply {u64 peers, u64 refused} (transport stats)
 *   'X' refused by the admission function: no reply, no state for the sender
 *   'P' <desc,len> reply {0, hash of the first len bytes of this worker's buffer} (no transfer:
 *       shows whether the buffer changed after the worker was done with it)
 * The parent gets the address and the child's pid; echo_server_kill() ends it.
 */
#ifndef CHFS_ECHO_SERVER_H
#define CHFS_ECHO_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "xprt.h"

struct echo_rma_req { /* body of 'R' and 'W' after the op byte */
	struct xprt_rma_desc desc;
	uint64_t len;
	uint32_t seed;
};

/* Start the server (listening on `host`, NULL = default); addr gets its address. Returns the
 * child's pid or -errno. */
pid_t echo_server_start(const char *proto, const char *host, unsigned nworkers, char *addr, size_t size);
void echo_server_kill(pid_t pid);
/* Remove what a SIGKILLed shm server named `name` left in /dev/shm. */
void echo_server_remove_shm(const char *name);

uint64_t fnv1a(const void *buf, size_t len);
void fill_pattern(void *buf, size_t len, uint32_t seed);

#endif
