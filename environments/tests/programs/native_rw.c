/* native_rw — write a CHFS file through the chfs.h API, read it back, print both checksums.
 *
 * Usage: native_rw INPUT CHFS_PATH        (pool from CHFS_SERVER, as for any CHFS client)
 * Same output as posix_rw ("written <fnv64> read <fnv64> bytes <n> <n>"), but TARGET is a path
 * inside CHFS reached with chfs_create/chfs_write/chfs_pread: the native access path, built with
 * `cc native_rw.c $(pkg-config --cflags --libs chfs)`.
 */
#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: native_rw INPUT CHFS_PATH\n");
		return 2;
	}
	static unsigned char buf[100003];
	uint64_t hw = 14695981039346656037ull, hr = hw;
	size_t total = 0, back = 0;
	if (chfs_init(NULL) != 0) {
		fprintf(stderr, "native_rw: chfs_init: %s\n", strerror(errno));
		return 1;
	}
	int in = open(argv[1], O_RDONLY);
	int fd = chfs_create(argv[2], O_WRONLY | O_TRUNC, 0644);
	if (in < 0 || fd < 0) {
		fprintf(stderr, "native_rw: open/create: %s\n", strerror(errno));
		return 1;
	}
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0) {
		hw = fnv(hw, buf, (size_t)n);
		if (chfs_write(fd, buf, (size_t)n) != n) {
			fprintf(stderr, "native_rw: chfs_write: %s\n", strerror(errno));
			return 1;
		}
		total += (size_t)n;
	}
	close(in);
	if (chfs_close(fd) != 0 || (fd = chfs_open(argv[2], O_RDONLY)) < 0) {
		fprintf(stderr, "native_rw: close/reopen %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	while ((n = chfs_pread(fd, buf, sizeof buf, (off_t)back)) > 0) {
		hr = fnv(hr, buf, (size_t)n);
		back += (size_t)n;
	}
	if (n < 0) {
		fprintf(stderr, "native_rw: chfs_pread: %s\n", strerror(errno));
		return 1;
	}
	chfs_close(fd);
	chfs_term();
	printf("written %016llx read %016llx bytes %zu %zu\n", (unsigned long long)hw, (unsigned long long)hr,
	       total, back);
	return 0;
}
