/* method_ptrace.c — the `ptrace` method: a tracer that follows every process of the job.
 *
 * The child waits on a pipe until we have attached with PTRACE_SEIZE (options TRACESYSGOOD,
 * TRACEFORK, TRACEVFORK, TRACECLONE, TRACEEXEC, EXITKILL, and TRACESECCOMP when accelerated),
 * then installs a seccomp filter returning SECCOMP_RET_TRACE for the policy's calls (bpf.c) and
 * execs. Accelerated, only those calls stop (PTRACE_EVENT_SECCOMP, one stop each); plain mode
 * (--ptrace-plain, or trace_fork: false — see below) stops at every syscall entry and exit.
 *
 * At a trapped entry the policy is decided (decide.c):
 *   - denial: the call number is replaced by -1, which makes the kernel skip it, and the return
 *     register set to -ENOENT (set again at the exit stop in plain mode);
 *   - mapping: the new path is written into the tracee's stack below its red zone (rsp - 128 -
 *     len: the 128 bytes under rsp belong to the interrupted function on x86-64, and nothing else
 *     runs on this thread until the call returns) and the argument register pointed at it. The
 *     kernel reads the copy, not the tracee's own buffer.
 * For the read/write family on a limited descriptor (io_limit) the requested size is counted at
 * the entry and the tracee held there by the formula's delay, as seccomp holds its answer (other
 * tracees keep running: held ones wait in a list with their deadline; we wait with sigtimedwait
 * on SIGCHLD); the exit stop takes a short transfer's unmoved bytes back out of the history.
 * Counted at the exit instead (the bytes moved), each process's own transfer was never held, and
 * with P processes the limit ran over by (m+P-1)/m at m transfers a second (+5 % measured at
 * 1 MB/s with 2 writers of 64 KiB).
 *
 * chfs: mappings (chfs_route.c, chfs_serve.c, shared with the seccomp method): an open stages the
 * file and the tracee reopens the staged descriptor through /proc/OURPID/fd/N, then moves it to a
 * number >= CJ_CHFS_FD_MIN (two injected calls: ptrace_chfs.c), where close() is trapped for the
 * write-back; other calls on CHFS paths are answered with libchfs and skipped.
 *
 * trace_fork: false — new processes (not threads of the program) are detached at their first
 * stop and run untouched. A detached process would get ENOSYS from a RET_TRACE filter with no
 * tracer, so this mode never installs the accelerator. */
#define _GNU_SOURCE
#include "bpf.h"
#include "decide.h"
#include "iolimit.h"
#include "methods.h"
#include "ptrace_internal.h"
#include "tracee.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSLOTS 4096 /* tracees at once (open addressing on the pid) */

struct tracer {
	struct cj_policy *p;
	struct cj_iolimit *lim;
	struct cj_decision *d;
	struct cj_chfs *chfs; /* the pool, when the policy has chfs: mappings */
	bool plain;
	pid_t main_pid;
	int main_status;
	struct cj_pt_tracee *t; /* NSLOTS */
	struct {
		pid_t pid;
		int64_t deadline;
		bool to_exit; /* held at a limited call's entry: resume to its exit stop */
	} held[NSLOTS];
	int nheld;
};

static struct cj_pt_tracee *state(struct tracer *tr, pid_t pid, bool create)
{
	unsigned h = (unsigned)pid % NSLOTS;
	for (unsigned i = 0; i < NSLOTS; i++) {
		struct cj_pt_tracee *s = &tr->t[(h + i) % NSLOTS];
		if (s->pid == pid)
			return s;
		if (s->pid == 0) {
			if (!create)
				return NULL;
			memset(s, 0, sizeof(*s));
			s->pid = pid;
			return s;
		}
	}
	return NULL;
}

static void forget(struct tracer *tr, pid_t pid)
{
	/* backward-shift deletion keeps the probe chains intact */
	unsigned i = (unsigned)pid % NSLOTS, n;
	for (n = 0; n < NSLOTS && tr->t[i].pid != pid; n++)
		i = (i + 1) % NSLOTS;
	if (n == NSLOTS)
		return;
	for (unsigned j = (i + 1) % NSLOTS; tr->t[j].pid; j = (j + 1) % NSLOTS) {
		unsigned home = (unsigned)tr->t[j].pid % NSLOTS;
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			tr->t[i] = tr->t[j];
			i = j;
		}
	}
	tr->t[i].pid = 0;
}

static uint64_t *arg_reg(struct user_regs_struct *r, int i)
{
	switch (i) {
	case 0: return (uint64_t *)&r->rdi;
	case 1: return (uint64_t *)&r->rsi;
	case 2: return (uint64_t *)&r->rdx;
	case 3: return (uint64_t *)&r->r10;
	case 4: return (uint64_t *)&r->r8;
	default: return (uint64_t *)&r->r9;
	}
}

void cj_pt_skip_call(pid_t pid, struct cj_pt_tracee *s, struct user_regs_struct *r, long ret)
{
	r->orig_rax = (unsigned long long)-1;
	r->rax = (unsigned long long)ret;
	ptrace(PTRACE_SETREGS, pid, 0, r);
	s->set_ret = true;
	s->ret = ret;
}

int cj_pt_push_str(pid_t pid, uint64_t *sp, const char *str)
{
	size_t len = strlen(str) + 1;
	*sp = (*sp - len) & ~(uint64_t)15;
	return cj_tracee_write(pid, *sp, str, len);
}

/* A trapped syscall entry. Returns true if the exit stop is needed. */
static bool on_entry(struct tracer *tr, pid_t pid, struct cj_pt_tracee *s)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, pid, 0, &r) < 0)
		return false;
	uint64_t a[6];
	for (int i = 0; i < 6; i++)
		a[i] = *arg_reg(&r, i);
	/* close() of the reserved range, dup2/dup3: a staged CHFS file there goes back first */
	if (cj_chfs_route_closing(tr->chfs, pid, (int)r.orig_rax, a))
		return false;
	const struct cj_sysc *sc = cj_sysc_find((int)r.orig_rax);
	if (!sc || !cj_bpf_traps(tr->p, (int)r.orig_rax))
		return false;
	if (sc->kind == CJ_SK_IO) {
		int cls = cj_tracee_fd_class(pid, (int)a[0]);
		if (!cj_iolimit_limited(tr->lim, cls))
			return false; /* not this class's limit: nothing to count at the exit */
		s->io_cls = cls;
		s->io_req = cj_tracee_io_size(pid, sc->iov, a);
		if (cj_iolimit_account(tr->lim, cls, s->io_req, &s->io_at) > 0)
			s->hold_until = s->io_at; /* the time it is recorded to go through */
		return true;
	}
	if (sc->kind == CJ_SK_DIRENT) {
		s->dirent = true;
		return true;
	}
	cj_decide(tr->p, sc, pid, a, tr->d);
	if (tr->d->verdict == CJ_V_CHFS)
		return cj_pt_chfs_entry(tr->chfs, tr->p, tr->d, pid, s, sc, &r, a);
	if (tr->d->verdict == CJ_V_ERROR) {
		cj_pt_skip_call(pid, s, &r, tr->d->err);
		return true;
	}
	if (tr->d->verdict != CJ_V_MAP)
		return false;
	uint64_t sp = r.rsp - 128; /* below the red zone */
	for (int i = 0; i < 2 && sc->path[i] >= 0; i++) {
		if (!tr->d->mapped[i])
			continue;
		if (cj_pt_push_str(pid, &sp, tr->d->path[i]) < 0) {
			cj_pt_skip_call(pid, s, &r, -EFAULT);
			return true;
		}
		*arg_reg(&r, sc->path[i]) = sp;
	}
	ptrace(PTRACE_SETREGS, pid, 0, &r);
	return false;
}

/* At the exit of getdents64: remove the denied names from what the kernel wrote. If a whole
 * chunk was denied, the call is run again (instruction pointer back over the 2-byte syscall
 * instruction, rax = the call number) rather than returning 0, which would read as the end. */
static void filter_dirents(struct tracer *tr, pid_t pid)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, pid, 0, &r) < 0 || (long long)r.rax <= 0)
		return;
	size_t n = (size_t)r.rax;
	char *buf = malloc(n), dir[PATH_MAX];
	if (!buf)
		return;
	if (cj_tracee_read(pid, r.rsi, buf, n) == 0 &&
	    cj_tracee_dir(pid, (int)r.rdi, dir, sizeof(dir)) == 0) {
		size_t m = cj_filter_dirents(tr->p, dir, buf, n);
		if (m == 0) {
			r.rip -= 2;
			r.rax = r.orig_rax;
		} else if (m != n && cj_tracee_write(pid, r.rsi, buf, m) == 0) {
			r.rax = m;
		}
		ptrace(PTRACE_SETREGS, pid, 0, &r);
	}
	free(buf);
}

/* A syscall exit. */
static void on_exit_stop(struct tracer *tr, pid_t pid, struct cj_pt_tracee *s)
{
	if (s->set_ret) {
		struct user_regs_struct r;
		if (ptrace(PTRACE_GETREGS, pid, 0, &r) == 0) {
			r.rax = (unsigned long long)s->ret;
			ptrace(PTRACE_SETREGS, pid, 0, &r);
		}
	} else if (s->dirent) {
		filter_dirents(tr, pid);
	} else if (s->io_req) {
		struct user_regs_struct r;
		if (ptrace(PTRACE_GETREGS, pid, 0, &r) == 0) {
			long long moved = (long long)r.rax > 0 ? (long long)r.rax : 0;
			if ((uint64_t)moved < s->io_req)
				cj_iolimit_refund(tr->lim, s->io_cls, s->io_req - (uint64_t)moved, s->io_at);
		}
	}
	s->set_ret = false;
	s->io_req = 0;
	s->dirent = false;
}

static void resume(struct tracer *tr, pid_t pid, bool to_exit, int sig)
{
	ptrace(tr->plain || to_exit ? PTRACE_SYSCALL : PTRACE_CONT, pid, 0, sig);
}

/* After a trapped entry: hold the tracee there if its transfer must wait (io_limit), else resume. */
static void resume_entry(struct tracer *tr, pid_t pid, struct cj_pt_tracee *s, bool to_exit)
{
	int64_t until = s->hold_until;
	s->hold_until = 0;
	if (until && tr->nheld < NSLOTS) {
		tr->held[tr->nheld].pid = pid;
		tr->held[tr->nheld].to_exit = to_exit;
		tr->held[tr->nheld++].deadline = until;
		return;
	}
	resume(tr, pid, to_exit, 0);
}

static bool is_thread_of_main(struct tracer *tr, pid_t tid)
{
	char task[64];
	snprintf(task, sizeof(task), "/proc/%d/task/%d", (int)tr->main_pid, (int)tid);
	return access(task, F_OK) == 0;
}

static void on_stop(struct tracer *tr, pid_t pid, int st)
{
	struct cj_pt_tracee *s = state(tr, pid, true);
	if (!s) {
		ptrace(PTRACE_DETACH, pid, 0, 0); /* table full: cannot happen below NSLOTS tracees */
		return;
	}
	int sig = WSTOPSIG(st), event = st >> 16;
	bool first = !s->seen;
	s->seen = true;
	if (s->inject) { /* our injected call runs: follow it to its exit, hold signals back */
		if (!event)
			cj_pt_chfs_injected_stop(pid, s, sig);
		if (s->inject)
			ptrace(PTRACE_SYSCALL, pid, 0, 0);
		else
			resume(tr, pid, false, 0);
		return;
	}
	if (event == PTRACE_EVENT_STOP) {
		if (first && pid != tr->main_pid && !tr->p->trace_fork && !is_thread_of_main(tr, pid)) {
			forget(tr, pid);
			ptrace(PTRACE_DETACH, pid, 0, 0);
			return;
		}
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
			ptrace(PTRACE_LISTEN, pid, 0, 0); /* group-stop: stay stopped until SIGCONT */
		else
			resume(tr, pid, false, 0);
		return;
	}
	if (event == PTRACE_EVENT_SECCOMP) {
		resume_entry(tr, pid, s, on_entry(tr, pid, s));
		return;
	}
	if (event) { /* FORK, VFORK, CLONE, EXEC: the new tracee reports itself */
		resume(tr, pid, false, 0);
		return;
	}
	if (sig == (SIGTRAP | 0x80)) {
		struct __ptrace_syscall_info info;
		if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof(info), &info) < 0)
			info.op = PTRACE_SYSCALL_INFO_NONE;
		if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
			resume_entry(tr, pid, s, on_entry(tr, pid, s));
			return;
		}
		if (s->staged) {
			cj_pt_chfs_opened(pid, s);
			if (s->inject)
				ptrace(PTRACE_SYSCALL, pid, 0, 0);
			else
				resume(tr, pid, false, 0);
			return;
		}
		on_exit_stop(tr, pid, s);
		resume(tr, pid, false, 0);
		return;
	}
	resume(tr, pid, false, sig); /* a signal for the tracee: deliver it */
}

/* Resume the held tracees whose time has come; ns until the next (-1: none). */
static int64_t release_held(struct tracer *tr)
{
	int64_t now = cj_now_ns(), next = -1;
	for (int i = 0; i < tr->nheld;) {
		if (tr->held[i].deadline <= now) {
			resume(tr, tr->held[i].pid, tr->held[i].to_exit, 0);
			tr->held[i] = tr->held[--tr->nheld];
			continue;
		}
		int64_t left = tr->held[i].deadline - now;
		if (next < 0 || left < next)
			next = left;
		i++;
	}
	return next;
}

static int trace_loop(struct tracer *tr)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		int64_t next = release_held(tr);
		int st;
		pid_t pid = waitpid(-1, &st, __WALL | (next >= 0 ? WNOHANG : 0));
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: every tracee has gone */
		}
		if (pid == 0) {
			struct timespec ts = {next / 1000000000, next % 1000000000};
			sigtimedwait(&chld, NULL, &ts);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (pid == tr->main_pid)
				tr->main_status = cj_wait_status(st);
			struct cj_pt_tracee *s = state(tr, pid, false);
			if (s && s->staged)
				close(s->staged - 1);
			forget(tr, pid);
			continue;
		}
		if (WIFSTOPPED(st))
			on_stop(tr, pid, st);
	}
	return tr->main_status;
}

int cj_run_ptrace(struct cj_policy *p, char **argv, const struct cj_opts *o)
{
	char err[512];
	int rc = -ENOMEM;
	struct tracer *tr = calloc(1, sizeof(*tr));
	if (!tr)
		return rc;
	/* SIGCHLD stays blocked so sigtimedwait can wait for it (the child unblocks it); blocked
	 * before libchfs starts its threads, so they inherit the mask and do not take it */
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	tr->p = p;
	tr->plain = o->ptrace_plain || !p->trace_fork;
	tr->t = calloc(NSLOTS, sizeof(*tr->t));
	tr->d = malloc(sizeof(*tr->d));
	int go[2] = {-1, -1};
	if (!tr->t || !tr->d)
		goto out;
	if (cj_policy_has_limits(p) && !(tr->lim = cj_iolimit_open(p, err, sizeof(err)))) {
		fprintf(stderr, "chfs-job: %s\n", err);
		rc = -EIO;
		goto out;
	}
	if (cj_policy_has(p, CJ_CHFS) && !(tr->chfs = cj_chfs_route_start(p, "ptrace", err, sizeof(err)))) {
		fprintf(stderr, "chfs-job: %s\n", err);
		rc = 3; /* main's status for "could not start", without a second line */
		goto out;
	}
	if (pipe2(go, O_CLOEXEC) < 0) {
		rc = -errno;
		goto out;
	}
	/* built before the fork: with libchfs's threads running, the child should not allocate */
	struct sock_fprog prog = {0, NULL};
	if (!tr->plain && cj_bpf_build(p, SECCOMP_RET_TRACE, &prog) < 0) {
		close(go[0]);
		close(go[1]);
		goto out;
	}
	pid_t child = fork();
	if (child == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(go[1]);
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(126); /* the tracer could not attach */
		if (!tr->plain) {
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
			    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
				fprintf(stderr,
				        "chfs-job: ptrace: cannot install the seccomp accelerator: %s\n",
				        strerror(errno));
				_exit(126);
			}
		}
		execvp(argv[0], argv);
		fprintf(stderr, "chfs-job: %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(go[0]);
	free(prog.filter);
	if (child < 0) {
		rc = -errno;
		close(go[1]);
		goto out;
	}
	long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL | PTRACE_O_TRACEFORK |
	            PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | (tr->plain ? 0 : PTRACE_O_TRACESECCOMP);
	if (ptrace(PTRACE_SEIZE, child, 0, opts) < 0) {
		rc = -errno;
		fprintf(stderr, "chfs-job: ptrace: cannot attach to pid %d: %s\n", (int)child,
		        strerror(errno));
		close(go[1]);
		waitpid(child, NULL, 0);
		goto out;
	}
	tr->main_pid = child;
	tr->main_status = 255;
	if (tr->plain) {
		/* plain mode needs a syscall-stop to start from: interrupt, then PTRACE_SYSCALL */
		ptrace(PTRACE_INTERRUPT, child, 0, 0);
	}
	if (write(go[1], "g", 1) != 1)
		rc = -errno;
	close(go[1]);
	if (o->verbose > 1)
		fprintf(stderr, "chfs-job: ptrace: tracing pid %d (%s)\n", (int)child,
		        tr->plain ? "plain" : "seccomp-accelerated");
	cj_forward_signals(child); /* PTRACE_O_EXITKILL ends the job if we die anyway */
	rc = trace_loop(tr);
out:
	if (cj_chfs_stop(tr->chfs) < 0 && rc == 0)
		rc = 1; /* a file could not be written back: said above, the job did not fully succeed */
	sigprocmask(SIG_SETMASK, &old, NULL);
	cj_iolimit_close(tr->lim);
	free(tr->t);
	free(tr->d);
	free(tr);
	return rc;
}
