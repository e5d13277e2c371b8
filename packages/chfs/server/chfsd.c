/*
 * chfsd.c — the CHFS server: options, start-up, daemonising, shutdown.
 *
 * Start-up order: parse options -> (fork into the background unless -f; the parent waits on a
 * pipe until the child is serving or failed, so `chfsd` returning 0 means the server answers)
 * -> read the pool secret -> start the storage I/O engine (io_engine.h) -> open the storage directory -> open the transport (reusing the
 * address saved in DIR/chfsd.addr when -h names no port, so a restarted server keeps its place
 * in the pool) -> read or create the identity (DIR/server.id), begin a pool of one, join
 * the bootstrap server if one was given -> serve
 * -> write the server-info file (-S) -> wait for SIGTERM/SIGINT -> drain and exit.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "chfsd.h"
#include "io_engine.h"
#include "orphans.h"

#include "config.h"
#include "log.h"
#include "placement.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Until the server answers, SIGTERM/SIGINT/SIGHUP end it at once; afterwards the main thread
 * takes them (and SIGUSR1: leave the pool gracefully) with sigwait. */
static void on_signal(int sig) { _exit(1); }

/* p made absolute against the current directory (NULL stays NULL; leaks: lives for the
 * whole process). */
static const char *absolute(const char *p)
{
	char cwd[4096], *out;
	if (!p || p[0] == '/' || !getcwd(cwd, sizeof cwd))
		return p;
	if (asprintf(&out, "%s/%s", cwd, p) < 0)
		return p;
	return out;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: chfsd [options] [bootstrap-server]\n"
	           "CHFS server: serves the chunks and namespace entries this server owns from a storage\n"
	           "directory. With a bootstrap server address it joins that server's pool.\n"
	           "  -c DIR      storage directory (default /tmp/chfs-$USER)\n"
	           "  -b DIR      backend directory (default $CHFS_BACKEND_PATH): a path CHFS does not\n"
	           "              have is read through from DIR/path, chunk by chunk on the servers\n"
	           "              owning the chunks (chunk size $CHFS_CHUNK_SIZE, default 64 KiB); files\n"
	           "              written in CHFS are flushed back to DIR/path\n"
	           "  -F N        flush threads (default 1; 0 = flush only at chfs_sync and shutdown)\n"
	           "  -U SEC      flush a file SEC seconds after its last write (default 1; < 0: at once)\n"
	           "  -p PROTO    protocol: tcp (default), shm, verbs, sockets\n"
	           "  -h HOST     address/interface[:port] to listen on (default 127.0.0.1 for tcp)\n"
	           "  -S FILE     write this server's address to FILE once serving\n"
	           "  -P FILE     write the process id to FILE\n"
	           "  -T N        worker threads (default 4)\n"
	           "  -t MSEC     RPC timeout for server-to-server calls (default 30000)\n"
	           "  -V N        virtual nodes per server on the placement ring (default 64, 1..1024);\n"
	           "              a pool property: set it on the first server, joining servers adopt it\n"
	           "  -k FILE     pool secret file (default $CHFS_SECRET_FILE or ~/.chfs/secret)\n"
	           "  -l FILE     log to FILE instead of stderr\n"
	           "  -L LEVEL    log priority: err, warning, notice (default), info, debug\n"
	           "  -f          stay in the foreground\n"
	           "  --io=ENGINE storage I/O: uring (default; io_uring through libasyncsys, or its\n"
	           "              execution threads where io_uring is unavailable) or sync\n"
	           "              (pread/pwrite); default $CHFS_IO_ENGINE, else uring\n"
	           "  --orphan-lease=SEC  remove the data of an unlinked file a client kept open if\n"
	           "              it stops renewing its lease for SEC seconds (it died); a removal\n"
	           "              a member missed is retried after 1, 2, 4 ... s, at most SEC;\n"
	           "              default $CHFS_ORPHAN_LEASE, else 60\n"
	           "Signals: SIGTERM/SIGINT stop the server (it stays a member: restart it on the same\n"
	           "  directory to serve its data again); SIGUSR1 makes it leave the pool: it hands every\n"
	           "  key it holds to the new owner, then exits (status 0 once everything moved).\n"
	           "  --help      this text\n");
}

static int write_file(const char *path, const char *text)
{
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s\n", text);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -errno;
	}
	return 0;
}

/* Address saved by a previous run on this storage dir, if its protocol matches. */
static int saved_host(int rootfd, const char *proto, char *host, size_t size)
{
	char buf[WIRE_ADDR_MAX];
	int fd = openat(rootfd, "chfsd.addr", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	char *sep = strstr(buf, "://");
	if (!sep || strncmp(buf, proto, (size_t)(sep - buf)) != 0 || strlen(proto) != (size_t)(sep - buf))
		return 0;
	snprintf(host, size, "%s", sep + 3);
	return 1;
}

static const char *canon_proto(const char *p)
{
	if (strstr(p, "verbs"))
		return "verbs";
	if (strstr(p, "tcp"))
		return "tcp";
	if (strstr(p, "sockets"))
		return "sockets";
	if (strcmp(p, "sm") == 0 || strstr(p, "shm") || strcmp(p, "na+sm") == 0)
		return "shm";
	return p;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *proto = "tcp", *host = NULL, *infofile = NULL, *pidfile = NULL;
	const char *logfile = NULL, *secretfile = NULL, *bootstrap = NULL, *backend = NULL, *io = NULL;
	unsigned nthreads = 4;
	int orphan_lease_ms = ORPHAN_LEASE_DEFAULT_MS, lease_given = 0;
	int timeout = CHFS_DEFAULT_RPC_TIMEOUT, foreground = 0, vnodes = 0, c, nflush = 1;
	double flush_delay = 1.0;
	char *end;
	char defdir[256], secbuf[4096];
	static const struct option lopts[] = {{"help", no_argument, NULL, 'H'},
	                                      {"io", required_argument, NULL, 'E'},
	                                      {"orphan-lease", required_argument, NULL, 'O'},
	                                      {0}};

	chfs_log_set_prog("chfsd");
	while ((c = getopt_long(argc, argv, "c:b:F:U:p:h:S:P:T:t:V:k:l:L:fd", lopts, NULL)) != -1) {
		switch (c) {
		case 'c': dir = optarg; break;
		case 'b': backend = optarg; break;
		case 'F':
			nflush = (int)strtol(optarg, &end, 10);
			if (*end || nflush < 0 || nflush > 64) {
				fprintf(stderr, "chfsd: -F %s: expected 0..64 flush threads\n", optarg);
				return 2;
			}
			break;
		case 'U':
			flush_delay = strtod(optarg, &end);
			if (*end || end == optarg) {
				fprintf(stderr, "chfsd: -U %s: expected seconds\n", optarg);
				return 2;
			}
			break;
		case 'p': proto = optarg; break;
		case 'h': host = optarg; break;
		case 'S': infofile = optarg; break;
		case 'P': pidfile = optarg; break;
		case 'T': nthreads = (unsigned)atoi(optarg); break;
		case 't': timeout = atoi(optarg); break;
		case 'V':
			vnodes = (int)strtol(optarg, &end, 10);
			if (*end || vnodes < 1 || vnodes > RING_VNODES_MAX) {
				fprintf(stderr, "chfsd: -V %s: expected 1..%d virtual nodes\n", optarg,
				        RING_VNODES_MAX);
				return 2;
			}
			break;
		case 'k': secretfile = optarg; break;
		case 'l': logfile = optarg; break;
		case 'L':
			if ((chfs_log_level = chfs_log_parse_priority(optarg)) < 0) {
				fprintf(stderr, "chfsd: -L %s: unknown log priority\n", optarg);
				return 2;
			}
			break;
		case 'd': chfs_log_level = LOG_DEBUG; /* fall through */
		case 'f': foreground = 1; break;
		case 'H': usage(stdout); return 0;
		case 'O':
			if (orphans_parse_lease(optarg, &orphan_lease_ms) < 0) {
				fprintf(stderr, "chfsd: --orphan-lease=%s: expected seconds, 0.1 to 86400\n",
				        optarg);
				return 2;
			}
			lease_given = 1;
			break;
		case 'E':
			if (strcmp(optarg, "uring") != 0 && strcmp(optarg, "sync") != 0) {
				fprintf(stderr, "chfsd: --io=%s: expected uring or sync\n", optarg);
				return 2;
			}
			io = optarg;
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		bootstrap = argv[optind++];
	if (optind < argc || nthreads < 1 || nthreads > 256 || timeout < 0) {
		usage(stderr);
		return 2;
	}
	proto = canon_proto(proto);
	static struct chfs_config cfg; /* ~12 KiB: not on the stack */
	char cfgerr[256];
	if (chfs_config_load(&cfg, cfgerr, sizeof cfgerr) < 0) {
		fprintf(stderr, "chfsd: %s\n", cfgerr);
		return 2;
	}
	const char *lease_env = getenv("CHFS_ORPHAN_LEASE");
	if (!lease_given && lease_env && *lease_env && orphans_parse_lease(lease_env, &orphan_lease_ms) < 0) {
		fprintf(stderr, "chfsd: CHFS_ORPHAN_LEASE=%s: expected seconds, 0.1 to 86400\n", lease_env);
		return 2;
	}
	if (!backend && cfg.backend_path[0])
		backend = cfg.backend_path;
	if (!dir) {
		const char *u = getenv("USER");
		snprintf(defdir, sizeof defdir, "/tmp/chfs-%s", u && *u ? u : "chfs");
		dir = defdir;
	}
	if (!secretfile) {
		chfs_config_default_secret_file(secbuf, sizeof secbuf);
		secretfile = secbuf;
	}
	/* Work from "/" (crash dumps and core files must not land in the caller's directory):
	 * make every path absolute first. */
	dir = absolute(dir);
	backend = absolute(backend);
	secretfile = absolute(secretfile);
	infofile = absolute(infofile);
	pidfile = absolute(pidfile);
	logfile = absolute(logfile);
	if (chdir("/") < 0)
		return 1;
	if (logfile && chfs_log_open(logfile) < 0) {
		fprintf(stderr, "chfsd: cannot open log file %s: %s\n", logfile, strerror(errno));
		return 1;
	}

	int ready[2] = {-1, -1};
	if (!foreground) {
		if (pipe(ready) < 0)
			return 1;
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid > 0) {
			char ok = 0;
			close(ready[1]);
			ssize_t n = read(ready[0], &ok, 1);
			return n == 1 && ok == 'R' ? 0 : 1;
		}
		close(ready[0]);
		/* If whoever started us gives up before we are ready, do not linger. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			return 1;
		setsid();
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			if (logfile)
				dup2(nul, 2);
			close(nul);
		}
	}

	/* SIGTERM/SIGINT/SIGHUP: before the server answers they end it at once (a start-up that
	 * hangs, e.g. joining an unreachable pool, must stay killable); afterwards the main thread
	 * waits for them in sigwait and shuts down in order. */
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	static struct chfsd d;
	d.timeout_ms = timeout;
	int rc = secret_load(secretfile, d.secret);
	if (rc) {
		log_err("pool secret %s: %s%s", secretfile, strerror(-rc),
		        rc == -EACCES ? " (must be a regular file readable only by its owner)" : "");
		return 1;
	}
	if ((rc = ioe_start(io)) < 0) { /* after the fork: libasyncsys is not fork-safe */
		const char *env = getenv("CHFS_IO_ENGINE");
		if (rc == -EINVAL)
			log_err("CHFS_IO_ENGINE=%s: expected uring or sync", env ? env : "");
		else
			log_err("storage I/O engine: %s%s", strerror(-rc),
			        rc == -ENOTSUP ? " (chfsd built without libasyncsys: --io=sync)" : "");
		return 1;
	}
	if (ioe_async() && strcmp(ioe_describe(), "uring") != 0)
		log_warn("storage I/O engine: io_uring unavailable (kernel.io_uring_disabled, seccomp?): "
		         "libasyncsys runs it on execution threads");
	log_info("storage I/O engine: %s", ioe_describe());
	if ((rc = st_open(dir, &d.st)) < 0) {
		log_err("storage directory %s: %s", dir, strerror(-rc));
		return 1;
	}
	if ((rc = orphans_open(&d, orphan_lease_ms)) < 0) {
		log_err("orphan list %s/orphans: %s", dir, strerror(-rc));
		return 1;
	}
	d.bk_chunk_size = cfg.chunk_size;
	if (backend && ((rc = backend_open(backend, &d.bk)) < 0 || (rc = bcache_init(&d)) < 0)) {
		log_err("backend directory %s: %s", backend, strerror(-rc));
		return 1;
	}
	char hostbuf[WIRE_ADDR_MAX];
	struct xprt_opts xo = {.proto = proto, .host = host, .is_server = 1, .nworkers = nthreads};
	int reuse = 0;
	if ((!host || !strchr(host, ':')) && saved_host(st_rootfd(d.st), proto, hostbuf, sizeof hostbuf)) {
		/* Same host part (or none given): come back on the saved address. */
		char *colon = strrchr(hostbuf, ':');
		if (!host || strcmp(proto, "shm") == 0 ||
		    (colon && strncmp(hostbuf, host, (size_t)(colon - hostbuf)) == 0 &&
		     strlen(host) == (size_t)(colon - hostbuf))) {
			xo.host = hostbuf;
			reuse = 1;
		}
	}
	/* Threads created from here on (transport progress, workers, libfabric's own) inherit a
	 * mask blocking SIGTERM/SIGINT/SIGHUP, so these reach the main thread only. (Delivered to
	 * a thread inside uninstrumented libfabric, ThreadSanitizer defers a handler until that
	 * thread comes back, and shutdown stalled.) */
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	sigaddset(&term, SIGHUP);
	sigaddset(&term, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	if (d.bk && (rc = bflush_init(&d, nflush, flush_delay)) < 0) { /* (threads: after the mask) */
		log_err("backend write-back (%s/bdirty): %s", st_root(d.st), strerror(-rc));
		return 1;
	}
	rc = xprt_open(&xo, &d.x);
	if (rc && reuse) {
		log_warn("could not reuse the saved address %s (%s); using a new one", hostbuf,
		         strerror(-rc));
		xo.host = host;
		rc = xprt_open(&xo, &d.x);
	}
	if (rc) {
		log_err("cannot listen on %s (%s): %s", host ? host : "default address", proto,
		        strerror(-rc));
		return 1;
	}
	xprt_self_addr(d.x, d.self, sizeof d.self);
	char savepath[4200];
	snprintf(savepath, sizeof savepath, "%s/chfsd.addr", st_root(d.st));
	write_file(savepath, d.self);
	d.vnodes_opt = (unsigned)vnodes;
	if ((rc = members_self_id(st_rootfd(d.st), d.id)) < 0) {
		log_err("server identity (%s/server.id): %s", st_root(d.st), strerror(-rc));
		return 1;
	}
	if ((rc = members_init(&d.mem, st_rootfd(d.st), d.id, d.self,
	                       vnodes ? (unsigned)vnodes : RING_VNODES_DEFAULT,
	                       bootstrap && strcmp(bootstrap, d.self) != 0)) < 0) {
		log_err("member list: %s", strerror(-rc));
		return 1;
	}
	if ((rc = rebalance_init(&d)) < 0 || (rc = fastpath_open(&d)) < 0 ||
	    (rc = members_start_broadcaster(&d)) < 0 || (rc = heartbeat_start(&d)) < 0 ||
	    (rc = handover_start(&d)) < 0 || (rc = xprt_serve_admit(d.x, handle_admit, &d)) < 0 ||
	    (!(getenv("CHFSD_INLINE") && strcmp(getenv("CHFSD_INLINE"), "0") == 0) &&
	     (rc = xprt_serve_inline(d.x, handle_inline, &d)) < 0) ||
	    (rc = xprt_serve(d.x, handle_request, &d)) < 0) {
		log_err("cannot serve: %s", strerror(-rc));
		return 1;
	}
	pthread_sigmask(SIG_UNBLOCK, &term, NULL); /* joining below may hang: stay killable */
	if (bootstrap && strcmp(bootstrap, d.self) != 0 && (rc = members_join(&d, bootstrap)) < 0) {
		/* A server drops requests without the pool's secret unanswered (it cannot trust the
		 * sender's address), so a wrong secret looks like a server that does not answer. */
		log_err("cannot join the pool through %s: %s", bootstrap,
		        rc == -EACCES     ? "the pool secret differs"
		        : rc == -ENOTCONN ? "no answer (is it running? a pool secret that differs from this "
		                            "server's -k file is dropped unanswered)"
		                          : strerror(-rc));
		return 1;
	}
	bflush_release(&d);    /* (names renamed on the backend while it was down first) */
	rebalance_publish(&d); /* direct access may start (unless a rebalance runs) */
	if (pidfile) {
		char pid[32];
		snprintf(pid, sizeof pid, "%d", (int)getpid());
		write_file(pidfile, pid);
	}
	if (infofile && (rc = write_file(infofile, d.self)) < 0) {
		log_err("server info file %s: %s", infofile, strerror(-rc));
		return 1;
	}
	pthread_mutex_lock(&d.mem.lock); /* workers already serve JOIN/SET_LIST */
	unsigned nmem = d.mem.n;
	pthread_mutex_unlock(&d.mem.lock);
	log_notice("serving %s on %s (%u servers in the pool)%s%s", st_root(d.st), d.self, nmem,
	           d.bk ? ", backend " : "", d.bk ? backend_root(d.bk) : "");
	pthread_sigmask(SIG_BLOCK, &term, NULL); /* from now on taken by sigwait below */
	if (ready[1] >= 0) {
		prctl(PR_SET_PDEATHSIG, 0);
		if (write(ready[1], "R", 1) != 1)
			return 1;
		close(ready[1]);
	}
	int sig = 0, status = 0;
	while (sigwait(&term, &sig) != 0)
		;
	if (sig == SIGUSR1) {
		log_notice("SIGUSR1: leaving the pool (handing every key to its new owner)");
		if ((rc = handover_leave(&d)) < 0) {
			log_err("leave: %s; shutting down without leaving",
			        rc == -EBUSY ? "the last server of a pool cannot leave it" : strerror(-rc));
			status = 1;
		} else {
			log_notice("left the pool: every key is at its new owner");
		}
	} else {
		log_notice("signal %d: shutting down", sig);
	}
	/* Background threads end before the transport they call through goes away. */
	atomic_store(&d.stopping, 1);
	handover_stop(&d);
	heartbeat_stop(&d);
	members_stop_broadcaster(&d);
	/* Everything written reaches the backend before we exit — while the transport still
	 * works: a rename applied now tells the other servers the file's new backend name
	 * (relink.c), and a local file's mtime is asked of its home. */
	bflush_stop(&d);
	xprt_close(d.x);
	st_close(d.st);
	backend_close(d.bk);
	ioe_stop();
	if (pidfile)
		unlink(pidfile);
	return status;
}
