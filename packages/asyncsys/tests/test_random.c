/*
 * test_random.c — 10,000 random requests, mixing ring opcodes (pread64, preadv, pwrite64,
 * read, write, openat, statx, fsync, close) and execution-thread calls (fstat, lseek, uname,
 * getcwd, faccessat, getppid, ...) with failing ones (bad descriptor, negative offset, missing
 * path), placed in batches of 1..256 and collected with as_wakeup + as_reap, give the same
 * results as the same calls made synchronously: equal ret, equal bytes read, equal file
 * written. Then one batch of 10,000 preads, more than the ring's 4,096 entries.
 * Seed: ASYNCSYS_SEED (default fixed), printed on failure.
 * usage: test_random uring|threads
 */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#define TOTAL 10000
#define MAXB 256
#define RLEN 8192
#define DATA_SIZE (256 * 1024 + 123)
#define WREC 64

enum kind {
	K_PREAD,
	K_PREADV,
	K_PWRITE,
	K_READ_ZERO,
	K_WRITE_NULL,
	K_OPENAT,
	K_STATX,
	K_FSYNC,
	K_FSTAT,
	K_LSEEK,
	K_UNAME,
	K_GETCWD,
	K_ACCESS,
	K_GETPPID,
	K_BADFD,
	K_NEGOFF,
	K_NKINDS
};

struct req {
	enum kind kind;
	struct syscall_info si;
	char buf[RLEN];
	struct iovec iov[2];
	long ret;
	int done;
};

static int fd_data, fd_w, fd_mirror, fd_zero, fd_null, fd_seek;
static char data_path[64], w_path[64], m_path[64];
static unsigned long long rng;

static unsigned rnd(unsigned n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(rng >> 33) % n;
}

static void make(struct req *q, long index)
{
	int64_t *a = q->si.arg;
	memset(&q->si, 0, sizeof(q->si));
	q->kind = (enum kind)rnd(K_NKINDS);
	q->done = 0;
	switch (q->kind) {
	case K_PREAD:
		q->si.num = SYS_pread64;
		a[0] = fd_data, a[1] = (long)q->buf, a[2] = rnd(RLEN + 1), a[3] = rnd(DATA_SIZE + 4096);
		break;
	case K_PREADV:
		q->iov[0] = (struct iovec){q->buf, rnd(RLEN / 2)};
		q->iov[1] = (struct iovec){q->buf + RLEN / 2, rnd(RLEN / 2)};
		q->si.num = SYS_preadv;
		a[0] = fd_data, a[1] = (long)q->iov, a[2] = 2, a[3] = rnd(DATA_SIZE);
		break;
	case K_PWRITE:
		for (int i = 0; i < WREC; i++)
			q->buf[i] = (char)rnd(256);
		q->si.num = SYS_pwrite64;
		a[0] = fd_w, a[1] = (long)q->buf, a[2] = WREC, a[3] = index * WREC;
		break;
	case K_READ_ZERO:
		memset(q->buf, 0x5a, 512);
		q->si.num = SYS_read;
		a[0] = fd_zero, a[1] = (long)q->buf, a[2] = rnd(512);
		break;
	case K_WRITE_NULL:
		q->si.num = SYS_write;
		a[0] = fd_null, a[1] = (long)q->buf, a[2] = rnd(RLEN);
		break;
	case K_OPENAT:
		q->si.num = SYS_openat;
		a[0] = AT_FDCWD, a[1] = (long)(rnd(2) ? data_path : "/tmp/asyncsys-random-missing"),
		a[2] = O_RDONLY | O_CLOEXEC;
		break;
	case K_STATX:
		q->si.num = SYS_statx;
		a[0] = AT_FDCWD, a[1] = (long)(rnd(2) ? data_path : "/tmp/asyncsys-random-missing"), a[2] = 0,
		a[3] = STATX_SIZE, a[4] = (long)q->buf;
		break;
	case K_FSYNC:
		q->si.num = SYS_fdatasync;
		a[0] = fd_w;
		break;
	case K_FSTAT:
		q->si.num = SYS_fstat;
		a[0] = fd_data, a[1] = (long)q->buf;
		break;
	case K_LSEEK:
		q->si.num = SYS_lseek;
		a[0] = fd_seek, a[1] = rnd(1 << 20), a[2] = SEEK_SET;
		break;
	case K_UNAME:
		q->si.num = SYS_uname;
		a[0] = (long)q->buf;
		break;
	case K_GETCWD:
		q->si.num = SYS_getcwd;
		a[0] = (long)q->buf, a[1] = rnd(2) ? RLEN : 1; /* 1: -ERANGE */
		break;
	case K_ACCESS:
		q->si.num = SYS_faccessat;
		a[0] = AT_FDCWD, a[1] = (long)(rnd(2) ? data_path : "/tmp/asyncsys-random-missing"),
		a[2] = R_OK;
		break;
	case K_GETPPID: q->si.num = SYS_getppid; break;
	case K_BADFD:
		q->si.num = rnd(2) ? SYS_pread64 : SYS_fstat;
		a[0] = 100000 + rnd(1000), a[1] = (long)q->buf, a[2] = 16, a[3] = 0;
		break;
	case K_NEGOFF:
		q->si.num = SYS_pread64;
		a[0] = fd_data, a[1] = (long)q->buf, a[2] = 16, a[3] = -1 - (long)rnd(100);
		break;
	default: break;
	}
}

static long sys(long num, const int64_t *a)
{
	long r = syscall(num, a[0], a[1], a[2], a[3], a[4], a[5]);
	return r == -1 ? -errno : r;
}

/* The same call, synchronously, into its own buffers; compares with what the area returned. */
static void verify(struct req *q, long index)
{
	static char buf2[RLEN];
	int64_t a[6];
	memcpy(a, q->si.arg, sizeof(a));
	struct iovec iov2[2];
	long r2;
	switch (q->kind) {
	case K_PREAD:
	case K_READ_ZERO:
	case K_FSTAT:
	case K_UNAME:
	case K_GETCWD:
	case K_BADFD:
	case K_NEGOFF:
		a[q->kind == K_UNAME || q->kind == K_GETCWD ? 0 : 1] = (long)buf2; /* the buffer argument */
		r2 = sys(q->si.num, a);
		CHECK_EQ(q->ret, r2);
		if (q->kind == K_FSTAT && r2 == 0)
			CHECK_EQ(((struct stat *)q->buf)->st_size, ((struct stat *)buf2)->st_size);
		else if (q->kind == K_UNAME && r2 == 0)
			CHECK(strcmp(((struct utsname *)q->buf)->release,
			             ((struct utsname *)buf2)->release) == 0);
		else if (q->kind != K_FSTAT && q->kind != K_UNAME && r2 > 0)
			CHECK(memcmp(q->buf, buf2, r2) == 0);
		break;
	case K_PREADV:
		iov2[0] = (struct iovec){buf2, q->iov[0].iov_len};
		iov2[1] = (struct iovec){buf2 + RLEN / 2, q->iov[1].iov_len};
		a[1] = (long)iov2;
		r2 = sys(q->si.num, a);
		CHECK_EQ(q->ret, r2);
		if (r2 > 0) { /* bytes fill iov[0], then iov[1] */
			size_t n0 = (size_t)r2 < iov2[0].iov_len ? (size_t)r2 : iov2[0].iov_len;
			CHECK(memcmp(q->buf, buf2, n0) == 0);
			CHECK(memcmp(q->buf + RLEN / 2, buf2 + RLEN / 2, (size_t)r2 - n0) == 0);
		}
		break;
	case K_PWRITE:
		a[0] = fd_mirror;
		CHECK_EQ(q->ret, sys(q->si.num, a));
		break;
	case K_OPENAT:
		r2 = sys(q->si.num, a);
		CHECK_EQ(q->ret >= 0, r2 >= 0);
		if (q->ret < 0 || r2 < 0)
			CHECK_EQ(q->ret, r2);
		if (q->ret >= 0)
			close((int)q->ret);
		if (r2 >= 0)
			close((int)r2);
		break;
	case K_STATX:
		a[4] = (long)buf2;
		r2 = sys(q->si.num, a);
		CHECK_EQ(q->ret, r2);
		if (r2 == 0)
			CHECK_EQ(((struct statx *)q->buf)->stx_size, ((struct statx *)buf2)->stx_size);
		break;
	default: CHECK_EQ(q->ret, sys(q->si.num, a)); break;
	}
	(void)index;
}

static void setup_files(void)
{
	strcpy(data_path, "/tmp/asyncsys-data-XXXXXX");
	strcpy(w_path, "/tmp/asyncsys-w-XXXXXX");
	strcpy(m_path, "/tmp/asyncsys-m-XXXXXX");
	fd_data = mkstemp(data_path);
	fd_w = mkstemp(w_path);
	fd_mirror = mkstemp(m_path);
	static char block[DATA_SIZE];
	for (int i = 0; i < DATA_SIZE; i++)
		block[i] = (char)(i * 7 + i / 251);
	CHECK_EQ(write(fd_data, block, DATA_SIZE), DATA_SIZE);
	fd_zero = open("/dev/zero", O_RDONLY);
	fd_null = open("/dev/null", O_WRONLY);
	fd_seek = open(data_path, O_RDONLY);
	unlink(w_path);
	unlink(m_path);
	CHECK(fd_data >= 0 && fd_w >= 0 && fd_mirror >= 0 && fd_zero >= 0 && fd_null >= 0 && fd_seek >= 0);
}

static int same_files(int a, int b)
{
	struct stat sa, sb;
	fstat(a, &sa);
	fstat(b, &sb);
	if (sa.st_size != sb.st_size)
		return 0;
	static char x[65536], y[65536];
	for (off_t off = 0; off < sa.st_size; off += sizeof(x)) {
		ssize_t n = pread(a, x, sizeof(x), off);
		if (n <= 0 || pread(b, y, sizeof(y), off) != n || memcmp(x, y, n) != 0)
			return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	unsigned flags = backend_flags(argc, argv);
	const char *seed = getenv("ASYNCSYS_SEED");
	rng = seed ? strtoull(seed, NULL, 0) : 20261124;
	unsigned long long seed0 = rng;
	setup_files();
	struct as_params p = {.nthreads = 2, .nreq = MAXB, .flags = flags};
	struct as *as;
	CHECK_EQ(as_init_params(&as, &p), 0);
	check_backend(as, flags);
	unsigned nslots;
	as_area(as, &nslots);
	static struct req reqs[MAXB];
	static struct syscall_info si[MAXB];
	unsigned slots[MAXB];
	int *slot_req = calloc(nslots, sizeof(int));
	struct as_completion c[MAXB];
	long done_total = 0, per_kind[K_NKINDS] = {0};
	while (done_total < TOTAL) {
		unsigned b = 1 + rnd(MAXB);
		if (b > TOTAL - done_total)
			b = TOTAL - done_total;
		for (unsigned i = 0; i < b; i++) {
			make(&reqs[i], done_total + i);
			si[i] = reqs[i].si;
			per_kind[reqs[i].kind]++;
		}
		CHECK_EQ(as_submitv(as, si, b, slots), (int)b);
		for (unsigned i = 0; i < b; i++)
			slot_req[slots[i]] = (int)i;
		unsigned got = 0;
		while (got < b) {
			/* alternately the published wakeup (one completion) and a wait for the batch */
			CHECK((done_total / MAXB) % 2 ? as_wakeup(as) > 0
			                              : as_wakeup_wait(as, b - got) >= (int)(b - got));
			int n = as_reap(as, c, MAXB);
			for (int k = 0; k < n; k++) {
				struct req *q = &reqs[slot_req[c[k].slot]];
				CHECK(!q->done); /* no duplicate completion */
				CHECK_EQ(c[k].num, q->si.num);
				q->done = 1;
				q->ret = c[k].ret;
			}
			got += n > 0 ? n : 0;
		}
		for (unsigned i = 0; i < b; i++)
			verify(&reqs[i], done_total + i);
		done_total += b;
		if (check_failures) {
			fprintf(stderr, "seed %llu, batch ending at request %ld\n", seed0, done_total);
			break;
		}
	}
	CHECK_EQ(done_total, TOTAL);
	CHECK(same_files(fd_w, fd_mirror));
	for (int k = 0; k < K_NKINDS; k++)
		CHECK(per_kind[k] > 0);
	CHECK_EQ(as_exit(as, NULL, NULL), 0);

	/* One batch larger than the ring (4096 SQ entries): the flush submits as the SQ fills. */
	enum { BIG = 10000 };
	p.nreq = BIG;
	CHECK_EQ(as_init_params(&as, &p), 0);
	struct syscall_info *big = calloc(BIG, sizeof(*big));
	unsigned *bslots = calloc(BIG, sizeof(*bslots));
	char *bytes = calloc(BIG, 1);
	struct as_completion *bc = calloc(BIG, sizeof(*bc));
	for (long i = 0; i < BIG; i++)
		big[i] = (struct syscall_info){.num = SYS_pread64, .arg = {fd_data, (long)&bytes[i], 1, i}};
	CHECK_EQ(as_submitv(as, big, BIG, bslots), BIG);
	unsigned got = 0;
	while (got < BIG) {
		as_wakeup_wait(as, BIG - got);
		int n = as_reap(as, bc, BIG);
		for (int k = 0; k < n; k++)
			CHECK_EQ(bc[k].ret, 1);
		got += n > 0 ? n : 0;
	}
	static char expect_bytes[BIG];
	CHECK_EQ(pread(fd_data, expect_bytes, BIG, 0), BIG);
	CHECK(memcmp(bytes, expect_bytes, BIG) == 0);
	CHECK_EQ(as_exit(as, NULL, NULL), 0);
	free(big);
	free(bslots);
	free(bytes);
	free(bc);
	unlink(data_path);
	free(slot_req);
	return check_result(argc > 1 ? argv[1] : "uring");
}
