/*
 * deepwalk.c — walks deeper than PATH_MAX with short arguments only, as programs do with
 * directory descriptors and chdir (issue 16 item 5). test_hook_long_paths.py runs it on a local
 * directory (the kernel's answers) and under the hook in CHFS, and compares the transcripts.
 *   walk DIR N        N levels of 120-byte directories below DIR (mkdirat + openat), then in
 *                     the deepest: create, write, read back, fstatat, renameat, getdents64,
 *                     /proc/self/fd/N, fchdir and relative names, getcwd (ENAMETOOLONG beyond
 *                     PATH_MAX whatever the size), arguments of PATH_MAX bytes, exec with a
 *                     deep descriptor and cwd, unlinkat; then chdir down level by level and
 *                     back up, checking getcwd at every level (ERANGE for a short buffer)
 *   beyond DIR ROOT   walks below DIR (ROOT bytes from the CHFS root) until refused, then
 *                     probes the bound: names of HOOK_CHFS_PATH_MAX - 1 bytes from the CHFS
 *                     root work, one byte more is ENAMETOOLONG; every level lists what it
 *                     should (nothing landed at a truncated name)
 *   child FD          what walk executes: reads the inherited FD and a file of the inherited cwd
 * Prints one line per step; depths count from DIR so that transcripts compare. Exits 0 unless
 * the program itself cannot run (the transcript tells what went wrong).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define COMP_LEN 120
#define CHFS_PATH_MAX 16384 /* the bound the hook keeps (HOOK_CHFS_PATH_MAX) */
static char comp[COMP_LEN + 1];

static const char *res(long r) { return r < 0 ? strerrorname_np(errno) : "ok"; }

static void die(const char *what)
{
	printf("cannot %s: %s\n", what, strerrorname_np(errno));
	exit(1);
}

/* The raw system call, as the kernel answers it (glibc's getcwd falls back to walking ".."). */
static long sys_getcwd(char *buf, size_t size)
{
	errno = 0;
	return syscall(SYS_getcwd, buf, size);
}

static const char *read_all(int fd, off_t off)
{
	static char buf[256];
	ssize_t n = pread(fd, buf, sizeof buf - 1, off);
	if (n < 0)
		return strerrorname_np(errno);
	buf[n] = 0;
	return buf;
}

static const char *read_file_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strerrorname_np(errno);
	const char *s = read_all(fd, 0);
	close(fd);
	return s;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in directory fd (without . and ..), sorted, space-separated. */
static const char *listing(int fd)
{
	static char out[4096];
	char buf[8192], *names[64];
	int n = 0;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return strerrorname_np(errno);
	for (;;) {
		long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (got < 0)
			return strerrorname_np(errno);
		if (got == 0)
			break;
		for (long o = 0; o < got;) {
			struct dirent64 *d = (struct dirent64 *)(buf + o);
			if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..") && n < 64)
				names[n++] = strdup(d->d_name);
			o += d->d_reclen;
		}
	}
	qsort(names, (size_t)n, sizeof *names, cmp);
	out[0] = 0;
	for (int i = 0; i < n; i++) {
		if (strlen(out) + strlen(names[i]) + 2 < sizeof out)
			strcat(strcat(out, i ? " " : ""), names[i]);
		free(names[i]);
	}
	return n ? out : "(empty)";
}

/* "file size N", "dir" (directory sizes differ between file systems) or the errno name. */
static const char *size_of(int dirfd, const char *name)
{
	static char out[64];
	struct stat st;
	if (fstatat(dirfd, name, &st, 0) != 0)
		return strerrorname_np(errno);
	if (S_ISDIR(st.st_mode))
		return "dir";
	snprintf(out, sizeof out, "file size %lld", (long long)st.st_size);
	return out;
}

static void write_at(int dirfd, const char *name, const char *data)
{
	int fd = openat(dirfd, name, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t w = fd < 0 ? -1 : write(fd, data, strlen(data));
	printf("create %s: %s, wrote %zd\n", name, res(fd), w);
	if (fd >= 0)
		close(fd);
}

/* n times "x/" then "x": a name of 2n+1 bytes of short components. */
static char *long_arg(size_t bytes)
{
	char *p = malloc(bytes + 1);
	for (size_t i = 0; i < bytes; i++)
		p[i] = i % 2 ? '/' : 'x';
	p[bytes] = 0;
	return p;
}

static void getcwd_deep(const char *where)
{
	char *buf = malloc(20000);
	long a = sys_getcwd(buf, 20000);
	const char *ea = res(a);
	long b = sys_getcwd(buf, 1);
	const char *eb = res(b);
	long c = sys_getcwd(NULL, 20000);
	printf("getcwd %s: size 20000 %s, size 1 %s, NULL buffer %s\n", where, ea, eb, res(c));
	free(buf);
}

/* glibc's getcwd(3) in dir + n components: the whole name (glibc walks ".." where the system
 * call gives up), ERANGE for a buffer one byte short, allocated or not. */
static void libc_getcwd_deep(const char *dir, int n)
{
	size_t dl = strlen(dir), len = dl + (size_t)n * (COMP_LEN + 1);
	char *want = malloc(len + 1);
	memcpy(want, dir, dl);
	for (int i = 0; i < n; i++) {
		want[dl + (size_t)i * (COMP_LEN + 1)] = '/';
		memcpy(want + dl + (size_t)i * (COMP_LEN + 1) + 1, comp, COMP_LEN);
	}
	want[len] = 0;
	char *got = getcwd(NULL, 0);
	const char *alloc = got ? strcmp(got, want) == 0 ? "the whole name" : "a wrong name" : res(-1);
	char *buf = malloc(len + 1);
	char *exact = getcwd(buf, len + 1);
	const char *fit = exact ? strcmp(exact, want) == 0 ? "the whole name" : "a wrong name" : res(-1);
	const char *shorter = res(getcwd(buf, len) ? 0 : -1);
	char *sized = getcwd(NULL, len);
	printf("getcwd(3) of %zu bytes: NULL 0 %s, size len+1 %s, size len %s, NULL len %s\n", len - dl,
	       alloc, fit, shorter, res(sized ? 0 : -1));
	free(sized);
	free(buf);
	free(got);
	free(want);
}

/* chdir down from dir, one level at a time, and back up, checking getcwd everywhere. */
static void chdir_steps(const char *dir, int n)
{
	size_t dl = strlen(dir);
	char *want = malloc(dl + (size_t)n * (COMP_LEN + 1) + 1), *buf = malloc(20000);
	strcpy(want, dir);
	int bad = 0, too_long = 0;
	if (chdir(dir) != 0)
		die("chdir DIR");
	for (int i = 1; i <= 2 * n && !bad; i++) {
		int down = i <= n;
		if (chdir(down ? comp : "..") != 0) {
			printf("chdir step %d (%s): %s\n", i, down ? "down" : "up", res(-1));
			bad = 1;
			break;
		}
		size_t len = dl + (size_t)(down ? i : 2 * n - i) * (COMP_LEN + 1);
		if (down)
			strcat(strcat(want, "/"), comp);
		else
			want[len] = 0;
		long r = sys_getcwd(buf, 20000);
		int ok = len + 1 > PATH_MAX ? r < 0 && errno == ENAMETOOLONG
		                            : r == (long)len + 1 && strcmp(buf, want) == 0;
		too_long += len + 1 > PATH_MAX;
		if (!ok) {
			printf("getcwd at step %d (%zu bytes): %ld %s\n", i, len, r, res(r));
			bad = 1;
		}
		if (i == 1) { /* a short buffer: ERANGE, the exact size works */
			long e1 = sys_getcwd(buf, len);
			const char *s1 = res(e1);
			long e0 = sys_getcwd(buf, 0);
			const char *s0 = res(e0);
			long ex = sys_getcwd(buf, len + 1);
			printf("getcwd one level down: size len %s, size 0 %s, size len+1 %s\n", s1, s0,
			       ex == (long)len + 1 ? "ok" : res(-1));
		}
	}
	if (!bad)
		printf("chdir %d levels down and up: getcwd as expected at every level (%s)\n", n,
		       too_long ? "ENAMETOOLONG where deeper than PATH_MAX" : "never deeper than PATH_MAX");
	free(want);
	free(buf);
}

static int walk(const char *dir, int n)
{
	memset(comp, 'w', COMP_LEN);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die("open DIR");
	int level = 0;
	for (; level < n; level++) {
		if (mkdirat(fd, comp, 0755) != 0)
			break;
		int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (nfd < 0)
			break;
		close(fd);
		fd = nfd;
	}
	printf("walk: %d levels, %d bytes below DIR: %s\n", level, level * (COMP_LEN + 1),
	       level == n ? "ok" : res(-1));
	if (level < n)
		return 0;
	write_at(fd, "leaf", "deep data\n");
	printf("read leaf: %s", read_file_at(fd, "leaf"));
	printf("fstatat leaf: %s\n", size_of(fd, "leaf"));
	printf("renameat leaf leaf2: %s\n", res(renameat(fd, "leaf", fd, "leaf2")));
	printf("fstatat leaf: %s\n", size_of(fd, "leaf"));
	printf("fstatat leaf2: %s\n", size_of(fd, "leaf2"));
	printf("mkdirat sub: %s\n", res(mkdirat(fd, "sub", 0755)));
	printf("getdents64: %s\n", listing(fd));

	/* a deep file kept open (and across exec: no close-on-exec) */
	int lf = openat(fd, "leaf2", O_RDWR);
	if (lf < 0)
		die("open leaf2");
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", lf);
	printf("open /proc/self/fd/N: %s", read_file_at(AT_FDCWD, self));
	char link[64];
	long rl = readlink(self, link, sizeof link);
	printf("readlink /proc/self/fd/N: %s\n", res(rl));

	printf("fchdir: %s\n", res(fchdir(fd)));
	write_at(AT_FDCWD, "rel", "rel\n");
	struct stat st;
	long r = stat("rel", &st);
	printf("stat rel: %s size %lld\n", res(r), r ? -1LL : (long long)st.st_size);
	printf("mkdir reldir: %s\n", res(mkdir("reldir", 0755)));
	printf("stat reldir/.: %s\n", size_of(AT_FDCWD, "reldir/."));
	printf("chdir reldir: %s\n", res(chdir("reldir")));
	printf("chdir ..: %s\n", res(chdir("..")));
	printf("stat leaf2: %s\n", size_of(AT_FDCWD, "leaf2"));
	getcwd_deep("in the deepest directory");
	libc_getcwd_deep(dir, n);

	/* one argument of PATH_MAX bytes is ENAMETOOLONG; PATH_MAX - 1 bytes are looked up */
	char *a4096 = long_arg(PATH_MAX), *a4095 = long_arg(PATH_MAX - 1);
	printf("openat %d-byte name: %s\n", PATH_MAX, res(openat(fd, a4096, O_RDONLY)));
	printf("openat %d-byte name: %s\n", PATH_MAX - 1, res(openat(fd, a4095, O_RDONLY)));
	printf("stat %d-byte relative name: %s\n", PATH_MAX, res(stat(a4096, &st)));
	a4096[0] = '/';
	printf("open %d-byte absolute name: %s\n", PATH_MAX, res(open(a4096, O_RDONLY)));
	free(a4096);
	free(a4095);

	/* exec: the deep descriptor and the deep cwd carry over */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char arg[16];
		snprintf(arg, sizeof arg, "%d", lf);
		execl("/proc/self/exe", "deepwalk", "child", arg, (char *)NULL);
		_exit(127);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	printf("child: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
	       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	close(lf);

	printf("unlink rel: %s\n", res(unlink("rel")));
	printf("rmdir reldir: %s\n", res(rmdir("reldir")));
	printf("unlinkat leaf2: %s\n", res(unlinkat(fd, "leaf2", 0)));
	printf("unlinkat sub AT_REMOVEDIR: %s\n", res(unlinkat(fd, "sub", AT_REMOVEDIR)));
	printf("fstatat leaf2: %s\n", size_of(fd, "leaf2"));
	printf("getdents64: %s\n", listing(fd));
	close(fd);
	chdir_steps(dir, n);
	return 0;
}

static int child(int fd)
{
	struct stat st;
	long r = fstat(fd, &st);
	printf("child: inherited descriptor reads %s", read_all(fd, 0));
	printf("child: fstat %s size %lld\n", res(r), r ? -1LL : (long long)st.st_size);
	printf("child: cwd's rel reads %s", read_file_at(AT_FDCWD, "rel"));
	getcwd_deep("in the child");
	return 0;
}

/* Probes the bound below dir (root bytes from the CHFS root). */
static int beyond(const char *dir, long root)
{
	memset(comp, 'w', COMP_LEN);
	int fds[CHFS_PATH_MAX / (COMP_LEN + 1) + 2], n = 0;
	fds[0] = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fds[0] < 0)
		die("open DIR");
	long len = root; /* bytes from the CHFS root of the directory fds[n] */
	for (;;) {
		if (mkdirat(fds[n], comp, 0755) != 0)
			break;
		int nfd = openat(fds[n], comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (nfd < 0)
			die("openat a new level");
		fds[++n] = nfd;
		len += COMP_LEN + 1;
	}
	printf("mkdirat at level %d (%ld bytes from the CHFS root): %s\n", n + 1, len + COMP_LEN + 1,
	       res(-1));
	int deep = fds[n];
	long room = CHFS_PATH_MAX - 1 - len - 1; /* "/" and a name up to the bound */
	if (room < 1 || room >= NAME_MAX) {
		printf("no room for a name at the bound below level %d: %ld bytes\n", n, room);
		return 0;
	}
	char *name = malloc((size_t)room + 2);
	memset(name, 'f', (size_t)room + 1);
	name[room + 1] = 0;
	printf("create a name %ld bytes from the CHFS root: %s\n", len + 1 + room + 1,
	       res(openat(deep, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
	printf("mkdirat it: %s\n", res(mkdirat(deep, name, 0755)));
	printf("fstatat it: %s\n", size_of(deep, name));
	name[room] = 0;
	printf("a name %ld bytes from the CHFS root:\n", len + 1 + room);
	write_at(deep, name, "at the bound\n");
	printf("read it: %s", read_file_at(deep, name));
	printf("renameat it to d: %s\n", res(renameat(deep, name, deep, "d")));
	printf("mkdirat it: %s\n", res(mkdirat(deep, name, 0755)));
	printf("fchdir the deepest: %s\n", res(fchdir(deep)));
	printf("chdir to the bound: %s\n", res(chdir(name)));
	getcwd_deep("at the bound");
	printf("stat .: %s\n", size_of(AT_FDCWD, "."));
	printf("stat x: %s\n", size_of(AT_FDCWD, "x"));
	printf("mkdir x: %s\n", res(mkdir("x", 0755)));
	printf("chdir x: %s\n", res(chdir("x")));
	printf("chdir ..: %s\n", res(chdir("..")));
	printf("stat d: %s\n", size_of(AT_FDCWD, "d"));
	/* nothing landed elsewhere: every level holds exactly the next one */
	int odd = 0;
	for (int i = 0; i < n; i++)
		if (strcmp(listing(fds[i]), comp) != 0 && !odd++)
			printf("level %d lists %s\n", i, listing(fds[i]));
	printf("levels 0..%d list only the next level: %s\n", n - 1, odd ? "no" : "yes");
	printf("the deepest lists: %s\n", listing(deep));
	free(name);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "walk") == 0)
		return walk(argv[2], atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "beyond") == 0)
		return beyond(argv[2], atol(argv[3]));
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child(atoi(argv[2]));
	fprintf(stderr, "usage: deepwalk walk DIR N | beyond DIR ROOT | child FD\n");
	return 2;
}
