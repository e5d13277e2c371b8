/* posix_rw — write a file through plain POSIX calls, read it back, print both checksums.
 *
 * Usage: posix_rw INPUT TARGET
 * Copies INPUT to TARGET with write(2) in odd-sized pieces (so writes straddle CHFS chunk
 * boundaries), closes, reopens TARGET, reads it back with read(2), and prints
 * "written <fnv64> read <fnv64> bytes <n>". Used by the hook and fuse environment tests: the
 * program knows nothing of CHFS; the access path (syscall hook or FUSE mount) makes TARGET a
 * CHFS file. Exit 1 with one line on any error.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "posix_rw: %s %s: %m\n", what, path);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: posix_rw INPUT TARGET\n");
		return 2;
	}
	static unsigned char buf[100003]; /* prime-sized pieces cross every chunk boundary */
	uint64_t hw = 14695981039346656037ull, hr = hw;
	size_t total = 0, back = 0;
	int in = open(argv[1], O_RDONLY);
	if (in < 0)
		return fail("open", argv[1]);
	int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0)
		return fail("create", argv[2]);
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0) {
		hw = fnv(hw, buf, (size_t)n);
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w <= 0)
				return fail("write", argv[2]);
			off += w;
		}
		total += (size_t)n;
	}
	if (n < 0)
		return fail("read", argv[1]);
	if (close(out) != 0 || close(in) != 0)
		return fail("close", argv[2]);
	int again = open(argv[2], O_RDONLY);
	if (again < 0)
		return fail("reopen", argv[2]);
	while ((n = read(again, buf, sizeof buf)) > 0) {
		hr = fnv(hr, buf, (size_t)n);
		back += (size_t)n;
	}
	if (n < 0)
		return fail("read back", argv[2]);
	close(again);
	printf("written %016llx read %016llx bytes %zu %zu\n", (unsigned long long)hw, (unsigned long long)hr,
	       total, back);
	return 0;
}
