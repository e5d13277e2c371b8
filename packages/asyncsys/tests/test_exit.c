/*
 * test_exit.c — as_exit with requests in flight neither loses nor duplicates a completion.
 * Each round places K requests that each append one 16-byte record naming themselves to an
 * O_APPEND file — half by pwrite64 (the ring), half by pwritev2 (no opcode mapping: execution
 * threads) — among 10 ms nanosleeps that keep the threads busy, and one read of a pipe that a
 * helper fills 50 ms later (a ring request still blocked when as_exit starts). The test collects
 * a random part with as_wakeup/as_reap, then calls as_exit with a callback. Every request must
 * be reported exactly once (reaped or by the callback) with its correct result, and the file
 * must hold every record exactly once (each system call ran exactly once).
 * usage: test_exit uring|threads
 */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define K 3000
#define ROUNDS 4

struct rec {
	char tag[8];
	uint64_t id;
};

static struct rec recs[K];
static struct iovec iovs[K];
static int reported[K + 64];
static int slot_req[1 << 16];
static long expect[K + 64];

static void on_exit_completion(const struct as_completion *c, void *arg)
{
	int i = slot_req[c->slot];
	reported[i]++;
	if (c->ret != expect[i]) {
		fprintf(stderr, "request %d: ret %lld, expected %ld\n", i, (long long)c->ret, expect[i]);
		(*(int *)arg)++;
	}
}

static void *fill_pipe(void *arg)
{
	struct timespec ts = {0, 50 * 1000000L};
	nanosleep(&ts, NULL);
	if (write(*(int *)arg, "abc", 3) != 3)
		perror("write");
	return NULL;
}

static void one_round(unsigned flags, unsigned seed)
{
	char path[] = "/tmp/asyncsys-exit-XXXXXX";
	int tmp = mkstemp(path);
	int fd = open(path, O_WRONLY | O_APPEND);
	close(tmp);
	CHECK(fd >= 0);
	int pfd[2];
	CHECK_EQ(pipe(pfd), 0);
	char pbuf[8];
	static struct timespec ten_ms = {0, 10 * 1000000L};

	struct as_params p = {.nthreads = 2, .nreq = K + 64, .flags = flags};
	struct as *as;
	CHECK_EQ(as_init_params(&as, &p), 0);
	check_backend(as, flags);
	static struct syscall_info si[K + 64];
	unsigned n = 0;
	for (unsigned i = 0; i < K; i++) {
		recs[i] = (struct rec){"record", i};
		memset(&si[n], 0, sizeof(si[n]));
		if (i % 2 == 0) {
			si[n].num = SYS_pwrite64;
			si[n].arg[0] = fd, si[n].arg[1] = (long)&recs[i], si[n].arg[2] = sizeof(recs[i]);
		} else {
			iovs[i] = (struct iovec){&recs[i], sizeof(recs[i])};
			si[n].num = SYS_pwritev2;
			si[n].arg[0] = fd, si[n].arg[1] = (long)&iovs[i], si[n].arg[2] = 1, si[n].arg[3] = -1;
		}
		expect[n++] = sizeof(struct rec);
		if (i % 100 == 0) {
			si[n] = (struct syscall_info){.num = SYS_nanosleep, .arg = {(long)&ten_ms, 0}};
			expect[n++] = 0;
		}
	}
	unsigned pipe_req = n;
	si[n] = (struct syscall_info){.num = SYS_read, .arg = {pfd[0], (long)pbuf, sizeof(pbuf)}};
	expect[n++] = 3;
	static unsigned slots[K + 64];
	CHECK_EQ(as_submitv(as, si, n, slots), (int)n);
	for (unsigned i = 0; i < n; i++)
		slot_req[slots[i]] = (int)i;
	memset(reported, 0, sizeof(reported));
	pthread_t t;
	pthread_create(&t, NULL, fill_pipe, &pfd[1]);

	/* collect a random part (possibly nothing), then exit with the rest in flight */
	srand(seed);
	unsigned want = (unsigned)rand() % (n / 2), got = 0;
	struct as_completion c[256];
	while (got < want) {
		as_wakeup(as);
		int r = as_reap(as, c, 256);
		for (int k = 0; k < r; k++) {
			int i = slot_req[c[k].slot];
			reported[i]++;
			CHECK_EQ(c[k].ret, expect[i]);
		}
		got += r > 0 ? r : 0;
	}
	int bad = 0;
	CHECK_EQ(as_exit(as, on_exit_completion, &bad), 0);
	CHECK_EQ(bad, 0);
	pthread_join(t, NULL);
	unsigned lost = 0, dup = 0;
	for (unsigned i = 0; i < n; i++) {
		lost += reported[i] == 0;
		dup += reported[i] > 1;
	}
	CHECK_EQ(lost, 0);
	CHECK_EQ(dup, 0);
	CHECK_EQ(reported[pipe_req], 1);

	/* every record exactly once in the file */
	struct stat st;
	fstat(fd, &st);
	CHECK_EQ(st.st_size, (long)(K * sizeof(struct rec)));
	static struct rec back[K];
	static int seen[K];
	memset(seen, 0, sizeof(seen));
	int rfd = open(path, O_RDONLY);
	CHECK_EQ(read(rfd, back, sizeof(back)), (long)sizeof(back));
	for (unsigned i = 0; i < K; i++) {
		CHECK(back[i].id < K && memcmp(back[i].tag, "record", 7) == 0);
		if (back[i].id < K)
			seen[back[i].id]++;
	}
	for (unsigned i = 0; i < K; i++)
		CHECK_EQ(seen[i], 1);
	printf("round: %u reaped before as_exit, %u at as_exit\n", got, n - got);
	close(rfd);
	close(fd);
	close(pfd[0]);
	close(pfd[1]);
	unlink(path);
}

int main(int argc, char **argv)
{
	unsigned flags = backend_flags(argc, argv);
	for (unsigned r = 0; r < ROUNDS && !check_failures; r++)
		one_round(flags, 7 + r);
	return check_result(argc > 1 ? argv[1] : "uring");
}
