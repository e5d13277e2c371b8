/*
 * xprt_bench.c — round-trip time and call rate of the transport against a forked echo server,
 * beside a raw libfabric ping-pong (raw_pingpong.c) measured in the same run.
 *
 * Usage: xprt-bench [-p tcp|shm|both] [-s seconds] [-r reps] [-o out.csv] [-x] [-m all|both|new|handoff|local]
 * For each protocol and repetition, alternately: the raw ping-pong, the transport, and the
 * transport with caller progress and inline handlers turned off ("xprt-handoff", the path with
 * a thread hand-off at each end, as before; CHFS_XPRT_CALLER_PROGRESS=0, CHFS_XPRT_INLINE=0), 64 B
 * messages with 1, 4 and 16 calls in flight — "async" (one thread starts the calls with
 * xprt_call_start and restarts each as it completes, as libchfs's parallel I/O does) and
 * "threads" (one blocking xprt_call per thread). Per line: the median and 90th percentile time
 * per call (robust on a shared, noisy host) and calls/s; the same rows go to the CSV. -x adds the
 * bulk measurements (inline 16/32/64 KiB echo, RMA 1 MiB server-read and server-write, window 4).
 * "xprt-local" is the node-local transport (xprt_local.c: Unix socket + process_vm_readv/writev)
 * against the same server.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "echo_server.h"
#include "raw_pingpong.h"
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
	size_t cap = (j->len + 4096 + 4095) / 4096 * 4096; /* aligned_alloc: a multiple of 4096 */
	char *buf = aligned_alloc(4096, cap);
	memset(buf, 1, cap);
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
			struct xprt_stats st;
			xprt_get_stats(cx, &st);
			fprintf(stderr,
			        "xprt-bench: call failed: rc %d (calls %llu, replies %llu, wakeups %llu)\n",
			        rc, (unsigned long long)st.calls, (unsigned long long)st.replies,
			        (unsigned long long)st.wakeups);
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

static FILE *csv;
static const char *cur_proto;
static const char *cur_path = "xprt";
static int cur_rep;

static void csv_row(const char *path, const char *mode, int window, double med, double p90, double rate)
{
	if (csv)
		fprintf(csv, "%s,%s,%s,%d,%d,%.2f,%.2f,%.0f\n", cur_proto, path, mode, window, cur_rep, med,
		        p90, rate);
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
	if (len <= 64)
		csv_row(cur_path, "threads", window, med, p90, total / dt);
}

/* One thread, `window` asynchronous calls in flight, each restarted as soon as it completed. */
static void measure_async(int window)
{
	xprt_call_t *c[64];
	double t_start[64];
	char req[64], rep[64][128];
	memset(req, 'E', sizeof req);
	float *us = malloc(MAX_SAMPLES * sizeof(float));
	long n = 0, done = 0;
	int err = 0;
	double t0 = now_s(), end = t0 + secs;
	for (int i = 0; i < window; i++) {
		t_start[i] = now_s();
		if (xprt_call_start(cx, srv, req, 63, rep[i], sizeof rep[i], 10000, &c[i]) < 0)
			return;
	}
	for (int i = 0, live = window; live > 0; i = (i + 1) % window) {
		if (!c[i])
			continue;
		size_t got;
		int wrc = xprt_call_wait(c[i], &got);
		if (wrc < 0 || got != 62) {
			if (!err)
				fprintf(stderr, "xprt-bench: call failed: rc %d, %zu bytes\n", wrc, got);
			err = 1;
		}
		c[i] = NULL;
		live--;
		double t = now_s();
		if (n < MAX_SAMPLES)
			us[n++] = (float)((t - t_start[i]) * 1e6);
		done++;
		if (t < end && !err) {
			t_start[i] = now_s();
			if (xprt_call_start(cx, srv, req, 63, rep[i], sizeof rep[i], 10000, &c[i]) < 0)
				err = 1;
			else
				live++;
		}
	}
	double dt = now_s() - t0;
	qsort(us, (size_t)n, sizeof(float), cmp_float);
	double med = n ? us[n / 2] : 0, p90 = n ? us[n * 9 / 10] : 0;
	free(us);
	char what[40];
	snprintf(what, sizeof what, "%s 64 B async", cur_path);
	printf("%-24s window %2d: median %8.1f us, p90 %8.1f us, %8.0f calls/s%s\n", what, window, med, p90,
	       done / dt, err ? " (errors)" : "");
	fflush(stdout);
	csv_row(cur_path, "async", window, med, p90, done / dt);
}

static const int windows[] = {1, 4, 16};
#define NWIN 3

static int run_raw(const char *proto)
{
	struct raw_result r[NWIN];
	int rc = raw_pingpong(proto, windows, NWIN, secs, r);
	if (rc < 0) {
		printf("raw libfabric ping-pong over %s failed (%d)\n", proto, rc);
		return rc;
	}
	for (int i = 0; i < NWIN; i++) {
		printf("%-24s window %2d: median %8.1f us, p90 %8.1f us, %8.0f calls/s\n",
		       "raw libfabric 64 B", r[i].window, r[i].median_us, r[i].p90_us, r[i].calls_per_s);
		csv_row("raw", "async", r[i].window, r[i].median_us, r[i].p90_us, r[i].calls_per_s);
	}
	fflush(stdout);
	return 0;
}

/* handoff: the path before caller progress and inline handlers, for the A/B comparison;
 * local: the client reaches the server over its node-local socket (CHFS_XPRT_LOCAL=1). */
static int run_xprt(const char *proto, int bulk, int handoff, int local)
{
	setenv("CHFS_XPRT_CALLER_PROGRESS", handoff ? "0" : "1", 1);
	setenv("CHFS_XPRT_INLINE", handoff ? "0" : "1", 1);
	setenv("CHFS_XPRT_LOCAL", local ? "1" : "0", 1);
	cur_path = handoff ? "xprt-handoff" : local ? "xprt-local" : "xprt";
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
	/* the first calls set up the connection: not measured */
	for (int i = 0; i < 100; i++) {
		char b[8] = "E", rep[8];
		size_t got;
		xprt_call(cx, srv, b, 1, rep, sizeof rep, &got, 10000);
	}
	for (int i = 0; i < NWIN; i++)
		measure_async(windows[i]);
	for (int i = 1; i < NWIN; i++)
		measure(handoff ? "xprt-handoff 64 B thr"
		        : local ? "xprt-local 64 B thr"
		                : "xprt 64 B threads",
		        'E', 63, windows[i]);
	if (bulk) {
		measure("inline echo 16 KiB", 'E', 16383, 4);
		measure("inline echo 32 KiB", 'E', 32767, 4);
		measure("inline echo 64 KiB", 'E', 65535, 4);
		measure("RMA server-read 1 MiB", 'R', 1 << 20, 4);
		measure("RMA server-write 1 MiB", 'W', 1 << 20, 4);
	}
	xprt_close(cx);
	echo_server_kill(pid);
	return 0;
}

int main(int argc, char **argv)
{
	const char *protos = "both", *out = NULL;
	int reps = 1, bulk = 0, opt, paths = 7;
	while ((opt = getopt(argc, argv, "p:s:r:o:xm:h")) != -1) {
		switch (opt) {
		case 'p': protos = optarg; break;
		case 's': secs = atof(optarg); break;
		case 'r': reps = atoi(optarg); break;
		case 'o': out = optarg; break;
		case 'x': bulk = 1; break;
		case 'm':
			paths = !strcmp(optarg, "new")       ? 1
			        : !strcmp(optarg, "handoff") ? 2
			        : !strcmp(optarg, "local")   ? 4
			        : !strcmp(optarg, "both")    ? 3
			                                     : 7;
			break;
		default:
			printf("usage: xprt-bench [-p tcp|shm|both] [-s seconds per test] [-r reps] [-o out.csv] [-x]\n"
			       "                  [-m all|both|new|handoff|local]\n"
			       "64 B RTT and calls/s at 1, 4, 16 in flight over the CHFS transport, the transport with the\n"
			       "old thread hand-offs (xprt-handoff) and a raw libfabric ping-pong, alternately;\n"
			       "-x adds inline and RMA bandwidth. -m local: only the node-local transport\n"
			       "(xprt-local, CHFS_XPRT_LOCAL=1); all (default): raw, xprt, handoff, local.\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (out && !(csv = fopen(out, "w"))) {
		perror(out);
		return 1;
	}
	if (csv)
		fprintf(csv, "proto,path,mode,window,rep,median_us,p90_us,calls_per_s\n");
	const char *list[2] = {"tcp", "shm"};
	int np = 2;
	if (strcmp(protos, "both") != 0) {
		list[0] = protos;
		np = 1;
	}
	int rc = 0;
	for (int rep = 0; rep < (reps > 0 ? reps : 1); rep++)
		for (int k = 0; k < np; k++) {
			cur_proto = list[k];
			cur_rep = rep;
			printf("== %s, rep %d, %.1f s per test\n", list[k], rep, secs);
			if ((paths & 3) == 3 && (strcmp(list[k], "tcp") == 0 || strcmp(list[k], "shm") == 0))
				run_raw(list[k]);
			if (paths & 1)
				rc |= run_xprt(list[k], bulk, 0, 0);
			if (paths & 2)
				rc |= run_xprt(list[k], 0, 1, 0);
			if (paths & 4)
				rc |= run_xprt(list[k], bulk, 0, 1);
		}
	if (csv)
		fclose(csv);
	return rc;
}
