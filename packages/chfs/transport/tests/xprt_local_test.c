/*
 * xprt_local_test.c — the node-local transport (xprt_local.c) against a real server in a forked
 * child (echo_server.c), with CHFS_XPRT_LOCAL=1 and a private CHFS_LOCAL_DIR.
 *
 * Usage: xprt_local_test <proto> <case>; cases:
 *   calls     calls of every size go over the local socket, and libfabric is never mapped here
 *   inflight  1000 calls in flight from 4 threads
 *   rma       16 MiB server-read and server-write by process_vm_readv/writev
 *   cma       a client the server may not read (same uid, non-dumpable) falls back to libfabric
 *   death     a SIGKILLed server fails the call in flight and the next one at once
 *   hung      connecting to a stopped server costs nothing; a call to it times out at its
 *             timeout (not sooner, not never), and works again once the server runs
 *   mixed     one client, one local server and one over libfabric: the same registered buffer
 *             serves RMA to both (desc.addr is the virtual address; tcp ignores it)
 *   planted   a socket another uid planted, or one in a directory open to others, is ignored
 *   stale     a starting server removes the socket a SIGKILLed one left, and nothing else (a
 *             live server's, another uid's, a young one, a file, a link, one in a
 *             subdirectory); a server closed cleanly removes its own
 *   unpublished  a server restarted on a killed one's address with CHFSD_LOCAL_SOCKET=0 removes
 *             the dead socket, and clients reach it over libfabric
 *   bigreply  a reply too large for any message fails only its own call (by its timeout)
 * Bounded by alarm(); the server child dies with us (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "echo_server.h"
#include "xprt_check.h"
#include "xprt.h"
#include "xprt_internal.h" /* XPRT_MAX_BODY */

static const char *proto;
static char dir[64];
static char addr[256];
static pid_t srv_pid = -1;
static xprt_t *cx;
static xprt_peer_t *srv;

static bool libfabric_mapped(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;
	while (f && fgets(line, sizeof line, f))
		found |= strstr(line, "libfabric") != NULL;
	if (f)
		fclose(f);
	return found;
}

static uint64_t local_peers(void)
{
	struct xprt_stats st;
	xprt_get_stats(cx, &st);
	return st.local_peers;
}

static int start_server(void)
{
	srv_pid = echo_server_start(proto, NULL, 4, addr, sizeof addr);
	if (srv_pid < 0) {
		fprintf(stderr, "cannot start %s server: %s\n", proto, strerror((int)-srv_pid));
		return -1;
	}
	return 0;
}

static int open_client(void)
{
	struct xprt_opts o = {.proto = proto};
	int rc = xprt_open(&o, &cx);
	if (rc == 0)
		rc = xprt_connect(cx, addr, &srv);
	if (rc < 0)
		fprintf(stderr, "client on %s to %s: %s\n", proto, addr, strerror(-rc));
	return rc;
}

static void case_calls(void)
{
	CHECK(local_peers() == 0, "connected before the first call");
	echo_check(cx, srv, 1);
	CHECK(local_peers() == 1, "the server was not reached over its local socket");
	size_t max = xprt_max_msg(cx);
	size_t sizes[] = {0, 1, 64, 4096, 65536, max - 1};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		echo_check(cx, srv, sizes[i]);
	unsigned char z[5] = {'Z'};
	uint32_t n = 1000;
	memcpy(z + 1, &n, 4);
	char small[10];
	size_t got = 0;
	int rc = xprt_call(cx, srv, z, sizeof z, small, sizeof small, &got, 5000);
	CHECK(rc == -EMSGSIZE && got == 1000, "short reply buffer: rc %d got %zu", rc, got);
	char *big = calloc(1, max + 2);
	rc = xprt_call(cx, srv, big, max + 1, NULL, 0, &got, 5000);
	CHECK(rc == -EMSGSIZE, "oversized request: rc %d", rc);
	free(big);
	/* the admission function applies to local requests too: no reply */
	double t0 = now_s();
	rc = xprt_call(cx, srv, "X", 1, NULL, 0, &got, 300);
	CHECK(rc == -ETIMEDOUT && now_s() - t0 >= 0.25, "refused request: rc %d", rc);
	echo_check(cx, srv, 10);
	CHECK(!libfabric_mapped(), "libfabric is mapped in a client whose only server is local");
}

#define IF_THREADS 4
#define IF_CALLS 250
static void *inflight_worker(void *arg)
{
	long t = (long)arg, bad = 0;
	xprt_call_t **c = calloc(IF_CALLS, sizeof *c);
	char(*rep)[32] = calloc(IF_CALLS, sizeof *rep);
	for (int i = 0; i < IF_CALLS; i++) {
		char req[32];
		int n = snprintf(req, sizeof req, "E%ld-%d", t, i);
		if (xprt_call_start(cx, srv, req, (size_t)n, rep[i], sizeof rep[i], 20000, &c[i]) < 0) {
			c[i] = NULL;
			bad++;
		}
	}
	for (int i = IF_CALLS - 1; i >= 0; i--) { /* reverse order: replies arrive out of order */
		if (!c[i])
			continue;
		size_t got = 0;
		char want[32];
		int n = snprintf(want, sizeof want, "%ld-%d", t, i);
		if (xprt_call_wait(c[i], &got) != 0 || got != (size_t)n || memcmp(rep[i], want, got) != 0)
			bad++;
	}
	free(c);
	free(rep);
	return (void *)bad;
}

static void case_inflight(void)
{
	echo_check(cx, srv, 1);
	CHECK(local_peers() == 1, "the server was not reached over its local socket");
	double t0 = now_s();
	long bad = run_workers(IF_THREADS, inflight_worker);
	double dt = now_s() - t0;
	CHECK(bad == 0, "%ld of %d calls in flight failed", bad, IF_THREADS * IF_CALLS);
	printf("local: %d calls in flight from %d threads: %.0f calls/s\n", IF_THREADS * IF_CALLS, IF_THREADS,
	       IF_THREADS * IF_CALLS / dt);
}

/* One thread starts many calls before it waits for any, each an echo of 16 KiB (answered on
 * the server's connection thread): the replies fill the client's socket long before the last
 * request is sent, the server's thread blocks on its reply and stops reading requests, and the
 * client's requests fill the server's socket in turn. A sender that blocked there (while
 * holding what a reader needs to begin) stalled both sides until the 10 s send timeout, then
 * failed. A sender that finds the socket full reads the replies that have arrived. */
#define BL_CALLS 2000
#define BL_SIZE 16384
static void case_backlog(void)
{
	echo_check(cx, srv, 1);
	CHECK(local_peers() == 1, "the server was not reached over its local socket");
	xprt_call_t **c = calloc(BL_CALLS, sizeof *c);
	char *rep = malloc((size_t)BL_CALLS * BL_SIZE), *req = malloc(BL_SIZE + 1);
	req[0] = 'E';
	memset(req + 1, 'b', BL_SIZE);
	long bad = 0;
	double t0 = now_s();
	for (int i = 0; i < BL_CALLS; i++)
		if (xprt_call_start(cx, srv, req, BL_SIZE + 1, rep + (size_t)i * BL_SIZE, BL_SIZE, 30000,
		                    &c[i]) < 0) {
			c[i] = NULL;
			bad++;
		}
	double sent = now_s() - t0;
	for (int i = 0; i < BL_CALLS; i++) {
		size_t got = 0;
		if (c[i] && (xprt_call_wait(c[i], &got) != 0 || got != BL_SIZE ||
		             memcmp(rep + (size_t)i * BL_SIZE, req + 1, BL_SIZE) != 0))
			bad++;
	}
	double dt = now_s() - t0;
	CHECK(bad == 0, "%ld of %d echoes of %d bytes failed", bad, BL_CALLS, BL_SIZE);
	CHECK(sent < 5.0, "sending %d requests took %.1f s: the sender stalled on a full socket", BL_CALLS,
	      sent);
	printf("local: %d echoes of %d bytes started before any wait: sent in %.2f s, all done in %.2f s\n",
	       BL_CALLS, BL_SIZE, sent, dt);
	free(req);
	free(rep);
	free(c);
}

/* A caller whose request gets no answer times out at its deadline even while it is the
 * connection's reader and other threads' replies keep arriving: it used to look at its deadline
 * only when no reply came for a whole receive slice (50 ms), so a steady stream of echoes for
 * another thread held its timeout off for as long as the stream lasted. */
static atomic_bool stream_stop;
static void *stream_worker(void *arg)
{
	(void)arg;
	long calls = 0;
	usleep(20000);            /* the main thread waits on its call first: it is the reader */
	double end = now_s() + 3; /* bounded: a starved caller fails the check, not the test run */
	while (!atomic_load(&stream_stop) && now_s() < end) {
		char rep[8];
		size_t got = 0;
		if (xprt_call(cx, srv, "Eok", 3, rep, sizeof rep, &got, 5000) == 0)
			calls++;
	}
	return (void *)calls;
}

static void case_starve(void)
{
	echo_check(cx, srv, 1);
	CHECK(local_peers() == 1, "the server was not reached over its local socket");
	xprt_call_t *c;
	char rep[8];
	size_t got = 0;
	double t0 = now_s();
	/* "X" is refused by the server's admission: no reply ever comes. Started first, so its
	 * waiter becomes the reader of the connection. */
	int rc = xprt_call_start(cx, srv, "X", 1, rep, sizeof rep, 300, &c);
	CHECK(rc == 0, "start: %s", strerror(-rc));
	atomic_store(&stream_stop, false);
	pthread_t t;
	pthread_create(&t, NULL, stream_worker, NULL);
	rc = xprt_call_wait(c, &got);
	double dt = now_s() - t0;
	atomic_store(&stream_stop, true);
	void *calls;
	pthread_join(t, &calls);
	CHECK(rc == -ETIMEDOUT && dt < 1.0, "a 300 ms call beside a stream of replies: rc %d after %.2f s",
	      rc, dt);
	printf("local: 300 ms call timed out after %.2f s while %ld other calls were answered\n", dt,
	       (long)calls);
}

static void case_rma(void)
{
	echo_check(cx, srv, 1);
	CHECK(local_peers() == 1, "the server was not reached over its local socket");
	size_t sizes[] = {1, 4096, 16 << 20};
	for (size_t i = 0; i < 3; i++) {
		rma_check(cx, srv, "local", 'R', sizes[i], (uint32_t)i + 1);
		rma_check(cx, srv, "local", 'W', sizes[i], (uint32_t)i + 11);
	}
	/* a descriptor is bounded by its length: one byte past it is refused by the server */
	char *buf = calloc(1, 4096);
	xprt_mem_t *mr;
	struct echo_rma_req q = {.len = 4097, .seed = 1};
	xprt_mem_register(cx, buf, 4096, XPRT_MEM_REMOTE_WRITE, &mr, &q.desc);
	unsigned char req[1 + sizeof q] = {'W'};
	memcpy(req + 1, &q, sizeof q);
	int64_t out[2] = {0, 0};
	size_t got;
	int rc = xprt_call(cx, srv, req, sizeof req, out, sizeof out, &got, 10000);
	CHECK(rc == 0 && out[0] == -EINVAL, "write past the descriptor: rc %d server %d", rc, (int)out[0]);
	xprt_mem_deregister(mr);
	free(buf);
	CHECK(!libfabric_mapped(), "libfabric is mapped in a client whose only server is local");
}

/* Both processes run as `nobody`; the client is non-dumpable, so the server's process_vm_readv
 * is refused (EPERM) and the hello fails: the client uses libfabric for that server. */
static int become_nobody(void)
{
	struct passwd *pw = getpwnam("nobody");
	if (!pw || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0) {
		fprintf(stderr, "cannot become nobody: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static void case_cma(void)
{
	echo_check(cx, srv, 100);
	CHECK(local_peers() == 0, "a client the server cannot read was connected locally");
	echo_check(cx, srv, 100);
	rma_check(cx, srv, "local", 'R', 1 << 20, 5);
	rma_check(cx, srv, "local", 'W', 1 << 20, 6);
}

static void case_death(void)
{
	echo_check(cx, srv, 10);
	CHECK(local_peers() == 1, "the server was not reached over its local socket");
	unsigned char s[5] = {'S'};
	uint32_t ms = 20000;
	memcpy(s + 1, &ms, 4);
	char rep[16];
	xprt_call_t *c;
	int rc = xprt_call_start(cx, srv, s, sizeof s, rep, sizeof rep, 30000, &c);
	CHECK(rc == 0, "start: %s", strerror(-rc));
	usleep(200 * 1000);
	double t0 = now_s();
	kill(srv_pid, SIGKILL);
	rc = xprt_call_wait(c, NULL);
	double dt = now_s() - t0;
	printf("local: call in flight failed %.1f ms after the server was killed: %s\n", dt * 1e3,
	       strerror(-rc));
	CHECK(rc == -EHOSTUNREACH && dt < 2.0, "call in flight to a killed server: rc %d after %.2f s", rc,
	      dt);
	t0 = now_s();
	size_t got;
	rc = xprt_call(cx, srv, "E1", 2, rep, sizeof rep, &got, 30000);
	dt = now_s() - t0;
	CHECK(rc == -EHOSTUNREACH && dt < 2.0, "next call to a killed server: rc %d after %.2f s", rc, dt);
	waitpid(srv_pid, NULL, 0);
	srv_pid = -1;
}

/* A reply larger than any message (the server's bug): over libfabric its send fails and only
 * that call times out; over the local socket it must not be sent either — the client's reader
 * would take it for nonsense and drop the connection, failing every other call in flight. */
static void case_bigreply(void)
{
	echo_check(cx, srv, 10);
	CHECK(local_peers() == 1, "the server was not reached over its local socket");
	unsigned char s[5] = {'S'}, z[5] = {'Z'};
	uint32_t ms = 1500, n = (uint32_t)XPRT_MAX_BODY + 64;
	memcpy(s + 1, &ms, 4);
	memcpy(z + 1, &n, 4);
	char rep[16];
	xprt_call_t *c;
	int rc = xprt_call_start(cx, srv, s, sizeof s, rep, sizeof rep, 10000, &c);
	CHECK(rc == 0, "start: %s", strerror(-rc));
	char *big = malloc(n);
	size_t got = 0;
	rc = xprt_call(cx, srv, z, sizeof z, big, n, &got, 500);
	free(big);
	CHECK(rc == -ETIMEDOUT, "oversized reply: rc %d (%s), not the timeout", rc, strerror(-rc));
	rc = xprt_call_wait(c, &got);
	CHECK(rc == 0, "a call in flight beside the oversized reply failed: %s", strerror(-rc));
}

/* SIGSTOP, and wait until every thread of pid has stopped (delivery is asynchronous). */
static void stop_server(void)
{
	kill(srv_pid, SIGSTOP);
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)srv_pid);
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(path, "r");
		char *p = f && fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
		if (f)
			fclose(f);
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
		usleep(1000);
	}
}

static void case_hung(void)
{
	xprt_peer_t *again;
	stop_server();
	double t0 = now_s();
	int rc = xprt_connect(cx, addr, &again);
	CHECK(rc == 0 && again == srv && now_s() - t0 < 0.5, "connect to a stopped server: rc %d, %.2f s", rc,
	      now_s() - t0);
	t0 = now_s();
	char rep[8];
	size_t got;
	rc = xprt_call(cx, srv, "E1", 2, rep, sizeof rep, &got, 1500);
	double dt = now_s() - t0;
	printf("local: call to a stopped server: %s after %.2f s (timeout 1.5 s)\n", strerror(-rc), dt);
	CHECK(rc == -ETIMEDOUT && dt >= 1.4 && dt < 4.0, "call to a stopped server: rc %d after %.2f s", rc,
	      dt);
	kill(srv_pid, SIGCONT);
	echo_check(cx, srv, 10);
	CHECK(local_peers() == 1, "the server was not reached over its local socket once it ran again");
	/* stopped while connected: the call times out too, and the connection survives */
	stop_server();
	t0 = now_s();
	rc = xprt_call(cx, srv, "E1", 2, rep, sizeof rep, &got, 1000);
	dt = now_s() - t0;
	CHECK(rc == -ETIMEDOUT && dt >= 0.9 && dt < 4.0, "connected, stopped: rc %d after %.2f s", rc, dt);
	kill(srv_pid, SIGCONT);
	echo_check(cx, srv, 10);
}

static void case_mixed(void)
{
	char addr2[256];
	setenv("CHFSD_LOCAL_SOCKET", "0", 1);
	pid_t pid2 = echo_server_start(proto, NULL, 4, addr2, sizeof addr2);
	unsetenv("CHFSD_LOCAL_SOCKET");
	xprt_peer_t *srv2 = NULL;
	int rc = pid2 > 0 ? xprt_connect(cx, addr2, &srv2) : -ECHILD;
	CHECK(rc == 0, "second server: %s", strerror(-rc));
	if (rc == 0) {
		echo_check(cx, srv, 1);
		size_t len = 3 << 20;
		char *buf = aligned_alloc(4096, len);
		fill_pattern(buf, len, 77);
		xprt_mem_t *mr;
		struct echo_rma_req q = {.len = len, .seed = 77};
		rc = xprt_mem_register(cx, buf, len, XPRT_MEM_REMOTE_READ | XPRT_MEM_REMOTE_WRITE, &mr,
		                       &q.desc);
		CHECK(rc == 0, "register: %s", strerror(-rc));
		unsigned char req[1 + sizeof q] = {'R'};
		memcpy(req + 1, &q, sizeof q);
		xprt_peer_t *to[2] = {srv, srv2};
		for (int i = 0; i < 2; i++) {
			int64_t out[2] = {-1, 0};
			size_t got;
			rc = xprt_call(cx, to[i], req, sizeof req, out, sizeof out, &got, 30000);
			CHECK(rc == 0 && out[0] == 0 && (uint64_t)out[1] == fnv1a(buf, len),
			      "server-read from the %s server: rc %d server %d", i ? "libfabric" : "local",
			      rc, (int)out[0]);
		}
		req[0] = 'W';
		for (int i = 0; i < 2; i++) {
			memset(buf, 0, len);
			q.seed = 80 + (uint32_t)i;
			memcpy(req + 1, &q, sizeof q);
			int64_t out[2] = {-1, 0};
			size_t got;
			rc = xprt_call(cx, to[i], req, sizeof req, out, sizeof out, &got, 30000);
			char *want = malloc(len);
			fill_pattern(want, len, q.seed);
			CHECK(rc == 0 && out[0] == 0 && memcmp(buf, want, len) == 0,
			      "server-write from the %s server: rc %d", i ? "libfabric" : "local", rc);
			free(want);
		}
		xprt_mem_deregister(mr);
		free(buf);
		CHECK(local_peers() == 1, "expected exactly one local peer");
		CHECK(libfabric_mapped(), "a client with a remote peer has no libfabric");
	}
	if (pid2 > 0)
		echo_server_kill(pid2);
}

/* A listener as `nobody` at path (in a forked child); returns its pid, or -1. */
static pid_t plant(const char *path)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		if (become_nobody() < 0)
			_exit(1);
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 8) < 0) {
			perror("plant");
			_exit(1);
		}
		if (write(p[1], "k", 1) != 1)
			_exit(1);
		/* Count connections until killed: the parent checks none came. */
		for (;;) {
			int c = accept(fd, NULL, NULL);
			if (c >= 0)
				_exit(3);
		}
	}
	close(p[1]);
	char k;
	bool ok = read(p[0], &k, 1) == 1;
	close(p[0]);
	return ok ? pid : -1;
}

static char *sock_path_of(const char *srv_addr, char *buf, size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "%s/", dir);
	for (const char *a = srv_addr; *a && n + 1 < size; a++)
		buf[n++] = ((*a >= 'a' && *a <= 'z') || (*a >= 'A' && *a <= 'Z') ||
		            (*a >= '0' && *a <= '9') || *a == '.')
		                   ? *a
		                   : '-';
	struct stat st;
	snprintf(buf + n, size - n, "@%llu",
	         stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0ULL);
	return buf;
}

static char *sock_path(char *buf, size_t size) { return sock_path_of(addr, buf, size); }

static void planted_try(const char *what)
{
	char path[128];
	pid_t pl = plant(sock_path(path, sizeof path));
	CHECK(pl > 0, "%s: cannot plant the socket", what);
	struct stat st;
	CHECK(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid != 0, "%s: not planted", what);
	cx = NULL;
	if (open_client() == 0) {
		echo_check(cx, srv, 64); /* over libfabric */
		CHECK(local_peers() == 0, "%s: the planted socket was used", what);
	}
	int status = 0;
	CHECK(waitpid(pl, &status, WNOHANG) == 0, "%s: the planted listener got a connection", what);
	kill(pl, SIGKILL);
	waitpid(pl, NULL, 0);
	xprt_close(cx);
	cx = NULL;
	unlink(path);
}

static void case_planted(void)
{
	/* 1: the directory belongs to nobody (created first by another user) */
	CHECK(chown(dir, 65534, 65534) == 0, "chown: %s", strerror(errno));
	planted_try("directory of another uid");
	/* 2: our directory, but open to others */
	CHECK(chown(dir, 0, 0) == 0 && chmod(dir, 0777) == 0, "chmod: %s", strerror(errno));
	planted_try("directory open to others");
	/* 3: our closed directory, the socket another uid's (planted while it was open) */
	chmod(dir, 0777);
	char path[128];
	pid_t pl = plant(sock_path(path, sizeof path));
	chmod(dir, 0700);
	cx = NULL;
	if (pl > 0 && open_client() == 0) {
		echo_check(cx, srv, 64);
		CHECK(local_peers() == 0, "socket of another uid: used");
	}
	int status = 0;
	CHECK(pl > 0 && waitpid(pl, &status, WNOHANG) == 0, "socket of another uid: got a connection");
	kill(pl, SIGKILL);
	waitpid(pl, NULL, 0);
}

static bool is_sock(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* A socket bound at path and closed: nobody listens on it (as a killed server's). */
static void dead_socket(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind %s: %s", path,
	      strerror(errno));
	close(fd);
}

/* As if made a minute ago: a starting server leaves younger sockets alone (bind before listen). */
static void backdate(const char *path)
{
	struct timespec t[2] = {{time(NULL) - 60, 0}, {time(NULL) - 60, 0}};
	CHECK(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) == 0, "utimensat %s: %s", path,
	      strerror(errno));
}

static void noop_handler(xprt_req_t *r, void *arg)
{
	(void)arg;
	xprt_reply(r, NULL, 0);
}

/* A starting server removes the sockets of killed servers from the directory, and nothing else;
 * a server closed cleanly removes its own. */
static void case_stale(void)
{
	echo_check(cx, srv, 1);
	char killed[128], live[128], addr2[256], addr3[256], p[8][160];
	sock_path(killed, sizeof killed);
	pid_t pid2 = echo_server_start(proto, NULL, 2, addr2, sizeof addr2);
	CHECK(pid2 > 0, "second server: %s", strerror((int)-pid2));
	sock_path_of(addr2, live, sizeof live);
	echo_server_kill(srv_pid);
	srv_pid = -1;
	CHECK(is_sock(killed) && is_sock(live), "the killed server's socket is not left behind");
	const char *names[] = {"plain", "link", "sub", "sub/dead", "foreign", "young", "dirlink"};
	for (int i = 0; i < 7; i++)
		snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
	FILE *f = fopen(p[0], "w");
	CHECK(f && fputs("not a socket\n", f) >= 0 && fclose(f) == 0, "%s", p[0]);
	CHECK(mkdir(p[2], 0700) == 0, "mkdir %s", p[2]);
	dead_socket(p[3]);                                         /* sub/dead: not in the directory itself */
	CHECK(symlink("sub/dead", p[1]) == 0, "symlink %s", p[1]); /* a link to a dead socket */
	dead_socket(p[4]);                                         /* another uid's */
	CHECK(lchown(p[4], 65534, 65534) == 0, "lchown %s", p[4]);
	dead_socket(p[5]); /* young: maybe a server between bind and listen */
	CHECK(symlink("sub", p[6]) == 0, "symlink %s", p[6]);
	const char *old[] = {killed, live, p[1], p[3], p[4]};
	for (int i = 0; i < 5; i++)
		backdate(old[i]);
	pid_t pid3 = echo_server_start(proto, NULL, 2, addr3, sizeof addr3);
	CHECK(pid3 > 0, "third server: %s", strerror((int)-pid3));
	struct stat st;
	CHECK(lstat(killed, &st) < 0 && errno == ENOENT, "the killed server's socket is still there");
	CHECK(is_sock(live), "the socket of a live server was removed");
	CHECK(lstat(p[0], &st) == 0 && S_ISREG(st.st_mode), "a plain file was removed");
	CHECK(lstat(p[1], &st) == 0 && S_ISLNK(st.st_mode), "a symbolic link was removed");
	CHECK(is_sock(p[3]), "a dead socket in a subdirectory (or behind a link) was removed");
	CHECK(is_sock(p[4]), "a dead socket of another uid was removed");
	CHECK(is_sock(p[5]), "a socket made just now was removed");
	CHECK(lstat(p[6], &st) == 0 && S_ISLNK(st.st_mode), "a link to a directory was removed");
	/* the live server is still reached over its socket, the new one too */
	xprt_peer_t *to[2] = {NULL, NULL};
	const char *a[2] = {addr2, addr3};
	for (int i = 0; i < 2; i++) {
		char rep[8];
		size_t got = 0;
		int rc = xprt_connect(cx, a[i], &to[i]);
		if (rc == 0)
			rc = xprt_call(cx, to[i], "Eok", 3, rep, sizeof rep, &got, 5000);
		CHECK(rc == 0 && got == 2, "server %d after the sweep: %s", i + 2, strerror(-rc));
	}
	CHECK(local_peers() == 3, "servers not reached over their sockets: %llu local peers",
	      (unsigned long long)local_peers());
	echo_server_kill(pid2);
	echo_server_kill(pid3);
	/* a server closed cleanly removes its socket */
	struct xprt_opts o = {.proto = proto, .is_server = 1, .nworkers = 1};
	xprt_t *sx = NULL;
	char addr4[256] = "", own[128];
	int rc = xprt_open(&o, &sx);
	if (rc == 0)
		rc = xprt_self_addr(sx, addr4, sizeof addr4);
	if (rc == 0)
		rc = xprt_serve(sx, noop_handler, NULL);
	CHECK(rc == 0, "in-process server: %s", strerror(-rc));
	sock_path_of(addr4, own, sizeof own);
	CHECK(is_sock(own), "the in-process server published no socket");
	xprt_close(sx);
	CHECK(lstat(own, &st) < 0 && errno == ENOENT, "a server closed cleanly left its socket");
}

/* A server killed, another started on its address without a local socket (CHFSD_LOCAL_SOCKET=0):
 * the socket the first left must not keep clients from reaching the second over libfabric. */
static void case_unpublished(void)
{
	echo_check(cx, srv, 1);
	char path[128], addr2[256];
	sock_path(path, sizeof path);
	echo_server_kill(srv_pid);
	srv_pid = -1;
	CHECK(is_sock(path), "the killed server's socket is not left behind");
	const char *host = strstr(addr, "://");
	setenv("CHFSD_LOCAL_SOCKET", "0", 1);
	srv_pid = echo_server_start(proto, host ? host + 3 : addr, 2, addr2, sizeof addr2);
	unsetenv("CHFSD_LOCAL_SOCKET");
	CHECK(srv_pid > 0 && strcmp(addr, addr2) == 0, "restart on %s: got %s", addr,
	      srv_pid > 0 ? addr2 : strerror((int)-srv_pid));
	struct stat st;
	CHECK(lstat(path, &st) < 0 && errno == ENOENT, "the dead socket outlived its address's restart");
	char rep[8];
	size_t got = 0;
	int rc = xprt_call(cx, srv, "Eok", 3, rep, sizeof rep, &got, 10000);
	CHECK(rc == 0 && got == 2, "call to the restarted server: %s", strerror(-rc));
	xprt_close(cx);
	cx = NULL;
	rc = open_client(); /* a new client too */
	if (rc == 0)
		rc = xprt_call(cx, srv, "Eok", 3, rep, sizeof rep, &got, 10000);
	CHECK(rc == 0 && got == 2, "new client to the restarted server: %s", strerror(-rc));
	CHECK(local_peers() == 0, "a server without a socket was reached locally");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr,
		        "usage: %s <proto> calls|inflight|rma|cma|death|hung|mixed|planted|stale|unpublished\n",
		        argv[0]);
		return 2;
	}
	proto = argv[1];
	const char *c = argv[2];
	alarm(120);
	bool cma = !strcmp(c, "cma"), planted = !strcmp(c, "planted");
	if (cma && become_nobody() < 0)
		return 1;
	snprintf(dir, sizeof dir, "/tmp/chfs-local-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	setenv("CHFS_LOCAL_DIR", dir, 1);
	setenv("CHFS_XPRT_LOCAL", "1", 1);
	if (planted)
		setenv("CHFSD_LOCAL_SOCKET", "0", 1); /* the server publishes nothing: the plant does */
	int rc = start_server();
	if (cma)
		prctl(PR_SET_DUMPABLE, 0); /* after the fork: the server child stays dumpable */
	if (rc == 0 && !planted)
		rc = open_client();
	if (rc == 0) {
		if (!strcmp(c, "calls"))
			case_calls();
		else if (!strcmp(c, "inflight"))
			case_inflight();
		else if (!strcmp(c, "rma"))
			case_rma();
		else if (cma)
			case_cma();
		else if (!strcmp(c, "death"))
			case_death();
		else if (!strcmp(c, "hung"))
			case_hung();
		else if (!strcmp(c, "mixed"))
			case_mixed();
		else if (!strcmp(c, "bigreply"))
			case_bigreply();
		else if (!strcmp(c, "backlog"))
			case_backlog();
		else if (!strcmp(c, "starve"))
			case_starve();
		else if (planted)
			case_planted();
		else if (!strcmp(c, "stale"))
			case_stale();
		else if (!strcmp(c, "unpublished"))
			case_unpublished();
		else {
			fprintf(stderr, "unknown case %s\n", c);
			failures++;
		}
	} else {
		failures++;
	}
	xprt_close(cx);
	if (srv_pid > 0)
		echo_server_kill(srv_pid);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	printf("local %s %s: %s\n", proto, c, failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
