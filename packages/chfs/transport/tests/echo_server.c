/*
 * echo_server.c — the test server in a child process (see echo_server.h).
 */
#include "echo_server.h"
#include "shm_doorbell.h"

#include <errno.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t fnv1a(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

void fill_pattern(void *buf, size_t len, uint32_t seed)
{
	unsigned char *p = buf;
	uint32_t s = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		s = s * 1103515245u + 12345u;
		p[i] = (unsigned char)(s >> 16);
	}
}

/* Requests starting with 'X' lack the "credential": refused before any state is kept. */
static int admit(const void *body, size_t len, void *arg)
{
	(void)arg;
	return !(len > 0 && *(const unsigned char *)body == 'X');
}

static void handle(xprt_req_t *r, void *arg)
{
	size_t len;
	const unsigned char *b = xprt_req_data(r, &len);
	if (len == 0) {
		xprt_reply(r, NULL, 0);
		return;
	}
	struct echo_rma_req q;
	switch (b[0]) {
	case 'E': xprt_reply(r, b + 1, len - 1); return;
	case 'T': {
		struct xprt_stats st;
		xprt_get_stats(arg, &st);
		uint64_t out[2] = {st.peers, st.refused};
		xprt_reply(r, out, sizeof out);
		return;
	}
	case 'S': {
		uint32_t ms;
		memcpy(&ms, b + 1, 4);
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		xprt_reply(r, b + 5, len - 5);
		return;
	}
	case 'Z': {
		uint32_t n;
		memcpy(&n, b + 1, 4);
		char *buf = malloc(n ? n : 1);
		fill_pattern(buf, n, 7);
		xprt_reply(r, buf, n);
		free(buf);
		return;
	}
	case 'R':
	case 'W':
	case 'P': {
		/* one buffer per worker thread, kept: a fresh 1 MiB malloc per request would be an
		 * mmap plus 256 page faults each time */
		static __thread char *buf;
		static __thread size_t cap;
		memcpy(&q, b + 1, sizeof q);
		if (q.len > cap) {
			free(buf);
			cap = q.len;
			buf = malloc(cap);
		}
		int rc = 0;
		uint64_t h = 0;
		if (b[0] == 'P') {
			h = fnv1a(buf, q.len); /* what this worker's buffer holds now */
		} else if (b[0] == 'R') {
			rc = xprt_rma_read(r, &q.desc, 0, buf, q.len);
			if (q.seed)
				h = fnv1a(buf, q.len);
		} else {
			if (q.seed)
				fill_pattern(buf, q.len, q.seed);
			rc = xprt_rma_write(r, &q.desc, 0, buf, q.len);
		}
		if (rc < 0) { /* a late transfer may still touch buf */
			xprt_rma_retire(r, buf);
			buf = NULL;
			cap = 0;
		}
		int64_t out[2] = {rc, (int64_t)h};
		xprt_reply(r, out, sizeof out);
		return;
	}
	}
	xprt_reply(r, "?", 1);
}

/* Echo ('E') is answered on the progress thread (xprt_serve_inline) unless CHFS_XPRT_INLINE=0. */
static int handle_inline(xprt_req_t *r, void *arg)
{
	size_t len;
	const unsigned char *b = xprt_req_data(r, &len);
	if (len == 0 || b[0] != 'E')
		return 0;
	(void)arg;
	xprt_reply(r, b + 1, len - 1);
	return 1;
}

/* The child's part: open the server, write its address (or "ERROR ...") to fd, serve until
 * killed. */
static void serve(const char *proto, const char *host, unsigned nworkers, int fd)
{
	xprt_t *x;
	struct xprt_opts o = {.proto = proto, .host = host, .is_server = 1, .nworkers = nworkers};
	char a[256] = "";
	int rc = xprt_open(&o, &x);
	if (rc == 0)
		rc = xprt_self_addr(x, a, sizeof a);
	if (rc == 0)
		rc = xprt_serve_admit(x, admit, NULL);
	const char *inl = getenv("CHFS_XPRT_INLINE");
	if (rc == 0 && !(inl && strcmp(inl, "0") == 0))
		rc = xprt_serve_inline(x, handle_inline, NULL);
	if (rc == 0)
		rc = xprt_serve(x, handle, x);
	if (rc < 0)
		snprintf(a, sizeof a, "ERROR %s", strerror(-rc));
	if (write(fd, a, strlen(a) + 1) < 0)
		_exit(1);
	close(fd);
	if (rc < 0)
		_exit(1);
	for (;;) {
		sleep(1);
		if (getenv("ECHO_SERVER_DEBUG")) {
			struct xprt_stats st;
			xprt_get_stats(x, &st);
			fprintf(stderr, "echo server: %llu requests, %llu wakeups\n",
			        (unsigned long long)st.requests, (unsigned long long)st.wakeups);
		}
	}
}

/* The server child is this program run again: the fork is followed by nothing but an exec.
 * It used to open the server in the forked copy itself, and a fork of a client with threads
 * (a transport's, freeing what a killed server left) could copy a lock another thread held —
 * malloc's under ASan, whose allocator takes no fork handlers here — and the child then hung
 * in xprt_open while the parent waited for its address (xprt_local_shm_unpublished, once,
 * until the test's alarm). This constructor turns the new image into the server. */
#define CHILD_VAR "CHFS_ECHO_SERVER_CHILD"
extern char **environ;

__attribute__((constructor)) static void echo_server_child(void)
{
	const char *v = getenv(CHILD_VAR);
	char proto[32], host[256];
	unsigned nworkers;
	int fd;
	if (!v || sscanf(v, "%d %u %31s %255s", &fd, &nworkers, proto, host) != 4)
		return;
	unsetenv(CHILD_VAR);
	serve(proto, strcmp(host, "-") ? host : NULL, nworkers, fd);
}

/* environ without CHILD_VAR, plus CHILD_VAR=var (NULL on ENOMEM). */
static char **child_env(const char *var)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = malloc((n + 2) * sizeof *env);
	size_t k = 0;
	for (size_t i = 0; env && i < n; i++)
		if (strncmp(environ[i], CHILD_VAR "=", sizeof CHILD_VAR) != 0)
			env[k++] = environ[i];
	if (env) {
		env[k++] = (char *)var;
		env[k] = NULL;
	}
	return env;
}

/* The child's address from fd, waiting at most START_WAIT_MS. */
#define START_WAIT_MS 60000
static ssize_t read_addr(int fd, char *addr, size_t size)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int rc;
	while ((rc = poll(&p, 1, START_WAIT_MS)) < 0 && errno == EINTR)
		;
	if (rc == 0)
		fprintf(stderr, "echo server: no address within %d ms\n", START_WAIT_MS);
	return rc > 0 ? read(fd, addr, size - 1) : -1;
}

pid_t echo_server_start(const char *proto, const char *host, unsigned nworkers, char *addr, size_t size)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -errno;
	char var[sizeof CHILD_VAR + 320];
	snprintf(var, sizeof var, CHILD_VAR "=%d %u %s %s", fds[1], nworkers, proto, host ? host : "-");
	char **env = child_env(var);
	int dumpable = prctl(PR_GET_DUMPABLE) == 1; /* the new image would be, unlike this copy */
	pid_t pid = env ? fork() : -1;
	if (pid < 0) {
		int e = env ? errno : ENOMEM;
		free(env);
		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		char *argv[] = {"echo-server", NULL};
		if (dumpable) /* else a test changed its identity: the copy serves, as it has to */
			execve("/proc/self/exe", argv, env);
		serve(proto, host, nworkers, fds[1]);
	}
	free(env);
	close(fds[1]);
	ssize_t n = read_addr(fds[0], addr, size);
	close(fds[0]);
	if (n <= 0 || strncmp(addr, "ERROR", 5) == 0) {
		if (n > 0)
			fprintf(stderr, "echo server: %.*s\n", (int)n, addr);
		echo_server_kill(pid);
		return -EIO;
	}
	addr[n] = 0;
	return pid;
}

void echo_server_remove_shm(const char *name)
{
	/* libfabric's region is named after the incarnation ("<name>~<tag>"), which the doorbell
	 * file publishes. */
	char path[256];
	struct shm_doorbell *db = shm_doorbell_open(name);
	if (db) {
		snprintf(path, sizeof path, "/dev/shm/%.*s", (int)sizeof db->epname, db->epname);
		if (db->epname[0])
			unlink(path);
		shm_doorbell_unmap(db);
	}
	snprintf(path, sizeof path, "/dev/shm/%s", name);
	unlink(path);
	snprintf(path, sizeof path, "/dev/shm/chfs-xprt-db.%s", name);
	unlink(path);
}

void echo_server_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* A SIGKILLed shm server leaves its region and doorbell files behind. */
	char pat[2][64];
	snprintf(pat[0], sizeof pat[0], "/dev/shm/chfs-%d-*", (int)pid);
	snprintf(pat[1], sizeof pat[1], "/dev/shm/chfs-xprt-db.chfs-%d-*", (int)pid);
	for (int i = 0; i < 2; i++) {
		glob_t g;
		if (glob(pat[i], 0, NULL, &g) == 0)
			for (size_t j = 0; j < g.gl_pathc; j++)
				unlink(g.gl_pathv[j]);
		globfree(&g);
	}
}
