/*
 * secret.c — see secret.h. A secret file that group or others could read is refused: a leaked
 * secret would let any local user into the pool.
 */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int secret_load(const char *path, uint8_t out[CHFS_SECRET_LEN])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	int rc = secret_load_fd(fd, out);
	close(fd);
	return rc;
}

int secret_load_fd(int fd, uint8_t out[CHFS_SECRET_LEN])
{
	struct stat st;
	char buf[2 * CHFS_SECRET_LEN + 2];
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077))
		return -EACCES;
	ssize_t n = pread(fd, buf, sizeof buf, 0);
	if (n < 2 * CHFS_SECRET_LEN)
		return -EINVAL;
	for (int i = 0; i < CHFS_SECRET_LEN; i++) {
		int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int secret_create(const char *path)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
	}
	uint8_t raw[CHFS_SECRET_LEN];
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return -EIO;
	char hex[2 * CHFS_SECRET_LEN + 1];
	for (int i = 0; i < CHFS_SECRET_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	fchmod(fd, 0600);
	int ok = write(fd, hex, 64) == 64 && write(fd, "\n", 1) == 1;
	close(fd);
	return ok ? 0 : -EIO;
}

int secret_equal(const uint8_t *a, const uint8_t *b)
{
	volatile uint8_t d = 0;
	for (int i = 0; i < CHFS_SECRET_LEN; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}
