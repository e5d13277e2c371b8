/*
 * xprt_fi_dl.c — libfabric loaded on first use, not at process start.
 *
 * Debian's libfabric.so.1 links libpsm_infinipath and libpsm2, whose load-time constructors
 * sleep ~0.20 s (a usleep calibration loop) in every process that maps them — a CHFS client
 * whose servers are all on its node (xprt_local.c) never needs libfabric at all, so nothing
 * here may be a DT_NEEDED dependency. The transport calls only four exported libfabric
 * functions (everything else is inline through the ops tables of the objects they return), so
 * this file defines those four as hidden trampolines: the first one called dlopen()s
 * libfabric.so.1 and resolves the real ones with dlsym(). Hidden visibility keeps them out of
 * libchfs's and chfsd's dynamic symbol tables, so nothing else in the process binds to them
 * and a program that links libfabric itself keeps its own.
 */
#pragma GCC visibility push(hidden)
#include <rdma/fabric.h>
#pragma GCC visibility pop

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xprt_internal.h"

#define LIBFABRIC_SONAME "libfabric.so.1"

static struct {
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
	               struct fi_info **);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
} real;
static int load_rc;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The kernel's struct sigaction on x86-64 (rt_sigaction with an 8-byte mask): saved and put back
 * byte for byte, restorer included. */
struct kernel_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};
#define NSIGNALS 64

/* libpsm_infinipath's and libpsm2's constructors install handlers for SIGSEGV, SIGBUS, SIGILL,
 * SIGABRT, SIGINT and SIGTERM (and ignore others) when libfabric is loaded. Loaded at process
 * start (a DT_NEEDED library) the program installed its own over them; loaded now, in the
 * middle of a program (a hooked one, an MPI rank), they would replace the program's. Every
 * disposition the load changed is put back. */
static void load_keeping_signal_dispositions(void **h)
{
	static struct kernel_sigaction saved[NSIGNALS + 1]; /* under load_once */
	for (int sig = 1; sig <= NSIGNALS; sig++)
		if (syscall(SYS_rt_sigaction, sig, NULL, &saved[sig], 8) != 0)
			saved[sig].handler = (void *)-1; /* not a signal one can query */
	*h = dlopen(LIBFABRIC_SONAME, RTLD_NOW | RTLD_LOCAL);
	for (int sig = 1; sig <= NSIGNALS; sig++) {
		struct kernel_sigaction now;
		if (saved[sig].handler == (void *)-1 || syscall(SYS_rt_sigaction, sig, NULL, &now, 8) != 0 ||
		    memcmp(&now, &saved[sig], sizeof now) == 0)
			continue;
		syscall(SYS_rt_sigaction, sig, &saved[sig], NULL, 8);
	}
}

static void load(void)
{
	/* RTLD_LOCAL: libfabric's symbols stay out of the global scope (a program that links its
	 * own libfabric sees no difference). Never dlclose'd: providers keep threads and atexit
	 * handlers. */
	void *h;
	load_keeping_signal_dispositions(&h);
	if (h) {
		*(void **)&real.getinfo = dlsym(h, "fi_getinfo");
		*(void **)&real.freeinfo = dlsym(h, "fi_freeinfo");
		*(void **)&real.dupinfo = dlsym(h, "fi_dupinfo");
		*(void **)&real.fabric = dlsym(h, "fi_fabric");
	}
	if (!h || !real.getinfo || !real.freeinfo || !real.dupinfo || !real.fabric) {
		fprintf(stderr, "chfs: cannot load %s (needed for a libfabric endpoint): %s\n",
		        LIBFABRIC_SONAME, dlerror());
		load_rc = -ELIBACC;
	}
}

int xprt_fi_load(void)
{
	pthread_once(&load_once, load);
	return load_rc;
}

bool xprt_fi_loaded(void) { return real.getinfo != NULL; }

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
               const struct fi_info *hints, struct fi_info **info)
{
	if (xprt_fi_load() < 0)
		return -FI_ENOSYS;
	return real.getinfo(version, node, service, flags, hints, info);
}

void fi_freeinfo(struct fi_info *info)
{
	if (info && xprt_fi_load() == 0)
		real.freeinfo(info);
}

struct fi_info *fi_dupinfo(const struct fi_info *info)
{
	return xprt_fi_load() == 0 ? real.dupinfo(info) : NULL;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	if (xprt_fi_load() < 0)
		return -FI_ENOSYS;
	return real.fabric(attr, fabric, context);
}
