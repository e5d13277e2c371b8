/*
 * loader.c — libchfs-hook-loader.so, the LD_PRELOAD part of the syscall hook.
 *
 * Its constructor runs before the program's own: map the trampoline (trampoline.c), rewrite
 * every syscall site present (rewrite.c; the sites found in a file's mapping are kept per node
 * in the user's cache directory and reused while the mapped bytes are the same,
 * rewrite_cache.c), and arrange for the hook library to be loaded with
 * dlmopen(LM_ID_NEWLM): it comes with its own copies of libc, libchfs and libfabric, loaded
 * after the rewrite, so their syscalls go straight to the kernel and the hook never recurses
 * into itself. It is loaded at once when the process inherited CHFS state through execve
 * (CHFS_HOOK_CWD, CHFS_HOOK_INHERIT), when CHFS_HOOK_EAGER is set and not 0, or when
 * CHFS_HOOK_EAGER is unset, the process is an MPI rank and an argument names a path under a
 * mount point (the hook library then joins the pool before main, where a chfs.h program calls
 * chfs_init — not inside a collectively timed first CHFS call; see hook/join.c); else on
 * first need (gate.c). Until the hook library is installed every syscall passes through unchanged.
 * The one libc function it interposes is getcwd(3), for a CHFS working directory deeper than
 * PATH_MAX (getcwd.c).
 *
 * Loading the hook library must not change the program's signal dispositions: libfabric's PSM
 * providers' libraries (libinfinipath, libpsm2) install handlers for SIGSEGV, SIGBUS, SIGILL,
 * SIGABRT, SIGINT and SIGTERM in their constructors, which print a backtrace, write a file into
 * the working directory and exit(1) — so a hooked program that aborted left a file on the local
 * disk and did not die by its signal. Every disposition is saved before the load and put back
 * after it (with the kernel's own call: the library's libc is not the program's). A disposition
 * another thread of the program changes during the load itself (a fraction of a second, once)
 * would be undone as well.
 *
 * Environment: CHFS_HOOK_LIB (path of the hook library; default libchfs-hook.so next to this
 * loader; "none" runs the rewritten process with every syscall passed through, which is how
 * the benchmark isolates the cost of the trampoline itself), CHFS_HOOK_CACHE (the rewrite
 * cache's directory, "0" = none). Everything else is read by the hook library.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The hook library's per-thread scratch (gate.h: CHFS_HOOK_SCRATCH). */
static __thread char hook_scratch[CHFS_HOOK_SCRATCH] __attribute__((tls_model("initial-exec"), aligned(16)));

static char loader_path[PATH_MAX];

static int hook_library_path(char *buf, size_t size)
{
	const char *env = getenv("CHFS_HOOK_LIB");
	if (env && *env)
		return snprintf(buf, size, "%s", env) < (int)size ? 0 : -1;
	const char *slash = strrchr(loader_path, '/');
	int dir = slash ? (int)(slash - loader_path) : 1;
	const char *base = slash ? loader_path : ".";
	return snprintf(buf, size, "%.*s/libchfs-hook.so", dir, base) < (int)size ? 0 : -1;
}

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_state; /* 0 not yet, 1 loaded, -1 failed */

static int load_hook_library_once(void);

/* The kernel's struct sigaction on x86-64 (rt_sigaction with an 8-byte mask). */
struct kernel_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};
#define NSIGNALS 64
static struct kernel_sigaction saved_actions[NSIGNALS + 1]; /* under load_lock */

static void save_signal_actions(void)
{
	for (int sig = 1; sig <= NSIGNALS; sig++)
		if (chfs_raw_syscall(SYS_rt_sigaction, sig, 0, (long)&saved_actions[sig], 8, 0, 0) != 0)
			saved_actions[sig].handler = (void *)-1; /* not a signal one can query */
}

/* Puts back every disposition that changed since save_signal_actions(). */
static void restore_signal_actions(void)
{
	for (int sig = 1; sig <= NSIGNALS; sig++) {
		struct kernel_sigaction now;
		if (saved_actions[sig].handler == (void *)-1 ||
		    chfs_raw_syscall(SYS_rt_sigaction, sig, 0, (long)&now, 8, 0, 0) != 0 ||
		    memcmp(&now, &saved_actions[sig], sizeof now) == 0)
			continue;
		chfs_raw_syscall(SYS_rt_sigaction, sig, (long)&saved_actions[sig], 0, 8, 0, 0);
	}
}

static int load_hook_library(void)
{
	pthread_mutex_lock(&load_lock);
	if (load_state == 0) {
		save_signal_actions();
		load_state = load_hook_library_once() == 0 ? 1 : -1;
		restore_signal_actions();
	}
	int rc = load_state > 0 ? 0 : -1;
	pthread_mutex_unlock(&load_lock);
	return rc;
}

/* The application's libc believes the process single-threaded until *it* starts a thread, and
 * until then takes its shortcuts: malloc without arena locks, and mutexes (the dynamic loader's
 * recursive locks among them) locked and unlocked with plain stores and no futex wake. The CHFS
 * client's threads are started by the hook namespace's libc, which the application's never
 * hears of, yet they enter the shared dynamic loader (TLS of the dlmopen'ed libraries, lazy
 * binding) and so the application's libc: a single-threaded hooked program lost wake-ups on
 * the loader's TLS lock (its progress thread slept, the reply it should have read was never
 * read: "no reply within 5000 ms") and could corrupt the loader's heap. One thread started and
 * joined through the application's libc ends its single-thread mode for good (fork keeps it);
 * writing __libc_single_threaded is not enough: on x86-64 glibc's shortcuts read a hidden copy
 * (__libc_single_threaded_internal) that only its pthread_create clears. Seen also as rare heap
 * corruption aborts of Montage tools and bash under the hook ("malloc assertion failure in
 * sysmalloc"): the loader allocates those threads' TLS blocks with the program's malloc. */
static void *no_op(void *arg) { return arg; }

static int end_single_thread_mode(void)
{
	if (!__libc_single_threaded)
		return 0;
	pthread_t t;
	int rc = pthread_create(&t, NULL, no_op, NULL);
	if (rc == 0)
		rc = pthread_join(t, NULL);
	if (rc != 0)
		fprintf(stderr, "chfs-hook: cannot start a thread: %s\n", strerror(rc));
	return rc == 0 ? 0 : -1;
}

static int load_hook_library_once(void)
{
	if (end_single_thread_mode() < 0)
		return -1;
	char path[PATH_MAX];
	if (hook_library_path(path, sizeof path) < 0) {
		fputs("chfs-hook: CHFS_HOOK_LIB is too long\n", stderr);
		return -1;
	}
	void *h = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "chfs-hook: cannot load the hook library: %s\n", dlerror());
		return -1;
	}
	chfs_hook_init_fn init = (chfs_hook_init_fn)dlsym(h, "chfs_hook_init");
	if (!init) {
		fprintf(stderr, "chfs-hook: %s has no chfs_hook_init\n", path);
		return -1;
	}
	static struct chfs_hook_host host = {CHFS_HOOK_ABI_VERSION, chfs_raw_syscall, NULL, 0};
	host.loader_path = loader_path;
	host.scratch_offset = (long)((char *)hook_scratch - (char *)__builtin_thread_pointer());
	static struct chfs_hook_ops ops;
	if (init(&host, &ops) != 0)
		return -1; /* the hook library said why */
	chfs_gate_install(&ops);
	return 0;
}

/* Set by the launchers of MPICH (hydra), Open MPI and PMIx in every rank, not in mpiexec. */
static int is_mpi_rank(void)
{
	return getenv("PMI_RANK") || getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK");
}

static int args_name_mount(int argc, char **argv)
{
	for (int i = 1; i < argc && argv; i++)
		if (argv[i] && chfs_gate_names_mount(argv[i]))
			return 1;
	return 0;
}

/* glibc passes (argc, argv, envp) to the constructors of preloaded objects too. */
__attribute__((constructor(101))) static void chfs_hook_loader_init(int argc, char **argv)
{
	Dl_info info;
	if (dladdr((void *)chfs_hook_loader_init, &info) && info.dli_fname &&
	    !realpath(info.dli_fname, loader_path))
		snprintf(loader_path, sizeof loader_path, "%s", info.dli_fname);
	if (chfs_trampoline_setup() < 0 || chfs_rewrite_all() < 0)
		_exit(127);
	const char *lib = getenv("CHFS_HOOK_LIB");
	if (lib && strcmp(lib, "none") == 0)
		return;
	const char *eager = getenv("CHFS_HOOK_EAGER");
	if (getenv("CHFS_HOOK_CWD") || getenv("CHFS_HOOK_INHERIT") || (eager && strcmp(eager, "0"))) {
		if (load_hook_library() < 0)
			_exit(127);
		return;
	}
	chfs_gate_set_lazy(load_hook_library, getenv("CHFS_HOOK_MOUNTS"), loader_path);
	if (!eager && is_mpi_rank() && args_name_mount(argc, argv) && load_hook_library() < 0)
		_exit(127);
}
