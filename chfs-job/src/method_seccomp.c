/* method_seccomp.c — the `seccomp` method: a supervisor answering seccomp user notifications.
 *
 * The child installs the policy's filter (bpf.c) with SECCOMP_FILTER_FLAG_NEW_LISTENER, hands
 * the listener to us (take_listener: pidfd_getfd while it is stopped), and execs the program; the kernel then stops exactly the
 * trapped calls of the child and of everything it forks (a filter is inherited and cannot be
 * removed), static binaries and raw syscall() included. For each notification:
 *   - denied path             -> the call fails with ENOENT; it never reaches the kernel;
 *   - mapped open/openat/creat -> we open the mapped path (with the tracee's umask; from the
 *     target's directory, held from the rule's first use: target_dir.c) and
 *     SECCOMP_IOCTL_NOTIF_ADDFD it into the tracee, answering the call with its number in one
 *     step (SECCOMP_ADDFD_FLAG_SEND);
 *   - mapped stat/readlink    -> we run it on the mapped path and write the result back;
 *   - mapped calls whose other arguments are numbers (mkdir, unlink, rename, access, chmod, ...)
 *     -> we run them on the absolute, mapped paths;
 *   - mapped execve, chdir, chroot, symlink, xattr and utime calls -> EXDEV: they cannot be
 *     carried out on the tracee's behalf (use ptrace, which rewrites the argument);
 *   - a path under a chfs: mapping -> served with libchfs (chfs_route.c, chfs_serve.c): an open stages the
 *     file into a memfd injected at a number >= CJ_CHFS_FD_MIN (SECCOMP_ADDFD_FLAG_SETFD), and
 *     close() of that range is trapped so a written file goes back to CHFS;
 *   - anything else            -> SECCOMP_USER_NOTIF_FLAG_CONTINUE.
 * Memory read from the tracee is acted on (a call run, a descriptor injected, its memory written)
 * only after SECCOMP_IOCTL_NOTIF_ID_VALID confirms the call is still pending (the pid could
 * otherwise have been reused); a bare answer (CONTINUE, an errno) needs no such check, since the
 * kernel refuses an answer to a call that is no longer pending.
 *
 * Cost of a trap (the allowed open of issue 13's bench): the supervisor sleeps in NOTIF_RECV with
 * synchronous wake-ups (serve_blocking, notif_wait.c) and makes 5 system calls — NOTIF_RECV,
 * process_vm_readv, openat2 + close (decide.c's link check), NOTIF_SEND. A mapped open makes 6:
 * NOTIF_RECV, process_vm_readv, NOTIF_ID_VALID, openat (from the target's directory: target_dir.c),
 * NOTIF_ADDFD (which also answers: SECCOMP_ADDFD_FLAG_SEND), close of our copy. close() itself is
 * trapped only with chfs: mappings.
 *
 * io_limit: the read/write family is trapped too. A read of a regular file under a disk limit is
 * carried out by the supervisor (seccomp_read.c) and counted by what it moved; any other transfer
 * is counted by its requested size when the call arrives. Either way the answer is held back by
 * the formula's delay (iolimit.c). Held answers wait in a list with their deadline while other
 * notifications are served, so one throttled process does not stall the others.
 *
 * trace_fork: false — the filter is still inherited (the kernel offers no way out), but a call
 * from a process other than the program's own threads is answered CONTINUE at once: children run
 * unchanged, paying only the trap. The job ends when every process holding the filter has
 * ended (POLLHUP on the listener; notif_wait.c when the supervisor blocks in NOTIF_RECV); the
 * exit status is the program's. */
#define _GNU_SOURCE
#include "bpf.h"
#include "chfs_route.h"
#include "decide.h"
#include "iolimit.h"
#include "methods.h"
#include "notif_wait.h"
#include "seccomp_read.h"
#include "target_dir.h"
#include "tracee.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_ADDFD_FLAG_SETFD
#define SECCOMP_ADDFD_FLAG_SETFD (1UL << 0)
#endif
#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV /* Linux 5.19 */
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

/* An answer held back by the limit. */
struct held {
	uint64_t id;
	int64_t deadline;
	pid_t tid;               /* the caller: a new call of that thread means this one was withdrawn */
	bool cont;               /* answer CONTINUE (the kernel runs it), else with rd.res */
	struct cj_sread_done rd; /* a read carried out here: its result, and how to take it back */
	int cls;                 /* what was counted, given back if the call was withdrawn */
	int64_t at;
	uint64_t bytes;
};

struct supervisor {
	struct cj_policy *p;
	int listener;
	pid_t main_pid;
	struct cj_iolimit *lim;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct cj_decision *d;
	struct held *held;
	int nheld, capheld;
	unsigned char *buf;          /* results of stat/readlink on the tracee's behalf */
	struct cj_sread *rd;         /* reads carried out for the tracee, when the disk is limited */
	struct cj_target_dirs *dirs; /* mapping targets' directories, held from their first use */
	struct cj_chfs *chfs;        /* the pool, when the policy has chfs: mappings */
};

/* 1 = the kernel took the answer, 0 = it refused it (ENOENT: the call was withdrawn — its caller
 * was signalled or died), <0 = error. */
static int send_answer(struct supervisor *s, uint64_t id, int64_t val, int err, bool cont)
{
	memset(s->resp, 0, sizeof(*s->resp));
	s->resp->id = id;
	s->resp->val = val;
	s->resp->error = err;
	s->resp->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
	if (ioctl(s->listener, SECCOMP_IOCTL_NOTIF_SEND, s->resp) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

static int respond(struct supervisor *s, uint64_t id, int64_t val, int err, bool cont)
{
	int rc = send_answer(s, id, val, err, cont);
	return rc < 0 ? rc : 0;
}

static bool own_thread(struct supervisor *s, pid_t tid)
{
	if (tid == s->main_pid)
		return true;
	char task[64];
	snprintf(task, sizeof(task), "/proc/%d/task/%d", (int)s->main_pid, (int)tid);
	return access(task, F_OK) == 0;
}

static int hold(struct supervisor *s, struct held h)
{
	if (s->nheld == s->capheld) {
		int cap = s->capheld ? s->capheld * 2 : 64;
		struct held *h = realloc(s->held, (size_t)cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		s->held = h;
		s->capheld = cap;
	}
	s->held[s->nheld++] = h;
	return 0;
}

/* The held answer h was sent (answered) or refused: a read carried out for it is taken back if
 * refused, and so is what it counted (a restarted call is counted again). */
static void settle(struct supervisor *s, struct held *h, bool answered)
{
	cj_sread_finish(&h->rd, answered);
	if (!answered)
		cj_iolimit_refund(s->lim, h->cls, h->bytes, h->at);
}

/* A thread that makes a new call is no longer in the one held for it: that call was withdrawn
 * (a signal; the restarted call is the new one). Take it back before the new one is served. */
static void drop_withdrawn(struct supervisor *s, pid_t tid)
{
	for (int i = 0; i < s->nheld; i++)
		if (s->held[i].tid == tid) {
			settle(s, &s->held[i], false);
			s->held[i] = s->held[--s->nheld];
			return;
		}
}

/* Answer the held calls whose time has come; return ns until the next one (-1 if none). */
static int64_t release_held(struct supervisor *s)
{
	int64_t now = cj_now_ns(), next = -1;
	for (int i = 0; i < s->nheld;) {
		if (s->held[i].deadline <= now) {
			struct held *h = &s->held[i];
			int rc = h->rd.res < 0 ? send_answer(s, h->id, 0, (int)h->rd.res, false)
			                       : send_answer(s, h->id, h->rd.res, 0, h->cont);
			settle(s, h, rc > 0);
			s->held[i] = s->held[--s->nheld];
			continue;
		}
		int64_t left = s->held[i].deadline - now;
		if (next < 0 || left < next)
			next = left;
		i++;
	}
	return next;
}

/* The lowest descriptor number >= CJ_CHFS_FD_MIN that process pid does not use. */
static int free_high_fd(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	static unsigned char used[1024];
	memset(used, 0, sizeof(used));
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (atoi(e->d_name) >= CJ_CHFS_FD_MIN && atoi(e->d_name) < 1024)
			used[atoi(e->d_name)] = 1;
	if (d)
		closedir(d);
	for (int fd = CJ_CHFS_FD_MIN; fd < 1024; fd++)
		if (!used[fd])
			return fd;
	return -1;
}

/* A chfs: path opened: stage it (chfs_serve.c) and inject it into the reserved range (or, if
 * the tracee's RLIMIT_NOFILE forbids that range, at its lowest free number: then only the end
 * of the job writes it back). */
static int open_chfs(struct supervisor *s, const uint64_t *a)
{
	int flags;
	int fd = cj_chfs_route_open(s->chfs, s->p, s->d, s->req->pid, s->req->data.nr, a, &flags);
	if (fd < 0)
		return fd;
	int high = free_high_fd(s->req->pid);
	struct seccomp_notif_addfd add = {
	        .id = s->req->id,
	        .flags = SECCOMP_ADDFD_FLAG_SEND | (high > 0 ? SECCOMP_ADDFD_FLAG_SETFD : 0),
	        .srcfd = (uint32_t)fd,
	        .newfd = high > 0 ? (uint32_t)high : 0,
	        .newfd_flags = (uint32_t)(flags & O_CLOEXEC),
	};
	int rc = ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	if (rc < 0 && errno == EBADF && high > 0) { /* above the tracee's RLIMIT_NOFILE */
		add.flags = SECCOMP_ADDFD_FLAG_SEND, add.newfd = 0;
		rc = ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	}
	int e = errno;
	close(fd);
	return rc < 0 && e != ENOENT ? -e : 1;
}

static int open_mapped(struct supervisor *s, const struct cj_sysc *sc, const uint64_t *a)
{
	int flags, mode;
	int rc = cj_chfs_route_open_args(s->req->pid, s->req->data.nr, a, &flags, &mode);
	if (rc < 0)
		return rc;
	mode_t old = 0;
	bool creates = flags & (O_CREAT | __O_TMPFILE);
	if (creates)
		old = umask(cj_tracee_umask(s->req->pid));
	int fd = cj_target_open(s->dirs, s->d->rule[0], s->d->path[0], flags | O_CLOEXEC, (mode_t)mode);
	if (creates)
		umask(old);
	if (fd < 0)
		return fd;
	struct seccomp_notif_addfd add = {
	        .id = s->req->id,
	        .flags = SECCOMP_ADDFD_FLAG_SEND,
	        .srcfd = (uint32_t)fd,
	        .newfd_flags = (uint32_t)(flags & O_CLOEXEC),
	};
	rc = ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	int e = errno;
	close(fd);
	if (rc < 0 && e != ENOENT)
		return -e;
	(void)sc;
	return 1; /* answered */
}

/* Run a mapped call ourselves on absolute paths; return its result (>=0) or -errno. */
static long replay(struct supervisor *s, const struct cj_sysc *sc, uint64_t *a)
{
	pid_t pid = s->req->pid;
	for (int i = 0; i < 2 && sc->path[i] >= 0; i++) {
		/* an empty path with its own descriptor (linkat(fd, "", ..., AT_EMPTY_PATH)) names a
		 * descriptor of the tracee, which means nothing in our descriptor table */
		if (!s->d->path[i][0] && sc->dirfd[i] >= 0 && (int)a[(int)sc->dirfd[i]] != AT_FDCWD)
			return -EXDEV;
		if (s->d->path[i][0]) {
			a[(int)sc->path[i]] = (uint64_t)(uintptr_t)s->d->path[i];
			if (sc->dirfd[i] >= 0)
				a[(int)sc->dirfd[i]] = (uint64_t)(int64_t)AT_FDCWD;
		}
	}
	uint64_t tbuf = 0;
	size_t blen = 0;
	if (sc->kind == CJ_SK_STAT || sc->kind == CJ_SK_READLINK) {
		tbuf = a[(int)sc->buf];
		blen = sc->kind == CJ_SK_READLINK ? (size_t)a[(int)sc->buf + 1] : 512;
		if (blen > 8192)
			blen = 8192;
		a[(int)sc->buf] = (uint64_t)(uintptr_t)s->buf;
	}
	bool creates = s->req->data.nr == SYS_mkdir || s->req->data.nr == SYS_mkdirat ||
	               s->req->data.nr == SYS_mknod || s->req->data.nr == SYS_mknodat;
	mode_t old = creates ? umask(cj_tracee_umask(pid)) : 0;
	long r = syscall(s->req->data.nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	int e = errno;
	if (creates)
		umask(old);
	if (r < 0)
		return -e;
	if (tbuf) {
		size_t n = sc->kind == CJ_SK_READLINK ? (size_t)r : 0;
		if (sc->kind == CJ_SK_STAT) {
			int nr = s->req->data.nr;
			n = nr == SYS_statx    ? sizeof(struct statx)
			    : nr == SYS_statfs ? 120
			                       : sizeof(struct stat);
		}
		if (cj_tracee_write(pid, tbuf, s->buf, n) < 0)
			return -EFAULT;
	}
	return r;
}

/* getdents64 on the tracee's behalf: a duplicate of its descriptor (pidfd_getfd) shares the
 * open file description, so the directory offset advances for the tracee as for us. A chunk
 * whose names are all denied is skipped (an empty answer would read as the end). */
static long list_dir(struct supervisor *s, const uint64_t *a)
{
	pid_t pid = s->req->pid;
	int fd = cj_tracee_getfd(pid, (int)a[0]);
	if (fd < 0)
		return fd;
	char dir[PATH_MAX];
	size_t cap = a[2] < 8192 ? (size_t)a[2] : 8192;
	long n = cj_tracee_dir(pid, (int)a[0], dir, sizeof(dir));
	while (n == 0) {
		long raw = syscall(SYS_getdents64, fd, s->buf, cap);
		if (raw <= 0) {
			n = raw < 0 ? -errno : 0;
			break;
		}
		n = (long)cj_filter_dirents(s->p, dir, s->buf, (size_t)raw);
		if (n == 0)
			continue; /* every name of this chunk was denied: read the next one */
		break;
	}
	close(fd);
	if (n > 0 && cj_tracee_write(pid, a[1], s->buf, (size_t)n) < 0)
		return -EFAULT;
	return n;
}

/* Whether the notification we hold is still pending: its process is still stopped in that call,
 * so what we read from pid s->req->pid was its memory, not that of a process that reused the pid. */
static bool still_pending(struct supervisor *s)
{
	return ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &s->req->id) == 0;
}

/* A read carried out here (seccomp_read.c): count what it moved, then answer with its result, at
 * once or when the limit lets it through. */
static int answer_read(struct supervisor *s, struct cj_sread_done *rd)
{
	uint64_t moved = rd->res > 0 ? (uint64_t)rd->res : 0;
	int64_t at = 0;
	struct held h = {s->req->id, 0, s->req->pid, false, *rd, CJ_DISK, 0, moved};
	h.deadline = cj_iolimit_account(s->lim, CJ_DISK, moved, &at) > 0 ? at : 0;
	h.at = at;
	if (h.deadline)
		return hold(s, h);
	int rc = rd->res < 0 ? send_answer(s, h.id, 0, (int)rd->res, false)
	                     : send_answer(s, h.id, rd->res, 0, false);
	settle(s, &h, rc > 0);
	return rc < 0 ? rc : 0;
}

/* A read/write-family call on a descriptor of a limited class. */
static int handle_io(struct supervisor *s, const struct cj_sysc *sc, const uint64_t *a)
{
	struct seccomp_notif *req = s->req;
	int cls = -2;
	if (s->rd && cj_sread_handles(req->data.nr)) {
		struct cj_sread_done rd;
		int rc = cj_sread_run(s->rd, s->listener, req, &cls, &rd);
		if (rc < 0)
			return 0; /* withdrawn: nothing was done, nobody to answer */
		if (rc > 0)
			return answer_read(s, &rd);
	}
	if (cls == -2)
		cls = cj_tracee_fd_class(req->pid, (int)a[0]);
	int64_t at = 0;
	uint64_t bytes = cj_iolimit_limited(s->lim, cls) ? cj_tracee_io_size(req->pid, sc->iov, a) : 0;
	if (bytes &&
	    cj_iolimit_account(s->lim, cls, bytes, &at) > 0) /* answered when it is recorded to go through */
		return hold(s, (struct held){req->id, at, req->pid, true, {0, -1, 0}, cls, at, bytes});
	return respond(s, req->id, 0, 0, true);
}

/* Answer the notification in s->req. */
static int handle(struct supervisor *s)
{
	struct seccomp_notif *req = s->req;
	if (s->nheld)
		drop_withdrawn(s, req->pid);
	/* close() of the reserved range, or dup2/dup3 onto any descriptor: a staged CHFS file
	 * there goes back before it is closed */
	if (cj_chfs_route_closing(s->chfs, req->pid, req->data.nr, (const uint64_t *)req->data.args))
		return respond(s, req->id, 0, 0, true);
	const struct cj_sysc *sc = cj_sysc_find(req->data.nr);
	if (!sc || (!s->p->trace_fork && !own_thread(s, req->pid)))
		return respond(s, req->id, 0, 0, true);
	uint64_t a[6];
	memcpy(a, req->data.args, sizeof(a));
	if (sc->kind == CJ_SK_IO)
		return handle_io(s, sc, a);
	if (sc->kind == CJ_SK_DIRENT) {
		if (!still_pending(s))
			return 0; /* we would write its memory */
		long r = list_dir(s, a);
		return r < 0 ? respond(s, req->id, 0, (int)r, false) : respond(s, req->id, r, 0, false);
	}
	cj_decide(s->p, sc, req->pid, a, s->d);
	/* An answer alone needs no check that the call is still pending: if its process died and the
	 * pid was reused while we read, the answer goes to a notification that no longer exists and
	 * the kernel refuses it (ENOENT). Acting on the caller's behalf (opening, running the call,
	 * writing its memory) is done only after NOTIF_ID_VALID confirms the call is still the one
	 * we were sent. */
	if (s->d->verdict == CJ_V_ALLOW)
		return respond(s, req->id, 0, 0, true);
	if (s->d->verdict == CJ_V_ERROR)
		return respond(s, req->id, 0, s->d->err, false);
	if (!still_pending(s))
		return 0;
	if (s->d->verdict == CJ_V_CHFS) {
		long r = sc->kind == CJ_SK_OPEN ? open_chfs(s, a)
		                                : cj_chfs_route_call(s->chfs, s->p, s->d, sc, req->pid,
		                                                     (int)req->data.nr, a);
		if (sc->kind == CJ_SK_OPEN && r > 0)
			return 0; /* answered with the descriptor */
		return r < 0 ? respond(s, req->id, 0, (int)r, false) : respond(s, req->id, r, 0, false);
	}
	long r;
	switch (sc->kind) {
	case CJ_SK_OPEN:
		r = open_mapped(s, sc, a);
		if (r > 0)
			return 0;
		break;
	case CJ_SK_STAT:
	case CJ_SK_READLINK:
	case CJ_SK_SCALAR: r = replay(s, sc, a); break;
	default: r = -EXDEV; break;
	}
	return r < 0 ? respond(s, req->id, 0, (int)r, false) : respond(s, req->id, r, 0, false);
}

/* Receive one notification into s->req: 1 = received, 0 = none (interrupted, or the call was
 * withdrawn: its process was signalled or died), <0 = error. */
static int receive(struct supervisor *s)
{
	memset(s->req, 0, sizeof(*s->req));
	if (ioctl(s->listener, SECCOMP_IOCTL_NOTIF_RECV, s->req) == 0)
		return 1;
	return errno == EINTR || errno == ENOENT ? 0 : -errno;
}

/* Without held answers (no io_limit) the supervisor sleeps in NOTIF_RECV itself, with the
 * kernel's synchronous hand-over of each trap (notif_wait.c). */
static int serve_blocking(struct supervisor *s, struct cj_notif_wait *w)
{
	for (;;) {
		int rc = cj_notif_wait_next(w, s->req);
		if (rc <= 0)
			return rc; /* 0: no process holds the filter any more */
		rc = handle(s);
		if (rc < 0)
			return rc;
	}
}

/* ppoll() the listener, waking also when the next held answer is due. */
static int serve_polling(struct supervisor *s)
{
	for (;;) {
		int64_t next = release_held(s); /* to the ns: a poll() rounded to ms held each answer late */
		struct timespec ts = {next / 1000000000, next % 1000000000};
		struct pollfd pf = {s->listener, POLLIN, 0};
		int n = ppoll(&pf, 1, next < 0 ? NULL : &ts, NULL);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		if (pf.revents & POLLIN) {
			int rc = receive(s);
			if (rc > 0)
				rc = handle(s);
			if (rc < 0)
				return rc;
		} else if (pf.revents & (POLLHUP | POLLERR)) {
			return 0; /* no process holds the filter any more */
		}
	}
}

/* Serve until no process holds the filter, then reap the program: its status is the job's. */
static int supervise(struct supervisor *s, pid_t child)
{
	struct cj_notif_wait *w = s->lim ? NULL : cj_notif_wait_start(s->listener);
	int rc = w ? serve_blocking(s, w) : serve_polling(s);
	cj_notif_wait_stop(w);
	if (rc < 0) {
		fprintf(stderr, "chfs-job: seccomp: supervisor failed: %s\n", strerror(-rc));
		return rc;
	}
	int st;
	pid_t got;
	while ((got = waitpid(child, &st, 0)) < 0 && errno == EINTR)
		;
	return got == child ? cj_wait_status(st) : -1;
}

/* The listener crosses to us without a system call the filter may trap (sendmsg and write are
 * trapped when the policy has limits, and nobody would answer yet): the child puts it at a
 * descriptor number we know, stops itself, and we take it with pidfd_getfd. */
static void child_main(struct cj_policy *p, int known_fd, char **argv)
{
	struct sock_fprog prog;
	if (cj_bpf_build(p, SECCOMP_RET_USER_NOTIF, &prog) < 0)
		_exit(126);
	/* without its supervisor the job could only fail every trapped call: end it with us */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		fprintf(stderr, "chfs-job: seccomp: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
		_exit(126);
	}
	/* With limits, a received call is withdrawn only by death. Otherwise a signal withdrew a held
	 * call, its restart was counted and held again, and a program signalled more often than its
	 * calls were held never got through; and a read the supervisor carried out (seccomp_read.c)
	 * would be lost. As a ptrace tracee held at its entry stop, a held caller takes its signals
	 * when the answer comes. Kernels before 5.19 lack the flag: there a withdrawn call is taken
	 * back (its count, a read's offset) when its thread is seen in another call. */
	unsigned long flags = SECCOMP_FILTER_FLAG_NEW_LISTENER;
	int fd = -1;
	if (cj_policy_has_limits(p))
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		                  flags | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
	if (fd < 0)
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	if (fd < 0) {
		fprintf(stderr, "chfs-job: seccomp: cannot install the filter: %s\n", strerror(errno));
		_exit(126);
	}
	/* not dup2: with chfs: mappings it is trapped, and nobody answers yet */
	if (fd != known_fd &&
	    (close(known_fd) < 0 || fcntl(fd, F_DUPFD, known_fd) != known_fd || close(fd) < 0))
		_exit(126);
	raise(SIGSTOP);
	close(known_fd);
	execvp(argv[0], argv);
	fprintf(stderr, "chfs-job: %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* Wait for the child's stop, take its listener, let it go on. */
static int take_listener(pid_t child, int known_fd, int *status)
{
	int st;
	if (waitpid(child, &st, WUNTRACED) != child)
		return -errno;
	if (!WIFSTOPPED(st)) {
		*status = cj_wait_status(st);
		return -ECHILD;
	}
	int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	int fd = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, known_fd, 0);
	int e = errno;
	if (pidfd >= 0)
		close(pidfd);
	if (fd < 0) {
		kill(child, SIGKILL);
		waitpid(child, &st, 0);
		fprintf(stderr, "chfs-job: seccomp: cannot take the listener from pid %d: %s\n", (int)child,
		        strerror(e));
		return -e;
	}
	kill(child, SIGCONT);
	return fd;
}

int cj_run_seccomp(struct cj_policy *p, char **argv, const struct cj_opts *o)
{
	char err[512];
	struct supervisor *s = calloc(1, sizeof(*s));
	struct seccomp_notif_sizes sz;
	if (!s || syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0) {
		fprintf(stderr, "chfs-job: seccomp: user notification unavailable: %s\n", strerror(errno));
		free(s);
		return -ENOSYS;
	}
	s->p = p;
	s->req = calloc(1, sz.seccomp_notif > sizeof(*s->req) ? sz.seccomp_notif : sizeof(*s->req));
	s->resp = calloc(1,
	                 sz.seccomp_notif_resp > sizeof(*s->resp) ? sz.seccomp_notif_resp : sizeof(*s->resp));
	s->d = malloc(sizeof(*s->d));
	s->buf = malloc(8192);
	s->dirs = cj_target_dirs_new(p);
	int rc = -ENOMEM;
	if (!s->req || !s->resp || !s->d || !s->buf || !s->dirs)
		goto out;
	if (cj_policy_has_limits(p) && !(s->lim = cj_iolimit_open(p, err, sizeof(err)))) {
		fprintf(stderr, "chfs-job: %s\n", err);
		rc = -EIO;
		goto out;
	}
	if (cj_iolimit_limited(s->lim, CJ_DISK) && !(s->rd = cj_sread_new()))
		goto out;
	if (cj_policy_has(p, CJ_CHFS) && !(s->chfs = cj_chfs_route_start(p, "seccomp", err, sizeof(err)))) {
		fprintf(stderr, "chfs-job: %s\n", err);
		rc = 3; /* main's status for "could not start", without a second line */
		goto out;
	}
	/* a descriptor number free in the child: one we hold open across the fork */
	int known_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (known_fd < 0) {
		rc = -errno;
		goto out;
	}
	pid_t child = fork();
	if (child == 0)
		child_main(p, known_fd, argv);
	close(known_fd);
	if (child < 0) {
		rc = -errno;
		goto out;
	}
	s->main_pid = child;
	int status = 126;
	s->listener = take_listener(child, known_fd, &status);
	if (s->listener < 0) {
		rc = s->listener == -ECHILD ? status : s->listener;
		goto out;
	}
	if (o->verbose > 1)
		fprintf(stderr, "chfs-job: seccomp: supervising pid %d\n", (int)child);
	signal(SIGPIPE, SIG_IGN);
	cj_forward_signals(child);
	rc = supervise(s, child);
	close(s->listener);
out:
	if (cj_chfs_stop(s->chfs) < 0 && rc == 0)
		rc = 1; /* a file could not be written back: said above, the job did not fully succeed */
	cj_iolimit_close(s->lim);
	free(s->req);
	free(s->resp);
	free(s->d);
	free(s->buf);
	for (int i = 0; i < s->nheld; i++)
		cj_sread_finish(&s->held[i].rd, false); /* every process has gone */
	cj_sread_free(s->rd);
	cj_target_dirs_free(s->dirs);
	free(s->held);
	free(s);
	return rc;
}
