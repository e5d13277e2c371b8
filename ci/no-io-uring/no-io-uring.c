/*
 * no-io-uring.c — run a command, and everything it starts, without io_uring.
 *
 * What `kernel.io_uring_disabled=2` does for the whole machine, this does for one process tree:
 * with the sysctl at 2 the kernel refuses io_uring_setup(2) with EPERM for every caller,
 * privileged or not (Documentation/admin-guide/sysctl/kernel.rst, "io_uring_disabled"), so no
 * process can get a ring and every io_uring user must take its fallback. The sysctl is
 * machine-wide: flipping it on a machine shared by several testers breaks their io_uring runs.
 * Here a seccomp filter makes io_uring_setup, io_uring_enter and io_uring_register fail with
 * EPERM, then the command is exec'd. A seccomp filter is inherited over fork, clone and execve
 * and cannot be removed, so the command's children (servers, FUSE daemons, test programs) see
 * the same refusal; other processes on the machine are untouched. (With the sysctl a process
 * has no ring to pass to io_uring_enter/io_uring_register either; refusing them too covers a
 * ring fd inherited from outside.)
 *
 *   no-io-uring [--] COMMAND [ARG...]      run COMMAND under the filter (exit status: COMMAND's)
 *   no-io-uring --probe available|blocked  exit 0 when io_uring_setup here succeeds / when the
 *                                          three calls fail with EPERM (the launcher's tests)
 *
 * The filter is installed without PR_SET_NO_NEW_PRIVS when the caller may (CAP_SYS_ADMIN), so
 * set-user-ID helpers in the tree (fusermount3, su) keep working; otherwise no_new_privs is set
 * first, as the kernel requires.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

/*
 * The three numbers are 425, 426 and 427 in the unified system-call table of every
 * architecture this builds on (x86-64, its i386 compat and x32 entry points, arm64, ...), so the
 * filter compares the number without looking at the audit architecture: no other call has
 * these numbers on any entry point of the machine. x32 callers set __X32_SYSCALL_BIT.
 */
static int install_filter(void)
{
	static const unsigned denied[] = {
	        __NR_io_uring_setup,
	        __NR_io_uring_enter,
	        __NR_io_uring_register,
	        __X32_SYSCALL_BIT | __NR_io_uring_setup,
	        __X32_SYSCALL_BIT | __NR_io_uring_enter,
	        __X32_SYSCALL_BIT | __NR_io_uring_register,
	};
	enum { N = sizeof(denied) / sizeof(denied[0]) };
	/* 0: load the number; 1..N: equal -> jump to the last (deny); N+1: allow; N+2: deny. */
	struct sock_filter f[N + 3];
	f[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (unsigned i = 0; i < N; i++)
		f[1 + i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, denied[i], N - i, 0);
	f[N + 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[N + 2] =
	        (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
	struct sock_fprog prog = {.len = N + 3, .filter = f};
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0)
		return 0;
	if (errno != EACCES)
		return -errno;
	/* Unprivileged: the kernel wants no_new_privs before it accepts a filter. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 ? 0 : -errno;
}

/* Each call's result, as 0 or -errno; a ring that was made is closed. */
static long try_setup(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	long fd = syscall(__NR_io_uring_setup, 1, &p);
	if (fd < 0)
		return -errno;
	close((int)fd);
	return 0;
}

static long try_call(long nr)
{
	/* fd -1: without the filter the kernel answers EBADF, with it EPERM. */
	return syscall(nr, -1, 0, 0, 0, NULL, 0) < 0 ? -errno : 0;
}

static int probe(const char *want)
{
	long setup = try_setup();
	long enter = try_call(__NR_io_uring_enter);
	long reg = try_call(__NR_io_uring_register);
	printf("io_uring_setup: %s; io_uring_enter: %s; io_uring_register: %s\n",
	       setup ? strerror((int)-setup) : "ok", enter ? strerror((int)-enter) : "ok",
	       reg ? strerror((int)-reg) : "ok");
	if (strcmp(want, "available") == 0)
		return setup == 0 ? 0 : 1;
	if (strcmp(want, "blocked") == 0)
		return setup == -EPERM && enter == -EPERM && reg == -EPERM ? 0 : 1;
	fprintf(stderr, "no-io-uring: --probe %s: expected available or blocked\n", want);
	return 2;
}

static int usage(FILE *out, int status)
{
	fputs("usage: no-io-uring [--] COMMAND [ARG...]\n"
	      "       no-io-uring --probe available|blocked\n"
	      "Runs COMMAND (and all it starts) with io_uring_setup/enter/register failing with EPERM,\n"
	      "as kernel.io_uring_disabled=2 would, without touching the machine-wide sysctl.\n",
	      out);
	return status;
}

int main(int argc, char **argv)
{
	int i = 1;
	if (i < argc && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0))
		return usage(stdout, 0);
	if (i < argc && strcmp(argv[i], "--probe") == 0)
		return i + 1 < argc ? probe(argv[i + 1]) : usage(stderr, 2);
	if (i < argc && strcmp(argv[i], "--") == 0)
		i++;
	if (i >= argc || argv[i][0] == '-')
		return usage(stderr, 2);
	int r = install_filter();
	if (r < 0) {
		fprintf(stderr, "no-io-uring: cannot install the seccomp filter: %s\n", strerror(-r));
		return 126;
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "no-io-uring: cannot run %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
