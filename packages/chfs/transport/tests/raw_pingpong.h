/*
 * raw_pingpong.h — a 64-byte ping-pong directly on libfabric, the reference xprt-bench compares
 * the RPC transport with (see raw_pingpong.c).
 */
#ifndef CHFS_RAW_PINGPONG_H
#define CHFS_RAW_PINGPONG_H

struct raw_result {
	int window;
	double median_us, p90_us, calls_per_s;
};

/* Run `secs` seconds per window ("tcp" or "shm"); out[i] for windows[i]. 0 or -errno. */
int raw_pingpong(const char *proto, const int *windows, int nwin, double secs, struct raw_result *out);

#endif
