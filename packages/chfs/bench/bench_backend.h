/*
 * bench_backend.h — the file operations the core benchmark runs, behind one small table so the
 * same workload drives CHFS (chfs.h) and plain POSIX I/O into a directory (the machine's limit).
 * Every function returns what its POSIX namesake returns (-1 and errno on failure); paths are
 * relative to the backend's root.
 */
#ifndef CHFS_BENCH_BACKEND_H
#define CHFS_BENCH_BACKEND_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

struct bench_backend {
	const char *name;
	int (*init)(const char *root);
	void (*fini)(void);
	int (*create)(const char *path); /* create/truncate, open for writing */
	int (*open_rd)(const char *path);
	int (*open_wr)(const char *path);
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	int (*close)(int fd);
	int (*stat)(const char *path, struct stat *st);
	int (*unlink)(const char *path);
	int (*mkdir)(const char *path);
	int (*rmdir)(const char *path);
};

extern const struct bench_backend bench_chfs, bench_posix;

#endif
