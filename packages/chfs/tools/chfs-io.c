/*
 * chfs-io — run one libchfs operation from the command line (used by the integration tests and
 * handy for poking at a pool). Data goes through stdin/stdout; errors print one line
 * "chfs-io: OP PATH: ERRNAME (message)" and exit 1, so a caller can check the exact errno.
 */
#define _GNU_SOURCE
#include <chfs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *op, *arg1;

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: chfs-io OP ARGS...   (server from CHFS_SERVER)\n"
	        "  create PATH [CHUNK] [local]   create (truncate) a file\n"
	        "  put PATH OFFSET [create]      pwrite stdin at OFFSET\n"
	        "  get PATH [OFFSET [LEN]]       pread to stdout (whole file by default)\n"
	        "  stat|lstat PATH               print mode(octal) size nlink mtime\n"
	        "  truncate PATH LEN | unlink PATH | rename FROM TO | link OLD NEW | mkdir PATH | rmdir PATH\n"
	        "  utime PATH SECONDS             set atime and mtime (seconds since the epoch)\n"
	        "  symlink TARGET PATH | readlink PATH | chmod PATH MODE | chown PATH UID GID | access PATH MODE\n"
	        "  ls PATH                       entry names, one per line\n"
	        "  mkfiles DIR N                 create N empty files DIR/f000000...\n"
	        "  smallwrites PATH N SIZE       N sequential writes of SIZE bytes (byte k = k %% 251)\n"
	        "  writehold PATH SIZE           open, write SIZE bytes (byte k = k %% 251), stat (print\n"
	        "                                the size), then close once stdin gives a line or ends\n"
	        "  forkcheck PATH                write, fork, child reads/writes through its own transport\n"
	        "  stagein PATH                  chfs_stagein (copy the backend file in now)\n"
	        "  sync                          chfs_sync_backend (everything written on the backend)\n"
	        "  localpath PATH                backing file of a local-placement file\n"
	        "  writeloop PATH SECONDS        rewrite 1 MiB blocks until SECONDS pass or an error\n"
	        "  size                          number of servers\n"
	        "Ends with chfs_term (which syncs: flushes to the backend), or chfs_term_without_sync\n"
	        "if CHFS_IO_NOSYNC=1.\n");
}

static int fail(void)
{
	int e = errno;
	fprintf(stderr, "chfs-io: %s %s: %s (%s)\n", op, arg1 ? arg1 : "", strerrorname_np(e), strerror(e));
	return 1;
}

/* The end of the client, as the tool ends (leases and orphans go at once, not a lease later). */
static void end_client(void)
{
	/* CHFS_IO_NOSYNC=1: end as chfs_term_without_sync (write-back tests: nothing flushed yet) */
	const char *ns = getenv("CHFS_IO_NOSYNC");
	if (ns && !strcmp(ns, "1"))
		chfs_term_without_sync();
	else
		chfs_term();
}

/* A failed operation: its error, then the client's end (an open descriptor's lease left held
 * made an unlink by the next process keep the file's data until the lease expired). */
static int fail_end(void)
{
	int rc = fail();
	end_client();
	return rc;
}

static int filler(void *buf, const char *name, const struct stat *st, off_t off)
{
	(void)buf, (void)st, (void)off;
	if (strcmp(name, ".") && strcmp(name, ".."))
		printf("%s\n", name);
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Up to size bytes of fd, fewer only at its end: the writes of `put` do not depend on how a
 * pipe happens to deliver its input. */
static ssize_t read_full(int fd, char *buf, size_t size)
{
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return got ? (ssize_t)got : -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	op = argv[1];
	arg1 = argc > 2 ? argv[2] : NULL;
	if (chfs_init(NULL) < 0)
		return fail();
	int rc = 0;
	size_t bs = 1 << 20;
	char *buf = malloc(bs);
	if (!strcmp(op, "size")) {
		printf("%d\n", chfs_size());
	} else if (!strcmp(op, "sync")) {
		if (chfs_sync_backend() < 0)
			rc = fail();
	} else if (!strcmp(op, "create") && argc >= 3) {
		int flags = O_WRONLY | O_TRUNC | (argc > 4 && !strcmp(argv[4], "local") ? CHFS_O_LOCAL : 0);
		int fd = chfs_create_chunk_size(argv[2], flags, 0644, argc > 3 ? atoi(argv[3]) : 0);
		if (fd < 0 || chfs_close(fd) < 0)
			rc = fail();
	} else if (!strcmp(op, "put") && argc >= 4) {
		off_t off = atoll(argv[3]);
		int fd = argc > 4 ? chfs_create(argv[2], O_WRONLY | O_TRUNC, 0644)
		                  : chfs_open(argv[2], O_WRONLY);
		if (fd < 0)
			return fail_end();
		ssize_t n;
		while ((n = read_full(0, buf, bs)) > 0) {
			if (chfs_pwrite(fd, buf, (size_t)n, off) != n)
				return fail_end();
			off += n;
		}
		if (chfs_close(fd) < 0)
			rc = fail();
	} else if (!strcmp(op, "get") && argc >= 3) {
		int fd = chfs_open(argv[2], O_RDONLY);
		if (fd < 0)
			return fail_end();
		off_t off = argc > 3 ? atoll(argv[3]) : 0;
		long long left = argc > 4 ? atoll(argv[4]) : -1;
		for (;;) {
			size_t want = left >= 0 && (long long)bs > left ? (size_t)left : bs;
			if (want == 0)
				break;
			ssize_t n = chfs_pread(fd, buf, want, off);
			if (n < 0)
				return fail_end();
			if (n == 0)
				break;
			if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
				return 1;
			off += n;
			if (left >= 0)
				left -= n;
		}
		chfs_close(fd);
	} else if ((!strcmp(op, "stat") || !strcmp(op, "lstat")) && argc >= 3) {
		struct stat st;
		if ((op[0] == 's' ? chfs_stat(argv[2], &st) : chfs_lstat(argv[2], &st)) < 0)
			return fail_end();
		printf("%o %lld %lu %lld\n", st.st_mode, (long long)st.st_size, (unsigned long)st.st_nlink,
		       (long long)st.st_mtim.tv_sec);
	} else if (!strcmp(op, "truncate") && argc >= 4) {
		if (chfs_truncate(argv[2], atoll(argv[3])) < 0)
			rc = fail();
	} else if (!strcmp(op, "unlink") && argc >= 3) {
		if (chfs_unlink(argv[2]) < 0)
			rc = fail();
	} else if (!strcmp(op, "rename") && argc >= 4) {
		if (chfs_rename(argv[2], argv[3]) < 0)
			rc = fail();
	} else if (!strcmp(op, "link") && argc >= 4) {
		if (chfs_link(argv[2], argv[3]) < 0)
			rc = fail();
	} else if (!strcmp(op, "mkdir") && argc >= 3) {
		if (chfs_mkdir(argv[2], 0755) < 0)
			rc = fail();
	} else if (!strcmp(op, "rmdir") && argc >= 3) {
		if (chfs_rmdir(argv[2]) < 0)
			rc = fail();
	} else if (!strcmp(op, "symlink") && argc >= 4) {
		arg1 = argv[3];
		if (chfs_symlink(argv[2], argv[3]) < 0)
			rc = fail();
	} else if (!strcmp(op, "readlink") && argc >= 3) {
		int n = chfs_readlink(argv[2], buf, bs);
		if (n < 0)
			return fail_end();
		printf("%.*s\n", n, buf);
	} else if (!strcmp(op, "chmod") && argc >= 4) {
		if (chfs_chmod(argv[2], (mode_t)strtol(argv[3], NULL, 8)) < 0)
			rc = fail();
	} else if (!strcmp(op, "chown") && argc >= 5) {
		if (chfs_chown(argv[2], (uid_t)atol(argv[3]), (gid_t)atol(argv[4])) < 0)
			rc = fail();
	} else if (!strcmp(op, "utime") && argc >= 4) {
		struct timespec ts[2] = {{.tv_sec = atoll(argv[3])}, {.tv_sec = atoll(argv[3])}};
		if (chfs_utimens(argv[2], ts) < 0)
			rc = fail();
	} else if (!strcmp(op, "access") && argc >= 4) {
		if (chfs_access(argv[2], atoi(argv[3])) < 0)
			rc = fail();
	} else if (!strcmp(op, "ls") && argc >= 3) {
		if (chfs_readdir(argv[2], NULL, filler) < 0)
			rc = fail();
	} else if (!strcmp(op, "localpath") && argc >= 3) {
		int fd = chfs_open(argv[2], O_RDONLY);
		char p[4096];
		if (fd < 0 || chfs_local_backing_path(fd, p, sizeof p) < 0)
			return fail_end();
		printf("%s\n", p);
	} else if (!strcmp(op, "mkfiles") && argc >= 4) {
		long n = atol(argv[3]);
		char *p = malloc(strlen(argv[2]) + 32); /* names as deep as CHFS allows */
		for (long i = 0; p && i < n; i++) {
			sprintf(p, "%s/f%06ld", argv[2], i);
			int fd = chfs_create(p, O_WRONLY | O_TRUNC, 0644);
			if (fd < 0 || chfs_close(fd) < 0) {
				arg1 = p;
				return fail_end();
			}
		}
		if (!p) {
			errno = ENOMEM;
			return fail_end();
		}
		free(p);
	} else if (!strcmp(op, "smallwrites") && argc >= 5) {
		/* N sequential chfs_write calls of SIZE bytes; byte k of the file is k % 251 */
		long n = atol(argv[3]), sz = atol(argv[4]);
		int fd = chfs_create(argv[2], O_WRONLY | O_TRUNC, 0644);
		if (fd < 0 || sz <= 0 || (size_t)sz > bs)
			return fail_end();
		for (long i = 0; i < n; i++) {
			for (long k = 0; k < sz; k++)
				buf[k] = (char)((i * sz + k) % 251);
			if (chfs_write(fd, buf, (size_t)sz) != sz)
				return fail_end();
		}
		if (chfs_close(fd) < 0)
			return fail_end();
	} else if (!strcmp(op, "writehold") && argc >= 4) {
		/* a writer that keeps its descriptor open: others look at the file meanwhile */
		long sz = atol(argv[3]);
		struct stat st;
		char line[16];
		int fd = chfs_open(argv[2], O_WRONLY);
		if (fd < 0 || sz <= 0 || (size_t)sz > bs)
			return fail_end();
		for (long k = 0; k < sz; k++)
			buf[k] = (char)(k % 251);
		if (chfs_write(fd, buf, (size_t)sz) != sz || chfs_stat(argv[2], &st) < 0)
			return fail_end();
		printf("%lld\n", (long long)st.st_size);
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin) && ferror(stdin))
			return fail_end();
		if (chfs_close(fd) < 0)
			return fail_end();
	} else if (!strcmp(op, "forkcheck") && argc >= 3) {
		/* parent writes, a forked child (own transport after fork) reads it back and appends */
		int fd = chfs_create(argv[2], O_RDWR | O_TRUNC, 0644);
		if (fd < 0 || chfs_pwrite(fd, "parent", 6, 0) != 6 || chfs_fsync(fd) < 0)
			return fail_end();
		pid_t pid = fork();
		if (pid == 0) {
			char b[6];
			if (chfs_pread(fd, b, 6, 0) != 6 || memcmp(b, "parent", 6) != 0 ||
			    chfs_pwrite(fd, "child", 5, 6) != 5 || chfs_close(fd) < 0)
				_exit(1);
			_exit(0);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		char b[11];
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "chfs-io: forkcheck: child failed\n");
			return 1;
		}
		if (chfs_pread(fd, b, 11, 0) != 11 || memcmp(b, "parentchild", 11) != 0) {
			fprintf(stderr, "chfs-io: forkcheck: parent does not see the child's write\n");
			return 1;
		}
		chfs_close(fd);
	} else if (!strcmp(op, "stagein") && argc >= 3) {
		if (chfs_stagein(argv[2]) < 0)
			rc = fail();
	} else if (!strcmp(op, "writeloop") && argc >= 4) {
		int fd = chfs_create(argv[2], O_WRONLY | O_TRUNC, 0644);
		if (fd < 0)
			return fail_end();
		memset(buf, 'x', bs);
		double t0 = now(), limit = atof(argv[3]);
		long i = 0;
		while (now() - t0 < limit) {
			double t = now();
			if (chfs_pwrite(fd, buf, bs, (off_t)((i++ % 16) * (long)bs)) < 0) {
				int e = errno;
				fprintf(stderr, "chfs-io: writeloop: call took %.3f s\n", now() - t);
				errno = e;
				return fail_end();
			}
		}
		chfs_close(fd);
	} else {
		usage(stderr);
		return 2;
	}
	fflush(stdout);
	free(buf);
	end_client();
	return rc;
}
