/*
 * xprt_bench.c — round-trip time and bandwidth of the transport against a forked echo server.
 *
 * Usage: xprt-bench [-p proto] [-s seconds] [-w window]
 * Prints one line per measurement — 64 B RTT, inline 16/32/64 KiB echo, RMA 1 MiB server-read
 * and server-write — with `window` calls in flight (one thread each): the median and 90th
 * percentile time per call (robust on a shared, noisy host) and the throughput.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "echo_server.h"
#include "xprt.h"

static xprt_t *cx;
static xprt_peer_t *srv;
static double secs = 2.0;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

#define MAX_SAMPLES 200000

struct job {
	char op;
	size_t len;
	long done;
	int err;
	float *us; /* per-call times */
};

static void *run(void *arg)
{
	struct job *j = arg;
	char *buf = aligned_alloc(4096, j->len + 4096);
	memset(buf, 1, j->len + 4096);
	xprt_mem_t *mr = NULL;
	unsigned char req[256];
	size_t reqlen;
	struct echo_rma_req q = {.len = j->len, .seed = 0};
	if (j->op == 'R' || j->op == 'W') {
		if (xprt_mem_register(cx, buf, j->len, XPRT_MEM_REMOTE_READ | XPRT_MEM_REMOTE_WRITE, &mr,
		                      &q.desc) < 0) {
			j->err = 1;
			return NULL;
		}
		req[0] = (unsigned char)j->op;
		memcpy(req + 1, &q, sizeof q);
		reqlen = 1 + sizeof q;
	} else {
		buf[0] = 'E';
		reqlen = j->len + 1;
	}
	char *rep = malloc(j->len + 64);
	double end = now_s() + secs;
	while (now_s() < end) {
		size_t got;
		double t0 = now_s();
		int rc = xprt_call(cx, srv, j->op == 'E' ? buf : (char *)req, reqlen, rep, j->len + 64, &got,
		                   10000);
		if (rc < 0) {
			j->err = 1;
			break;
		}
		if (j->done < MAX_SAMPLES)
			j->us[j->done] = (float)((now_s() - t0) * 1e6);
		j->done++;
	}
	xprt_mem_deregister(mr);
	free(rep);
	free(buf);
	return NULL;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static void measure(const char *what, char op, size_t len, int window)
{
	pthread_t th[64];
	struct job jobs[64];
	double t0 = now_s();
	for (int i = 0; i < window; i++) {
		jobs[i] = (struct job){.op = op, .len = len, .us = malloc(MAX_SAMPLES * sizeof(float))};
		pthread_create(&th[i], NULL, run, &jobs[i]);
	}
	long total = 0, n = 0;
	int err = 0;
	for (int i = 0; i < window; i++) {
		pthread_join(th[i], NULL);
		total += jobs[i].done;
		err |= jobs[i].err;
	}
	double dt = now_s() - t0;
	float *all = malloc((size_t)(total ? total : 1) * sizeof(float));
	for (int i = 0; i < window; i++) {
		long k = jobs[i].done < MAX_SAMPLES ? jobs[i].done : MAX_SAMPLES;
		memcpy(all + n, jobs[i].us, (size_t)k * sizeof(float));
		n += k;
		free(jobs[i].us);
	}
	qsort(all, (size_t)n, sizeof(float), cmp_float);
	double med = n ? all[n / 2] : 0, p90 = n ? all[n * 9 / 10] : 0;
	free(all);
	printf("%-24s window %2d: median %8.1f us, p90 %8.1f us, %8.0f calls/s", what, window, med, p90,
	       total / dt);
	if (len > 64)
		printf(", %7.1f MiB/s", total * (double)len / dt / 1048576.0);
	printf("%s\n", err ? " (errors)" : "");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *proto = "shm";
	int window = 4, opt;
	while ((opt = getopt(argc, argv, "p:s:w:h")) != -1) {
		switch (opt) {
		case 'p': proto = optarg; break;
		case 's': secs = atof(optarg); break;
		case 'w': window = atoi(optarg); break;
		default:
			printf("usage: xprt-bench [-p tcp|shm|...] [-s seconds per test] [-w window]\n"
			       "RTT and bandwidth of the CHFS transport against a forked echo server.\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (window < 1 || window > 64)
		window = 4;
	char addr[256];
	pid_t pid = echo_server_start(proto, NULL, 4, addr, sizeof addr);
	if (pid < 0)
		return 1;
	struct xprt_opts o = {.proto = proto};
	if (xprt_open(&o, &cx) < 0 || xprt_connect(cx, addr, &srv) < 0) {
		fprintf(stderr, "xprt-bench: cannot reach %s\n", addr);
		echo_server_kill(pid);
		return 1;
	}
	printf("xprt-bench %s, server %s, %.1f s per test\n", proto, addr, secs);
	measure("RTT 64 B", 'E', 63, 1);
	measure("RTT 64 B", 'E', 63, window);
	measure("inline echo 16 KiB", 'E', 16383, window);
	measure("inline echo 32 KiB", 'E', 32767, window);
	measure("inline echo 64 KiB", 'E', 65535, window);
	measure("RMA server-read 1 MiB", 'R', 1 << 20, window);
	measure("RMA server-write 1 MiB", 'W', 1 << 20, window);
	xprt_close(cx);
	echo_server_kill(pid);
	return 0;
}
