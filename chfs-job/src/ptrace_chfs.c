/* ptrace_chfs.c — chfs: mappings under the ptrace method (see ptrace_internal.h).
 *
 * ptrace has no SECCOMP_IOCTL_NOTIF_ADDFD, so a staged CHFS file (chfs_route.c, chfs_serve.c:
 * the same staging as the seccomp method) reaches the tracee by the tracee's own system call: the
 * trapped open is rewritten into openat(AT_FDCWD, "/proc/TRACER/fd/N"), which opens our memfd
 * (or staged directory) again through the magic link. Its new descriptor must then move to the
 * reserved range (>= CJ_CHFS_FD_MIN, where the filter traps close() for the write-back): the
 * tracee is made to run fcntl(F_DUPFD) and close() of the old number — two calls injected at
 * syscall-exit stops by moving the instruction pointer back over the syscall instruction — and the
 * open's registers are restored with the new number as its result. Every other call on a CHFS path
 * is answered by libchfs and skipped (call number -1). */
#define _GNU_SOURCE
#include "ptrace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A call on CHFS paths. open: the file is staged by chfs_route.c/chfs_serve.c into a descriptor
 * of ours, and the call becomes openat(AT_FDCWD, "/proc/OURPID/fd/N") — the tracee reopens our
 * descriptor itself (ptrace has no ADDFD; the magic link opens the same memfd or staged
 * directory, checked like a ptrace read access: same user). Its exit moves the new descriptor to
 * the reserved range (cj_pt_chfs_opened). Any other call is answered by libchfs and skipped. */
bool cj_pt_chfs_entry(struct cj_chfs *c, const struct cj_policy *p, const struct cj_decision *d, pid_t pid,
                      struct cj_pt_tracee *s, const struct cj_sysc *sc, struct user_regs_struct *r,
                      const uint64_t a[6])
{
	int nr = (int)r->orig_rax;
	if (sc->kind != CJ_SK_OPEN) {
		cj_pt_skip_call(pid, s, r, cj_chfs_route_call(c, p, d, sc, pid, nr, a));
		return true;
	}
	int flags;
	int fd = cj_chfs_route_open(c, p, d, pid, nr, a, &flags);
	if (fd < 0) {
		cj_pt_skip_call(pid, s, r, fd);
		return true;
	}
	char self[64];
	snprintf(self, sizeof(self), "/proc/%d/fd/%d", (int)getpid(), fd);
	uint64_t sp = r->rsp - 128;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || cj_pt_push_str(pid, &sp, self) < 0) {
		close(fd);
		cj_pt_skip_call(pid, s, r, -EFAULT);
		return true;
	}
	r->orig_rax = SYS_openat;
	r->rdi = (unsigned long long)(long long)AT_FDCWD;
	r->rsi = sp;
	r->rdx = (unsigned)((fl & (O_ACCMODE | O_APPEND)) | (flags & (O_CLOEXEC | O_NONBLOCK | O_DIRECTORY)));
	r->r10 = 0;
	ptrace(PTRACE_SETREGS, pid, 0, r);
	s->staged = fd + 1;
	s->cloexec = flags & O_CLOEXEC;
	return true;
}

/* The exit of a staged open: close our descriptor, and if the tracee's new one lies below
 * CJ_CHFS_FD_MIN (where close() is not trapped, so no write-back would happen) make the tracee
 * run fcntl(fd, F_DUPFD, CJ_CHFS_FD_MIN) and then close(fd): the instruction pointer goes back
 * over the 2-byte syscall instruction with rax = the call number, as for a restarted call; the
 * saved registers return the open's result at the end (inject_exit). */
void cj_pt_chfs_opened(pid_t pid, struct cj_pt_tracee *s)
{
	close(s->staged - 1);
	s->staged = 0;
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, pid, 0, &r) < 0 || (long long)r.rax < 0 || r.rax >= CJ_CHFS_FD_MIN)
		return;
	s->saved = r;
	s->low = (int)r.rax;
	r.rip -= 2;
	r.rax = r.orig_rax = SYS_fcntl;
	r.rdi = (unsigned long long)s->low;
	r.rsi = s->cloexec ? F_DUPFD_CLOEXEC : F_DUPFD;
	r.rdx = CJ_CHFS_FD_MIN;
	if (ptrace(PTRACE_SETREGS, pid, 0, &r) == 0)
		s->inject = 1;
}

/* The exit of an injected call: after fcntl, close the old number (or, if fcntl failed —
 * RLIMIT_NOFILE below the range — keep it: only the job's end writes that file back); after
 * close, restore the open's registers with the new number as its result. A signal that stopped
 * the tracee meanwhile was held back (its handler would have run on our registers) and is sent
 * again now, to the thread (tkill). */
static void inject_exit(pid_t pid, struct cj_pt_tracee *s)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, pid, 0, &r) < 0)
		return;
	if (s->inject == 1 && (long long)r.rax >= 0) {
		s->high = (int)r.rax;
		r = s->saved;
		r.rip -= 2;
		r.rax = r.orig_rax = SYS_close;
		r.rdi = (unsigned long long)s->low;
		if (ptrace(PTRACE_SETREGS, pid, 0, &r) == 0) {
			s->inject = 2;
			return;
		}
	}
	r = s->saved;
	r.rax = (unsigned long long)(s->inject == 2 ? s->high : s->low);
	ptrace(PTRACE_SETREGS, pid, 0, &r);
	s->inject = 0;
	if (s->pending_sig)
		syscall(SYS_tkill, pid, s->pending_sig);
	s->pending_sig = 0;
}

void cj_pt_chfs_injected_stop(pid_t pid, struct cj_pt_tracee *s, int sig)
{
	struct __ptrace_syscall_info info;
	if (sig != (SIGTRAP | 0x80))
		s->pending_sig = sig; /* a signal-delivery stop: suppressed now, sent again after */
	else if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof(info), &info) > 0 &&
	         info.op == PTRACE_SYSCALL_INFO_EXIT)
		inject_exit(pid, s);
}
