/* probe.c — the program chfs-job's tests and benchmark run under each method. It makes its
 * system calls with raw syscall() (never through libc wrappers that a hook might catch), so a
 * result shows what the kernel — or the method — answered.
 *   probe open PATH            openat + read: prints the content, or "ERR <errno name>"
 *   probe stat PATH            newfstatat: prints "size N" or "ERR ..."
 *   probe openclose N PATH     N open/close pairs: prints ns per pair
 *   probe forkopen P N PATH    P processes each doing N open/close: prints total ms
 *   probe child-open PATH      fork; the child opens PATH and prints like `open`
 *   probe write FILE MB BS     write MB megabytes in BS-byte writes: prints MB/s
 *   probe pingpong N           N one-byte round trips over a socket pair: prints ns each
 *   probe send PORT MB BS      connect to 127.0.0.1:PORT, send MB megabytes in BS-byte writes
 *   probe readall HOW BS FILE...  read each file to its end with BS-byte read/pread64/readv calls
 *                              (HOW; readv splits the buffer in two): prints the bytes read, an
 *                              FNV-1a hash of them and ns per call */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *ename(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case EXDEV: return "EXDEV";
	case ENOSYS: return "ENOSYS";
	default: return strerror(e);
	}
}

static int do_open(const char *path)
{
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY, 0);
	if (fd < 0) {
		printf("ERR %s\n", ename(errno));
		return 1;
	}
	char buf[4096];
	long n;
	while ((n = syscall(SYS_read, fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	syscall(SYS_close, fd);
	return 0;
}

static void openclose(long n, const char *path)
{
	for (long i = 0; i < n; i++) {
		long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY, 0);
		if (fd >= 0)
			syscall(SYS_close, fd);
	}
}

/* Read every file to its end in bs-byte calls of kind how; print bytes, FNV-1a hash, ns per call. */
static int readall(const char *how, long bs, char **files, int nfiles)
{
	char *buf = malloc((size_t)bs);
	unsigned long long hash = 14695981039346656037ULL, bytes = 0, calls = 0;
	double t = now();
	for (int i = 0; buf && i < nfiles; i++) {
		long fd = syscall(SYS_openat, AT_FDCWD, files[i], O_RDONLY, 0);
		if (fd < 0) {
			printf("ERR %s\n", ename(errno));
			return 1;
		}
		long n, off = 0;
		do {
			if (strcmp(how, "pread") == 0) {
				n = syscall(SYS_pread64, fd, buf, bs, off);
			} else if (strcmp(how, "readv") == 0) {
				struct iovec v[2] = {{buf, (size_t)bs / 3},
				                     {buf + bs / 3, (size_t)(bs - bs / 3)}};
				n = syscall(SYS_readv, fd, v, 2);
			} else {
				n = syscall(SYS_read, fd, buf, bs);
			}
			calls++;
			if (n < 0) {
				printf("ERR %s\n", ename(errno));
				return 1;
			}
			for (long k = 0; k < n; k++)
				hash = (hash ^ (unsigned char)buf[k]) * 1099511628211ULL;
			bytes += (unsigned long long)n, off += n;
		} while (n > 0);
		syscall(SYS_close, fd);
	}
	printf("%llu %016llx %.1f\n", bytes, hash, (now() - t) * 1e9 / (double)(calls ? calls : 1));
	return buf ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "open") == 0)
		return do_open(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "stat") == 0) {
		struct stat st;
		if (syscall(SYS_newfstatat, AT_FDCWD, argv[2], &st, 0) < 0) {
			printf("ERR %s\n", ename(errno));
			return 1;
		}
		printf("size %lld\n", (long long)st.st_size);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "openclose") == 0) {
		long n = atol(argv[2]);
		double t = now();
		openclose(n, argv[3]);
		printf("%.1f\n", (now() - t) * 1e9 / (double)n);
		return 0;
	}
	if (argc >= 5 && strcmp(argv[1], "forkopen") == 0) {
		int p = atoi(argv[2]);
		long n = atol(argv[3]);
		double t = now();
		for (int i = 0; i < p; i++)
			if (fork() == 0) {
				openclose(n, argv[4]);
				_exit(0);
			}
		while (wait(NULL) > 0)
			;
		printf("%.3f\n", (now() - t) * 1e3);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "child-open") == 0) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			int rc = do_open(argv[2]);
			fflush(stdout); /* _exit does not flush */
			_exit(rc);
		}
		int st;
		waitpid(pid, &st, 0);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	if (argc >= 5 && strcmp(argv[1], "write") == 0) {
		long mb = atol(argv[3]), bs = atol(argv[4]);
		char *buf = calloc(1, (size_t)bs);
		long fd = syscall(SYS_openat, AT_FDCWD, argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || !buf) {
			printf("ERR %s\n", ename(errno));
			return 1;
		}
		long total = mb * 1000000, done = 0;
		double t = now();
		while (done < total) {
			long k = total - done < bs ? total - done : bs;
			long w = syscall(SYS_write, fd, buf, k);
			if (w <= 0)
				return 1;
			done += w;
		}
		double end = now(), dt = end - t;
		syscall(SYS_close, fd);
		/* MB/s, then when the first write started and the last ended (CLOCK_MONOTONIC, s): the
		 * bench times several writers sharing one limit from these, without process start-up */
		printf("%.3f %.6f %.6f\n", (double)total / 1e6 / dt, t, end);
		return 0;
	}
	if (argc >= 5 && strcmp(argv[1], "send") == 0) {
		long mb = atol(argv[3]), bs = atol(argv[4]);
		char *buf = calloc(1, (size_t)bs);
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (!buf || s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
			printf("ERR %s\n", ename(errno));
			return 1;
		}
		long total = mb * 1000000, done = 0;
		double t = now();
		while (done < total) {
			long k = total - done < bs ? total - done : bs;
			long w = syscall(SYS_write, s, buf, k);
			if (w <= 0)
				return 1;
			done += w;
		}
		printf("%.3f\n", (double)total / 1e6 / (now() - t));
		close(s);
		return 0;
	}
	if (argc >= 5 && strcmp(argv[1], "readall") == 0)
		return readall(argv[2], atol(argv[3]), argv + 4, argc - 4);
	if (argc >= 3 && strcmp(argv[1], "pingpong") == 0) {
		long n = atol(argv[2]);
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
			return 1;
		char c = 'x';
		pid_t pid = fork();
		if (pid == 0) {
			for (long i = 0; i < n; i++)
				if (syscall(SYS_read, sv[1], &c, 1) != 1 ||
				    syscall(SYS_write, sv[1], &c, 1) != 1)
					_exit(1);
			_exit(0);
		}
		double t = now();
		for (long i = 0; i < n; i++)
			if (syscall(SYS_write, sv[0], &c, 1) != 1 || syscall(SYS_read, sv[0], &c, 1) != 1)
				return 1;
		printf("%.1f\n", (now() - t) * 1e9 / (double)n);
		waitpid(pid, NULL, 0);
		return 0;
	}
	fprintf(stderr, "probe: bad usage (see the comment at the top of probe.c)\n");
	return 2;
}
