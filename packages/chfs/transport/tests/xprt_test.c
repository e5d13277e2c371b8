/*
 * xprt_test.c — transport unit tests against a real server in a forked child.
 *
 * Usage: xprt_test <proto> <case>; cases: echo rma concurrent timeout late badaddr restart fork
 * idle admit bufs onehop; sweep sweep_attack dblife (shm only); stall slow (tcp only).
 * Each run is bounded by alarm(); the server child is SIGKILLed at the end (and dies with us via
 * PR_SET_PDEATHSIG if we crash). Exit status 0 = every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "echo_server.h"
#include "xprt_check.h"
#include "shm_doorbell.h"
#include "xprt.h"
#include "xprt_internal.h" /* dblife: the peer's doorbell mapping */

static const char *proto;
static xprt_t *cx;
static xprt_peer_t *srv;
static pid_t srv_pid;

static int setup(void)
{
	char addr[256];
	srv_pid = echo_server_start(proto, NULL, 4, addr, sizeof addr);
	if (srv_pid < 0) {
		fprintf(stderr, "cannot start %s server: %s\n", proto, strerror((int)-srv_pid));
		return -1;
	}
	struct xprt_opts o = {.proto = proto};
	int rc = xprt_open(&o, &cx);
	if (rc == 0)
		rc = xprt_connect(cx, addr, &srv);
	if (rc < 0) {
		fprintf(stderr, "client on %s to %s: %s\n", proto, addr, strerror(-rc));
		return -1;
	}
	printf("server %s (pid %d)\n", addr, (int)srv_pid);
	return 0;
}

static void case_echo(void)
{
	size_t max = xprt_max_msg(cx);
	CHECK(max >= 68 * 1024, "max_msg %zu too small", max);
	size_t sizes[] = {0, 64, 4096, 65536, max - 1};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		echo_check(cx, srv, sizes[i]);
	/* empty request body */
	size_t got = 99;
	int rc = xprt_call(cx, srv, NULL, 0, NULL, 0, &got, 5000);
	CHECK(rc == 0 && got == 0, "empty call: rc %d got %zu", rc, got);
	/* reply larger than the caller's buffer */
	unsigned char z[5] = {'Z'};
	uint32_t n = 1000;
	memcpy(z + 1, &n, 4);
	char small[10];
	rc = xprt_call(cx, srv, z, sizeof z, small, sizeof small, &got, 5000);
	CHECK(rc == -EMSGSIZE && got == 1000, "short reply buffer: rc %d got %zu", rc, got);
	/* oversized request */
	char *big = calloc(1, max + 2);
	rc = xprt_call(cx, srv, big, max + 1, NULL, 0, &got, 5000);
	CHECK(rc == -EMSGSIZE, "oversized request: rc %d", rc);
	free(big);
}

static void case_rma(void)
{
	size_t sizes[] = {4096, 1 << 20, 16 << 20};
	for (size_t i = 0; i < 3; i++) {
		rma_check(cx, srv, proto, 'R', sizes[i], (uint32_t)i + 1);
		rma_check(cx, srv, proto, 'W', sizes[i], (uint32_t)i + 11);
	}
}

#define NTHREADS 8
#define NCALLS 200

static void *concurrent_worker(void *arg)
{
	long t = (long)arg;
	int bad = 0;
	for (int i = 0; i < NCALLS; i++) {
		size_t n = (size_t)((t * 7919 + i * 104729) % 9000);
		char *req = malloc(n + 1), *rep = malloc(n + 1);
		req[0] = 'E';
		fill_pattern(req + 1, n, (uint32_t)(t * 1000 + i));
		size_t got = 0;
		int rc;
		if (i % 2) {
			xprt_call_t *c;
			rc = xprt_call_start(cx, srv, req, n + 1, rep, n + 1, 10000, &c);
			if (rc == 0)
				rc = xprt_call_wait(c, &got);
		} else {
			rc = xprt_call(cx, srv, req, n + 1, rep, n + 1, &got, 10000);
		}
		if (rc != 0 || got != n || memcmp(rep, req + 1, n) != 0)
			bad++;
		free(req);
		free(rep);
	}
	return (void *)(long)bad;
}

static void case_concurrent(void)
{
	double t0 = now_s();
	long bad = run_workers(NTHREADS, concurrent_worker);
	double dt = now_s() - t0;
	CHECK(bad == 0, "%ld of %d concurrent calls failed", bad, NTHREADS * NCALLS);
	printf("%s %d threads x %d calls: %.0f calls/s\n", proto, NTHREADS, NCALLS, NTHREADS * NCALLS / dt);
	/* many calls in flight from one thread */
	enum { N = 300 };
	xprt_call_t *c[N];
	char rep[N][16];
	for (int i = 0; i < N; i++) {
		char req[16];
		int n = snprintf(req, sizeof req, "E%d", i);
		int rc = xprt_call_start(cx, srv, req, (size_t)n, rep[i], sizeof rep[i], 10000, &c[i]);
		CHECK(rc == 0, "start %d: %s", i, strerror(-rc));
	}
	for (int i = 0; i < N; i++) {
		size_t got = 0;
		int rc = xprt_call_wait(c[i], &got);
		char want[16];
		int n = snprintf(want, sizeof want, "%d", i);
		CHECK(rc == 0 && got == (size_t)n && memcmp(rep[i], want, got) == 0, "async %d: rc %d", i,
		      rc);
	}
}

/* At most one thread hand-off per small call on each side (issue 18 item 2).
 * Server: an echo is answered on the progress thread, so it completes while the only worker
 * sleeps in another request (with the old path it queued behind it). Client: the caller reads
 * the CQ itself, so the progress thread does not wake per reply. Then threads that mix blocking
 * and asynchronous calls (waited in reverse order) pass the polling role among themselves. */
#define HOP_THREADS 8
#define HOP_CALLS 300
static void *hop_worker(void *arg)
{
	long id = (long)arg, bad = 0;
	for (int k = 0; k < HOP_CALLS / 4; k++) {
		xprt_call_t *c[3];
		char rep[4][32], req[4][32];
		int n[4];
		for (int i = 0; i < 4; i++)
			n[i] = snprintf(req[i], sizeof req[i], "E%ld-%d-%d", id, k, i);
		for (int i = 0; i < 3; i++)
			if (xprt_call_start(cx, srv, req[i], (size_t)n[i], rep[i], sizeof rep[i], 10000,
			                    &c[i]) < 0)
				c[i] = NULL, bad++;
		size_t got = 0;
		if (xprt_call(cx, srv, req[3], (size_t)n[3], rep[3], sizeof rep[3], &got, 10000) < 0 ||
		    got != (size_t)n[3] - 1 || memcmp(rep[3], req[3] + 1, got))
			bad++;
		for (int i = 2; i >= 0; i--) {
			if (!c[i])
				continue;
			got = 0;
			if (xprt_call_wait(c[i], &got) < 0 || got != (size_t)n[i] - 1 ||
			    memcmp(rep[i], req[i] + 1, got))
				bad++;
		}
	}
	return (void *)bad;
}

static void case_onehop(void)
{
	char addr[256];
	pid_t one = echo_server_start(proto, NULL, 1, addr, sizeof addr);
	xprt_peer_t *p1;
	CHECK(one > 0 && xprt_connect(cx, addr, &p1) == 0, "cannot start a 1-worker server");
	if (one <= 0)
		return;
	char e[] = "Eping", rep[32];
	size_t got;
	CHECK(xprt_call(cx, p1, e, sizeof e, rep, sizeof rep, &got, 5000) == 0, "first echo");
	unsigned char sreq[8] = {'S'};
	uint32_t ms = 1500;
	memcpy(sreq + 1, &ms, 4);
	xprt_call_t *slow;
	CHECK(xprt_call_start(cx, p1, sreq, 5, rep, sizeof rep, 10000, &slow) == 0, "start sleep");
	usleep(200000); /* the worker is asleep in it now */
	double t0 = now_s();
	int rc = xprt_call(cx, p1, e, sizeof e, rep, sizeof rep, &got, 5000);
	double dt = now_s() - t0;
	printf("%s echo while the only worker sleeps: %.3f s\n", proto, dt);
	CHECK(rc == 0 && got == sizeof e - 1 && memcmp(rep, e + 1, got) == 0, "echo beside a sleeper: %d",
	      rc);
	CHECK(dt < 0.6, "a small request waited %.2f s for a busy worker (not answered inline)", dt);
	CHECK(xprt_call_wait(slow, &got) == 0, "the sleeping request failed");
	echo_server_kill(one);

	struct xprt_stats a, b;
	xprt_get_stats(cx, &a);
	const int n = 2000;
	for (int i = 0; i < n; i++)
		if (xprt_call(cx, srv, e, sizeof e, rep, sizeof rep, &got, 5000) < 0)
			failures++;
	xprt_get_stats(cx, &b);
	unsigned long long w = (unsigned long long)(b.wakeups - a.wakeups);
	printf("%s %d sequential calls: %llu progress-thread wake-ups\n", proto, n, w);
	CHECK(w < (unsigned long long)n / 10,
	      "the progress thread woke %llu times for %d calls (a hand-off per reply)", w, n);

	long bad = run_workers(HOP_THREADS, hop_worker);
	CHECK(bad == 0, "%ld of %d mixed calls failed", bad, HOP_THREADS * HOP_CALLS);
}

static void case_timeout(void)
{
	echo_check(cx, srv, 10);
	echo_server_kill(srv_pid);
	srv_pid = -1;
	const int timeout = 1000;
	double t0 = now_s();
	char req[] = "Ehello", rep[16];
	size_t got;
	int rc = xprt_call(cx, srv, req, sizeof req, rep, sizeof rep, &got, timeout);
	double dt = now_s() - t0;
	printf("%s call to a killed server: %s after %.0f ms\n", proto, strerror(-rc), dt * 1e3);
	CHECK(rc == -ETIMEDOUT || rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ECONNRESET,
	      "dead server: rc %d (%s)", rc, strerror(-rc));
	CHECK(dt < timeout / 1e3 + 1.0, "dead server: took %.2f s for a %d ms timeout", dt, timeout);
	/* RMA-bearing and large calls to the dead peer also end in time */
	char *big = calloc(1, 100000);
	big[0] = 'E';
	t0 = now_s();
	rc = xprt_call(cx, srv, big, 100000, big, 100000, &got, timeout);
	dt = now_s() - t0;
	CHECK(rc < 0 && dt < timeout / 1e3 + 1.0, "dead server, 100 kB: rc %d in %.2f s", rc, dt);
	free(big);
}

/* A server that answered and then died (SIGKILL) fails the calls to it within a couple of
 * seconds, not at their 30 s timeout: one waiting for its reply when it died, and one sent
 * afterwards (rxm keeps that send queued while it reconnects in vain). xprt_reach.c probes
 * a peer that answered before every XPRT_REACH_AGAIN_MS. */
struct died_call {
	int rc;
	double dt;
};

static void *died_sleeper(void *arg)
{
	struct died_call *d = arg;
	unsigned char req[5] = {'S'};
	uint32_t ms = 20000; /* the server would reply after 20 s */
	memcpy(req + 1, &ms, 4);
	char rep[64];
	size_t got;
	double t0 = now_s();
	d->rc = xprt_call(cx, srv, req, sizeof req, rep, sizeof rep, &got, 30000);
	d->dt = now_s() - t0;
	return NULL;
}

static void case_died(void)
{
	echo_check(cx, srv, 10);
	struct died_call d = {0};
	pthread_t th;
	pthread_create(&th, NULL, died_sleeper, &d);
	usleep(300 * 1000);
	double t0 = now_s();
	echo_server_kill(srv_pid);
	srv_pid = -1;
	pthread_join(th, NULL);
	double after_kill = now_s() - t0;
	printf("%s call awaiting a reply when its server died: %s %.2f s after the kill\n", proto,
	       strerror(-d.rc), after_kill);
	CHECK(d.rc == -ECONNREFUSED || d.rc == -EHOSTUNREACH || d.rc == -ECONNRESET,
	      "awaited reply of a killed server: rc %d (%s)", d.rc, strerror(-d.rc));
	CHECK(after_kill < 3.0, "awaited reply of a killed server: failed %.2f s after the kill", after_kill);
	char req[] = "Eafter", rep[16];
	size_t got;
	t0 = now_s();
	int rc = xprt_call(cx, srv, req, sizeof req, rep, sizeof rep, &got, 30000);
	double dt = now_s() - t0;
	printf("%s call to a server that answered before and died: %s after %.2f s\n", proto, strerror(-rc),
	       dt);
	CHECK(rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ECONNRESET,
	      "call to a killed server: rc %d (%s)", rc, strerror(-rc));
	CHECK(dt < 3.0, "call to a killed server (30 s timeout) took %.2f s", dt);
}

static void case_late(void)
{
	/* The server sleeps 800 ms before replying; we give up after 200 ms and free the reply
	 * buffer. The late reply must be dropped (AddressSanitizer builds catch a write into the
	 * freed buffer), and the transport keeps working. */
	for (int i = 0; i < 4; i++) {
		unsigned char req[5 + 32] = {'S'};
		uint32_t ms = 800;
		memcpy(req + 1, &ms, 4);
		memset(req + 5, 'x', 32);
		char *rep = malloc(64);
		size_t got;
		double t0 = now_s();
		int rc = xprt_call(cx, srv, req, sizeof req, rep, 64, &got, 200);
		double dt = now_s() - t0;
		CHECK(rc == -ETIMEDOUT, "slow server: rc %d", rc);
		CHECK(dt < 0.2 + 0.5, "slow server: %.2f s for a 200 ms timeout", dt);
		free(rep);
	}
	sleep(1);
	struct xprt_stats st;
	xprt_get_stats(cx, &st);
	CHECK(st.timeouts >= 4, "stats count %llu timeouts", (unsigned long long)st.timeouts);
	echo_check(cx, srv, 100);
	echo_check(cx, srv, 60000);
}

static void case_badaddr(void)
{
	const char *bad[] = {"",
	                     "tcp",
	                     "tcp://",
	                     "tcp://1.2.3.4",
	                     "tcp://1.2.3.4:0",
	                     "tcp://1.2.3.4:99999",
	                     "tcp://:80",
	                     "bogus://x",
	                     "shm://",
	                     "shm://../x",
	                     "shm://a/b",
	                     "shm://a b",
	                     "://x",
	                     "tcp://1.2.3.4:12x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		xprt_peer_t *p = NULL;
		int rc = xprt_connect(cx, bad[i], &p);
		CHECK(rc == -EINVAL, "connect(\"%s\") = %d, want -EINVAL", bad[i], rc);
	}
	/* a well-formed address nobody listens on fails in time, without crashing */
	xprt_peer_t *nobody;
	const char *none =
	        strcmp(xprt_proto(cx), "shm") == 0 ? "shm://chfs-nobody-here" : "tcp://127.0.0.1:9";
	int rc = xprt_connect(cx, none, &nobody);
	if (rc == 0) {
		char rep[4];
		size_t got;
		double t0 = now_s();
		rc = xprt_call(cx, nobody, "E", 1, rep, sizeof rep, &got, 500);
		CHECK(rc < 0 && now_s() - t0 < 1.5, "call to %s: rc %d after %.2f s", none, rc, now_s() - t0);
	}
	printf("%s call to %s: %s\n", proto, none, strerror(-rc));
	/* the other protocol's address is refused too */
	const char *other = strcmp(xprt_proto(cx), "shm") == 0 ? "tcp://127.0.0.1:5" : "shm://x";
	xprt_peer_t *p;
	CHECK(xprt_connect(cx, other, &p) == -EINVAL, "cross-protocol address accepted");
	xprt_t *x;
	struct xprt_opts o = {.proto = "carrier-pigeon"};
	CHECK(xprt_open(&o, &x) == -EINVAL, "unknown protocol accepted");
	/* the same string gives the same peer */
	char self[256];
	xprt_self_addr(cx, self, sizeof self);
	xprt_peer_t *a, *b;
	CHECK(xprt_connect(cx, self, &a) == 0 && xprt_connect(cx, self, &b) == 0 && a == b,
	      "connect(self) not cached");
	CHECK(strcmp(xprt_peer_addr(a), self) == 0, "peer addr %s != %s", xprt_peer_addr(a), self);
	echo_check(cx, srv, 1);
}

/* A server restarted at the same address (same tcp port / shm name) is reachable again through
 * the peer the client already holds. */
static void case_restart(void)
{
	echo_check(cx, srv, 10);
	char host[128], addr[256];
	const char *rest = strstr(xprt_peer_addr(srv), "://") + 3;
	snprintf(host, sizeof host, "%s", rest);
	for (int round = 0; round < 2; round++) {
		echo_server_kill(srv_pid);
		char req[] = "Ex", rep[8];
		size_t got;
		int rc = xprt_call(cx, srv, req, 2, rep, sizeof rep, &got, 300);
		CHECK(rc < 0, "call to a killed server succeeded");
		srv_pid = echo_server_start(proto, host, 4, addr, sizeof addr);
		CHECK(srv_pid > 0, "restart on %s failed", host);
		if (srv_pid <= 0)
			return;
		CHECK(strcmp(addr, xprt_peer_addr(srv)) == 0, "restarted at %s, not %s", addr,
		      xprt_peer_addr(srv));
		double t0 = now_s();
		do
			rc = xprt_call(cx, srv, req, 2, rep, sizeof rep, &got, 1000);
		while (rc < 0 && now_s() - t0 < 5);
		printf("%s after restart %d: %s after %.2f s\n", proto, round, rc ? strerror(-rc) : "ok",
		       now_s() - t0);
		CHECK(rc == 0, "restarted server unreachable: %s", strerror(-rc));
		echo_check(cx, srv, 70000);
	}
	if (strcmp(xprt_proto(cx), "shm") == 0) {
		echo_server_kill(srv_pid);
		srv_pid = -1;
		echo_server_remove_shm(host);
	}
}

/* A child forked while calls run abandons the parent's transport, opens its own and talks to
 * the same server; the parent keeps working meanwhile and after. */
static void case_fork(void)
{
	echo_check(cx, srv, 10);
	char addr[256];
	snprintf(addr, sizeof addr, "%s", xprt_peer_addr(srv));
	pid_t c = fork();
	if (c == 0) {
		alarm(30);
		xprt_abandon_after_fork(cx);
		xprt_t *x2;
		xprt_peer_t *p2;
		struct xprt_opts o = {.proto = proto};
		int rc = xprt_open(&o, &x2);
		if (rc == 0)
			rc = xprt_connect(x2, addr, &p2);
		for (int i = 0; rc == 0 && i < 50; i++) {
			char req[64], rep[64];
			int n = snprintf(req, sizeof req, "Echild %d", i);
			size_t got;
			rc = xprt_call(x2, p2, req, (size_t)n, rep, sizeof rep, &got, 5000);
			if (rc == 0 && (got != (size_t)n - 1 || memcmp(rep, req + 1, got) != 0))
				rc = -EIO;
		}
		if (rc == 0)
			xprt_close(x2);
		else
			fprintf(stderr, "forked child: %s\n", strerror(-rc));
		_exit(rc == 0 ? 0 : 1);
	}
	for (int i = 0; i < 50; i++)
		echo_check(cx, srv, 100 + (size_t)i);
	int status = -1;
	waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child failed (status %#x)", status);
	echo_check(cx, srv, 10);
	echo_check(cx, srv, 70000);
}

/* shm: a SIGKILLed process leaves libfabric's 16 MiB region and our doorbell in /dev/shm; the
 * next process that opens an shm transport removes them (its owner pid is gone). */
static void case_sweep(void)
{
	char name[128], region[256], bell[256];
	snprintf(name, sizeof name, "%s", xprt_peer_addr(srv) + strlen("shm://"));
	struct shm_doorbell *db = shm_doorbell_open(name);
	CHECK(db && db->epname[0], "no doorbell (or no endpoint name in it) for %s", name);
	if (!db)
		return;
	/* libfabric's region is named after the incarnation, published in the doorbell */
	snprintf(region, sizeof region, "/dev/shm/%.*s", (int)sizeof db->epname, db->epname);
	shm_doorbell_unmap(db);
	snprintf(bell, sizeof bell, "/dev/shm/chfs-xprt-db.%s", name);
	/* Traffic a second later touches the region (tmpfs ctime) after the doorbell was made. */
	sleep(1);
	echo_check(cx, srv, 70000);
	kill(srv_pid, SIGKILL);
	waitpid(srv_pid, NULL, 0);
	srv_pid = -1;
	CHECK(access(region, F_OK) == 0 && access(bell, F_OK) == 0,
	      "a killed server left no files to sweep (%s)", region);
	/* a fresh process (exec: the sweep runs once per process) opening an shm transport */
	pid_t c = fork();
	if (c == 0) {
		execl("/proc/self/exe", "xprt_test", "shm", "echo", (char *)NULL);
		_exit(127);
	}
	int status = -1;
	waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fresh shm process failed");
	CHECK(access(region, F_OK) != 0, "stale region %s not swept", region);
	CHECK(access(bell, F_OK) != 0, "stale doorbell %s not swept", bell);
	echo_server_remove_shm(name);
}

/* A doorbell file left by a dead process names the libfabric region to remove with it. Another
 * user can plant such a file (0666, a dead pid, a name with "../"): the sweep of a root process
 * must then remove nothing — neither the file the name points at nor anything of that user. */
static pid_t dead_pid(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	return p;
}

static int plant_doorbell(const char *bell, pid_t pid, const char *epname)
{
	int fd = open(bell, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	struct shm_doorbell db;
	memset(&db, 0, sizeof db);
	db.owner_pid = (int32_t)pid;
	snprintf(db.epname, sizeof db.epname, "%s", epname);
	int rc = ftruncate(fd, 4096) == 0 && pwrite(fd, &db, sizeof db, 0) == (ssize_t)sizeof db &&
	                         fchmod(fd, 0666) == 0
	                 ? 0
	                 : -errno;
	close(fd);
	return rc;
}

static void case_sweep_attack(void)
{
	char victim[128], victim_ep[160], own_bell[128], region[128], bell[128], bell2[128];
	int me = (int)getpid();
	pid_t dead = dead_pid();
	snprintf(victim, sizeof victim, "/tmp/chfs-sweep-victim-%d", me);
	snprintf(victim_ep, sizeof victim_ep, "../..%s", victim);
	snprintf(region, sizeof region, "/dev/shm/chfs-sweep-other-%d", me);
	snprintf(bell, sizeof bell, "/dev/shm/chfs-xprt-db.sweep-evil-%d", me);
	snprintf(bell2, sizeof bell2, "/dev/shm/chfs-xprt-db.sweep-other-%d", me);
	snprintf(own_bell, sizeof own_bell, "/dev/shm/chfs-xprt-db.sweep-own-%d", me);
	int fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "cannot create %s: %s", victim, strerror(errno));
	if (fd >= 0)
		close(fd);
	/* Our own doorbell naming a path outside /dev/shm: names are validated, not trusted. */
	CHECK(plant_doorbell(own_bell, dead, victim_ep) == 0, "cannot plant %s", own_bell);
	struct passwd *pw = getuid() == 0 ? getpwnam("nobody") : NULL;
	CHECK(getuid() != 0 || pw, "no user nobody");
	if (pw) {
		/* The other user's files: a doorbell naming our victim, and a doorbell + region of
		 * its own (a dead pid, so the old sweep removed both). */
		pid_t c = fork();
		if (c == 0) {
			if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
				_exit(3);
			int rfd = open(region, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (rfd < 0)
				_exit(4);
			close(rfd);
			_exit(plant_doorbell(bell, dead, victim_ep) == 0 &&
			                      plant_doorbell(bell2, dead, region + strlen("/dev/shm/")) == 0
			              ? 0
			              : 5);
		}
		int st = -1;
		waitpid(c, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "planting as nobody failed (%#x)", st);
	}
	pid_t c = fork();
	if (c == 0) {
		execl("/proc/self/exe", "xprt_test", "shm", "echo", (char *)NULL);
		_exit(127);
	}
	int status = -1;
	waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fresh shm process failed");
	CHECK(access(victim, F_OK) == 0, "the sweep deleted %s", victim);
	if (pw) {
		CHECK(access(bell, F_OK) == 0, "the sweep deleted nobody's %s", bell);
		CHECK(access(bell2, F_OK) == 0, "the sweep deleted nobody's %s", bell2);
		CHECK(access(region, F_OK) == 0, "the sweep deleted nobody's %s", region);
	}
	CHECK(access(own_bell, F_OK) != 0, "our own dead doorbell %s was not swept", own_bell);
	unlink(victim);
	unlink(bell);
	unlink(bell2);
	unlink(region);
	unlink(own_bell);
}

/* One 'R'/'W'/'P' call of `len` bytes of `buf` to peer `to`; returns the server's {rc, hash}. */
static int rma_call(xprt_t *x, xprt_peer_t *to, char op, void *buf, size_t len, uint32_t seed, int timeout_ms,
                    int64_t out[2])
{
	xprt_mem_t *mr;
	struct echo_rma_req q = {.len = len, .seed = seed};
	int rc = xprt_mem_register(x, buf, len, XPRT_MEM_REMOTE_READ | XPRT_MEM_REMOTE_WRITE, &mr, &q.desc);
	if (rc < 0)
		return rc;
	unsigned char req[1 + sizeof q];
	req[0] = (unsigned char)op;
	memcpy(req + 1, &q, sizeof q);
	size_t got;
	out[0] = -1;
	out[1] = 0;
	rc = xprt_call(x, to, req, sizeof req, out, 2 * sizeof *out, &got, timeout_ms);
	xprt_mem_deregister(mr);
	return rc;
}

/* shm: a peer's doorbell mapping is used without a lock by every thread that sends or kicks (one
 * load per send); when the peer restarts, the resolving thread must not unmap the old mapping
 * under them. Hold on to the old mapping as a concurrent sender would, let the peer restart and
 * be resolved again, then use it: it must still be mapped and still be the old one's. */
static void case_dblife(void)
{
	echo_check(cx, srv, 10);
	struct shm_doorbell *old = srv->db;
	CHECK(old != NULL, "no doorbell mapped for the server");
	if (!old)
		return;
	char host[128], addr[256];
	snprintf(host, sizeof host, "%s", strstr(xprt_peer_addr(srv), "://") + 3);
	echo_server_kill(srv_pid);
	srv_pid = echo_server_start(proto, host, 4, addr, sizeof addr);
	CHECK(srv_pid > 0, "restart on %s failed", host);
	if (srv_pid <= 0)
		return;
	char req[] = "Ex", rep[8];
	size_t got;
	int rc;
	double t0 = now_s();
	do
		rc = xprt_call(cx, srv, req, 2, rep, sizeof rep, &got, 1000);
	while (rc < 0 && now_s() - t0 < 5);
	CHECK(rc == 0, "the restarted server is unreachable: %s", strerror(-rc));
	CHECK(srv->db != old, "the old doorbell was unmapped under its users (its address now "
	                      "holds the new mapping)");
	/* what a thread that loaded the pointer before the re-resolution does next: the mapping is
	 * still the old incarnation's (not unmapped, not reused for the new one) */
	(void)atomic_load(&old->closed);
	shm_doorbell_ring(old);
	struct shm_doorbell *now = srv->db;
	CHECK(now && strncmp(old->epname, now->epname, sizeof old->epname) != 0,
	      "the old mapping now shows the new incarnation %s", now ? now->epname : "-");
	echo_check(cx, srv, 100);
	echo_server_kill(srv_pid);
	srv_pid = -1;
	echo_server_remove_shm(host);
}

static long vm_data_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmData: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* Receive buffers (~135 KiB each) follow the calls in flight; their pool must stay bounded:
 * 1000 calls in flight at once cost at most a few tens of MB, and all of them still succeed. */
#define BUFS_CALLS 1000
static void case_bufs(void)
{
	echo_check(cx, srv, 10);
	static xprt_call_t *calls[BUFS_CALLS];
	static char rep[BUFS_CALLS][16];
	long before = vm_data_kb();
	int started = 0, ok = 0;
	for (int i = 0; i < BUFS_CALLS; i++) {
		char req[16];
		int n = snprintf(req, sizeof req, "E%d", i);
		calls[i] = NULL;
		if (xprt_call_start(cx, srv, req, (size_t)n, rep[i], sizeof rep[i], 30000, &calls[i]) == 0)
			started++;
	}
	long peak = vm_data_kb();
	for (int i = 0; i < BUFS_CALLS; i++) {
		size_t got;
		char want[16];
		int n = snprintf(want, sizeof want, "%d", i);
		if (calls[i] && xprt_call_wait(calls[i], &got) == 0 && got == (size_t)n &&
		    memcmp(rep[i], want, got) == 0)
			ok++;
	}
	printf("%s %d calls in flight: data segment %+ld MB, %d replies ok\n", proto, started,
	       (peak - before) / 1024, ok);
	CHECK(ok == BUFS_CALLS, "%d of %d calls failed", BUFS_CALLS - ok, BUFS_CALLS);
	CHECK(before > 0 && peak - before < 48 * 1024, "receive buffers grew by %ld MB",
	      (peak - before) / 1024);
}

/* Requests the server's admission function rejects get no reply and leave no peer behind, however
 * many sender addresses claim them. */
#define ADMIT_CLIENTS 12
static void case_admit(void)
{
	uint64_t before[2] = {0}, after[2] = {0};
	size_t got;
	char t = 'T';
	CHECK(xprt_call(cx, srv, &t, 1, before, sizeof before, &got, 5000) == 0, "stats");
	xprt_t *xs[ADMIT_CLIENTS];
	xprt_call_t *calls[ADMIT_CLIENTS];
	char rep[ADMIT_CLIENTS][8];
	for (int i = 0; i < ADMIT_CLIENTS; i++) {
		struct xprt_opts o = {.proto = proto};
		xprt_peer_t *p;
		calls[i] = NULL;
		if (xprt_open(&o, &xs[i]) < 0 || xprt_connect(xs[i], xprt_peer_addr(srv), &p) < 0 ||
		    xprt_call_start(xs[i], p, "Xhello", 6, rep[i], sizeof rep[i], 800, &calls[i]) < 0)
			CHECK(0, "client %d could not send", i);
	}
	int replies = 0;
	for (int i = 0; i < ADMIT_CLIENTS; i++) {
		if (calls[i] && xprt_call_wait(calls[i], &got) != -ETIMEDOUT)
			replies++;
		xprt_close(xs[i]);
	}
	CHECK(replies == 0, "%d refused requests got a reply", replies);
	CHECK(xprt_call(cx, srv, &t, 1, after, sizeof after, &got, 5000) == 0, "stats");
	printf("%s admission: peers %llu -> %llu, refused %llu -> %llu\n", proto,
	       (unsigned long long)before[0], (unsigned long long)after[0], (unsigned long long)before[1],
	       (unsigned long long)after[1]);
	CHECK(after[0] == before[0], "refused senders became peers (%llu -> %llu)",
	      (unsigned long long)before[0], (unsigned long long)after[0]);
	CHECK(after[1] - before[1] == ADMIT_CLIENTS, "refused %llu of %d",
	      (unsigned long long)(after[1] - before[1]), ADMIT_CLIENTS);
	echo_check(cx, srv, 100);
}

/* tcp: a client that stops progressing in the middle of the server's RMA read (SIGSTOP). The
 * server must give up with a clear error and must not use the buffer the late transfer can still
 * land in: once the stalled client resumes, the worker's buffer (which meanwhile served another
 * client) must still hold that other client's data. */
#define STALL_LEN (16u << 20)
static void case_stall(void)
{
	char addr[256];
	pid_t s1 = echo_server_start(proto, NULL, 1, addr, sizeof addr); /* one worker, one buffer */
	xprt_peer_t *one;
	CHECK(s1 > 0 && xprt_connect(cx, addr, &one) == 0, "cannot start a 1-worker server");
	if (s1 <= 0)
		return;
	char *mine = malloc(STALL_LEN);
	fill_pattern(mine, STALL_LEN, 202);
	uint64_t want = fnv1a(mine, STALL_LEN);
	int64_t out[2];
	/* prime the worker's buffer at full size */
	CHECK(rma_call(cx, one, 'R', mine, STALL_LEN, 202, 20000, out) == 0 && out[0] == 0,
	      "first read failed");
	int ready[2];
	CHECK(pipe(ready) == 0, "pipe");
	pid_t a = fork();
	if (a == 0) {
		close(ready[0]);
		xprt_t *ax;
		xprt_peer_t *ap;
		struct xprt_opts o = {.proto = proto};
		if (xprt_open(&o, &ax) < 0 || xprt_connect(ax, addr, &ap) < 0)
			_exit(2);
		char *buf = malloc(STALL_LEN);
		fill_pattern(buf, STALL_LEN, 101);
		xprt_mem_t *mr;
		struct echo_rma_req q = {.len = STALL_LEN, .seed = 101};
		char e[] = "Ehi", rep[8];
		size_t got;
		if (xprt_call(ax, ap, e, sizeof e, rep, sizeof rep, &got, 5000) < 0 ||
		    xprt_mem_register(ax, buf, STALL_LEN, XPRT_MEM_REMOTE_READ, &mr, &q.desc) < 0)
			_exit(3);
		unsigned char req[1 + sizeof q];
		req[0] = 'R';
		memcpy(req + 1, &q, sizeof q);
		int64_t res[2] = {1, 0};
		xprt_call_t *c;
		if (xprt_call_start(ax, ap, req, sizeof req, res, sizeof res, 120000, &c) < 0)
			_exit(4);
		if (write(ready[1], "x", 1) != 1)
			_exit(5);
		raise(SIGSTOP); /* every thread stops: the server's read of buf stalls */
		int rc = xprt_call_wait(c, &got);
		printf("stalled client: call %s, server status %s\n", strerror(-rc), strerror((int)-res[0]));
		_exit(rc == 0 && res[0] == -ETIMEDOUT ? 0 : 6);
	}
	close(ready[1]);
	char x;
	CHECK(read(ready[0], &x, 1) == 1, "stalling client did not start");
	close(ready[0]);
	int st = 0;
	waitpid(a, &st, WUNTRACED);
	CHECK(WIFSTOPPED(st), "client did not stop");
	/* Queued behind the stalled read on the single worker: runs once the server gave up. */
	double t0 = now_s();
	int rc = rma_call(cx, one, 'R', mine, STALL_LEN, 202, 120000, out);
	printf("%s read queued behind a stalled transfer: %.1f s\n", proto, now_s() - t0);
	CHECK(rc == 0 && out[0] == 0 && (uint64_t)out[1] == want, "read after the stall: rc %d %d", rc,
	      (int)out[0]);
	kill(a, SIGCONT); /* the late transfer now completes into whatever buffer it targeted */
	st = -1;
	waitpid(a, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "stalled client got no clear error (%#x)", st);
	usleep(300000);
	rc = rma_call(cx, one, 'P', mine, STALL_LEN, 0, 20000, out);
	CHECK(rc == 0 && (uint64_t)out[1] == want,
	      "the worker's buffer changed after the timed-out transfer (silent corruption)");
	free(mine);
	echo_server_kill(s1);
}

/* tcp under a 10 Mbit/s rate limit (ctest runs it in its own network namespace): a 40 MiB
 * transfer takes ~35 s. Slow but progressing, it must succeed. */
static void case_slow(void)
{
	size_t len = 40u << 20;
	char *buf = malloc(len);
	fill_pattern(buf, len, 303);
	int64_t out[2];
	double t0 = now_s();
	int rc = rma_call(cx, srv, 'R', buf, len, 303, 0, out);
	double dt = now_s() - t0;
	printf("%s slow read of %zu MiB: %.1f s (%.2f MB/s), rc %d server %d\n", proto, len >> 20, dt,
	       len / dt / 1e6, rc, (int)out[0]);
	CHECK(rc == 0 && out[0] == 0 && (uint64_t)out[1] == fnv1a(buf, len),
	      "slow but progressing transfer failed: rc %d server %s", rc, strerror((int)-out[0]));
	free(buf);
}

static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	/* fields after ')': state(3) ... utime(14) stime(15) */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static void case_idle(void)
{
	echo_check(cx, srv, 10);
	const double span = 3.0;
	sleep(1); /* let back-off reach its long sleeps */
	double s0 = proc_cpu_s(srv_pid), c0 = self_cpu_s(), t0 = now_s();
	sleep((unsigned)span);
	double s1 = proc_cpu_s(srv_pid), c1 = self_cpu_s(), dt = now_s() - t0;
	double spct = 100 * (s1 - s0) / dt, cpct = 100 * (c1 - c0) / dt;
	printf("%s idle CPU over %.1f s: server %.2f%%, client %.2f%%\n", proto, dt, spct, cpct);
	CHECK(s0 >= 0 && spct < 3.0, "idle server uses %.2f%% CPU", spct);
	CHECK(cpct < 3.0, "idle client uses %.2f%% CPU", cpct);
	echo_check(cx, srv, 10);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr,
		        "usage: %s <proto> echo|rma|concurrent|timeout|late|badaddr|restart|fork|idle|admit|bufs|onehop|sweep|sweep_attack|dblife(shm)|stall|slow|died(tcp)\n",
		        argv[0]);
		return 2;
	}
	proto = argv[1];
	const char *c = argv[2];
	alarm(140);
	if (setup() < 0)
		return 1;
	if (!strcmp(c, "echo"))
		case_echo();
	else if (!strcmp(c, "rma"))
		case_rma();
	else if (!strcmp(c, "concurrent"))
		case_concurrent();
	else if (!strcmp(c, "timeout"))
		case_timeout();
	else if (!strcmp(c, "late"))
		case_late();
	else if (!strcmp(c, "badaddr"))
		case_badaddr();
	else if (!strcmp(c, "restart"))
		case_restart();
	else if (!strcmp(c, "fork"))
		case_fork();
	else if (!strcmp(c, "sweep") && !strcmp(proto, "shm"))
		case_sweep();
	else if (!strcmp(c, "sweep_attack") && !strcmp(proto, "shm"))
		case_sweep_attack();
	else if (!strcmp(c, "dblife") && !strcmp(proto, "shm"))
		case_dblife();
	else if (!strcmp(c, "bufs"))
		case_bufs();
	else if (!strcmp(c, "admit"))
		case_admit();
	else if (!strcmp(c, "stall") && !strcmp(proto, "tcp"))
		case_stall();
	else if (!strcmp(c, "slow") && !strcmp(proto, "tcp"))
		case_slow();
	else if (!strcmp(c, "died") && !strcmp(proto, "tcp"))
		case_died();
	else if (!strcmp(c, "idle"))
		case_idle();
	else if (!strcmp(c, "onehop"))
		case_onehop();
	else {
		fprintf(stderr, "unknown case %s\n", c);
		failures++;
	}
	xprt_close(cx);
	echo_server_kill(srv_pid);
	printf("%s %s: %s\n", proto, c, failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
