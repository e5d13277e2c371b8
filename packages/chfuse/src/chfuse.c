/*
 * chfuse.c — command line and life cycle of the chfuse daemon.
 *
 *   chfuse [-f|--foreground] [-d|--debug] [-o OPT[,OPT...]] MOUNTPOINT
 *
 * Order matters for clear errors: the mount point is checked and the pool joined (chfs_init,
 * which honours CHFS_SERVER, CHFS_SECRET_FILE and the other CHFS_* variables) before anything
 * is mounted, so a missing directory or an unreachable pool is one line on stderr and exit
 * status 1, with nothing left mounted. Only then does the daemon mount, detach (unless -f) and
 * serve requests with libfuse's multi-threaded loop. SIGUSR1 is blocked in every thread and
 * handled by one thread that dumps the counters (chfuse_stats.c).
 */
#include "chfuse.h"

#include <chfs.h>

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct chfuse_config chfuse_cfg = {.passthrough = true};

static void usage(FILE *out)
{
	fprintf(out, "usage: chfuse [options] MOUNTPOINT\n"
	             "Mount the CHFS pool named by CHFS_SERVER (pool secret: CHFS_SECRET_FILE, default\n"
	             "$HOME/.chfs/secret) at MOUNTPOINT. Files whose data is all on this node's server\n"
	             "(CHFS_PLACEMENT=local or -o local) are handed to the kernel (FUSE passthrough):\n"
	             "their reads, writes and mmaps bypass the daemon.\n"
	             "\n"
	             "  -f, --foreground     stay in the foreground\n"
	             "  -d, --debug          print every FUSE request (implies -f)\n"
	             "  -h, --help           this text\n"
	             "  -V, --version        versions of chfuse, CHFS and libfuse\n"
	             "  -o nopassthrough     serve every read and write through the daemon\n"
	             "  -o local             create new files on this node's server (CHFS_O_LOCAL)\n"
	             "  -o stats=FILE        write request counters to FILE at unmount and on SIGUSR1\n"
	             "  -o io_uring          take requests through FUSE over io_uring (Linux 6.14+,\n"
	             "                       fuse module parameter enable_uring=Y); else /dev/fuse,\n"
	             "                       with one line saying why\n"
	             "  -o uring_q_depth=N   io_uring entries per CPU queue (1..1024, default 8)\n"
	             "  -o uring_threads=T   threads serving each CPU queue (1..64, default 1)\n"
	             "  -o OPT               any other option goes to libfuse (allow_other, max_threads=N,\n"
	             "                       attr_timeout=S, ...)\n"
	             "Unmount with: fusermount3 -u MOUNTPOINT\n");
}

/* Splits one -o argument: our options are taken out, the rest appended to fuse_opts. */
static int parse_o(char *arg, char *fuse_opts, size_t cap)
{
	for (char *save = NULL, *opt = strtok_r(arg, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		if (strcmp(opt, "nopassthrough") == 0) {
			chfuse_cfg.passthrough = false;
		} else if (strcmp(opt, "passthrough") == 0) {
			chfuse_cfg.passthrough = true;
		} else if (strcmp(opt, "local") == 0) {
			chfuse_cfg.create_local = true;
		} else if (strncmp(opt, "stats=", 6) == 0) {
			if (!opt[6]) {
				fprintf(stderr, "chfuse: -o stats= needs a file name\n");
				return -1;
			}
			chfuse_cfg.stats_path = realpath(opt + 6, NULL);
			if (!chfuse_cfg.stats_path) /* not there yet: absolute path of a new file */
				chfuse_cfg.stats_path = opt[6] == '/' ? strdup(opt + 6) : NULL;
			if (!chfuse_cfg.stats_path) {
				char cwd[4096];
				if (!getcwd(cwd, sizeof cwd))
					return -1;
				size_t n = strlen(cwd) + strlen(opt + 6) + 2;
				char *p = malloc(n);
				if (!p)
					return -1;
				snprintf(p, n, "%s/%s", cwd, opt + 6);
				chfuse_cfg.stats_path = p;
			}
		} else {
			size_t len = strlen(fuse_opts);
			if (len + strlen(opt) + 2 > cap) {
				fprintf(stderr, "chfuse: too many -o options\n");
				return -1;
			}
			snprintf(fuse_opts + len, cap - len, "%s%s", len ? "," : "", opt);
		}
	}
	return 0;
}

static int check_mountpoint(const char *mp)
{
	struct stat st;
	if (stat(mp, &st) < 0) {
		fprintf(stderr, "chfuse: mount point %s: %s\n", mp, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "chfuse: mount point %s: Not a directory\n", mp);
		return -1;
	}
	return 0;
}

static int join_pool(void)
{
	if (chfs_init(NULL) == 0)
		return 0;
	int e = errno;
	const char *server = getenv("CHFS_SERVER");
	if (!server || !*server)
		fprintf(stderr, "chfuse: CHFS_SERVER is not set: name a server of the pool to join\n");
	else
		fprintf(stderr, "chfuse: cannot join the CHFS pool at %s: %s\n", server, strerror(e));
	return -1;
}

static int serve(const char *mountpoint, bool foreground, char *fuse_opts, bool debug)
{
	char *fargv[8];
	int fargc = 0;
	fargv[fargc++] = "chfuse";
	fargv[fargc++] = "-o";
	fargv[fargc++] = fuse_opts;
	if (debug)
		fargv[fargc++] = "-d";
	fargv[fargc] = NULL;
	struct fuse_args args = FUSE_ARGS_INIT(fargc, fargv);
	struct fuse *fuse = fuse_new(&args, &chfuse_ops, sizeof chfuse_ops, NULL);
	if (!fuse) {
		fuse_opt_free_args(&args);
		return 1; /* libfuse printed why (e.g. an unknown -o option) */
	}
	int rc = 1;
	if (fuse_mount(fuse, mountpoint) != 0)
		goto out_destroy;
	if (fuse_daemonize(foreground) != 0)
		goto out_unmount;
	struct fuse_session *se = fuse_get_session(fuse);
	chfuse_stats_set_session(se);
	if (fuse_set_signal_handlers(se) != 0)
		goto out_unmount;
	if (chfuse_stats_start_signal_thread() < 0)
		fprintf(stderr, "chfuse: no SIGUSR1 stats thread\n");
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(lc, 16);
	fuse_loop_cfg_set_idle_threads(lc, 4);
	rc = fuse_loop_mt(fuse, lc) == 0 ? 0 : 1;
	fuse_loop_cfg_destroy(lc);
	fuse_remove_signal_handlers(se);
out_unmount:
	fuse_unmount(fuse);
out_destroy:
	fuse_destroy(fuse);
	fuse_opt_free_args(&args);
	return rc;
}

/* Leaving the pool must not keep a finished daemon alive: every file is closed by now (their
 * sizes were reported at release), so if libchfs's shutdown hangs (a transport that does not
 * wind down), say so and exit after a bound rather than linger after the unmount. */
#define CHFS_TERM_GRACE_SEC 10
static pthread_mutex_t term_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t term_cond = PTHREAD_COND_INITIALIZER;
static bool term_done;

static void *term_thread(void *arg)
{
	chfs_term();
	pthread_mutex_lock(&term_lock);
	term_done = true;
	pthread_cond_signal(&term_cond);
	pthread_mutex_unlock(&term_lock);
	return NULL;
}

static void leave_pool(int rc)
{
	pthread_t t;
	if (pthread_create(&t, NULL, term_thread, NULL) != 0) {
		chfs_term();
		return;
	}
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += CHFS_TERM_GRACE_SEC;
	pthread_mutex_lock(&term_lock);
	while (!term_done)
		if (pthread_cond_timedwait(&term_cond, &term_lock, &deadline) == ETIMEDOUT)
			break;
	bool done = term_done;
	pthread_mutex_unlock(&term_lock);
	if (done) {
		pthread_join(t, NULL);
		return;
	}
	fprintf(stderr, "chfuse: the CHFS client did not shut down within %d s; exiting anyway\n",
	        CHFS_TERM_GRACE_SEC);
	fflush(NULL);
	_exit(rc);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	        {"foreground", no_argument, NULL, 'f'},
	        {"debug", no_argument, NULL, 'd'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	char fuse_opts[4096] = "fsname=chfs,subtype=chfuse,default_permissions";
	bool foreground = false, debug = false;
	int c;
	while ((c = getopt_long(argc, argv, "fdhVo:", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': foreground = true; break;
		case 'd': debug = foreground = true; break;
		case 'h': usage(stdout); return 0;
		case 'V':
			printf("chfuse %s, CHFS %s, libfuse %s (passthrough API)\n", CHFUSE_VERSION,
			       chfs_version(), fuse_pkgversion());
			return 0;
		case 'o':
			if (parse_o(optarg, fuse_opts, sizeof fuse_opts) < 0)
				return 2;
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "chfuse: %s\n",
		        optind >= argc ? "missing MOUNTPOINT (try --help)"
		                       : "more than one MOUNTPOINT (try --help)");
		return 2;
	}
	chfuse_cfg.mountpoint = argv[optind];
	/* Block SIGUSR1 before libchfs (chfs_init) and libfuse start threads, so only the stats
	 * thread takes it: a thread with it unblocked would take its default action, exit. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (check_mountpoint(chfuse_cfg.mountpoint) < 0 || join_pool() < 0)
		return 1;
	int rc = serve(chfuse_cfg.mountpoint, foreground, fuse_opts, debug);
	leave_pool(rc);
	return rc;
}
