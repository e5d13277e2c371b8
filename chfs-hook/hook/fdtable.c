/*
 * fdtable.c — CHFS files behind real kernel descriptors.
 *
 * Every CHFS descriptor the application sees is a kernel descriptor we hold open, so its
 * number can never collide with one the kernel hands out, and dup/dup2/fork/close-on-exec work
 * on it as on any descriptor. The kernel descriptor is either
 *   - a placeholder: a memfd named "chfs-hook" whose *file offset* is the CHFS file offset
 *     (so dup'ed descriptors, and a parent and child after fork or exec, share it exactly as
 *     they share a kernel file's offset) and whose first bytes record the open flags and the
 *     path (so an exec'ed program can re-open the files it inherited); or
 *   - the fast path: the server's backing file itself, opened by us, when all of the file's
 *     data lies on this node's server — reads and writes then go to the kernel unchanged.
 * hook_fdtab maps kernel descriptor -> hook_file (shared by dups, reference counted).
 */
#define _GNU_SOURCE
#include "hook.h"

#include <chfs.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PLACEHOLDER_NAME "chfs-hook"
#define PLACEHOLDER_MAGIC "CHFSHOOK1"

struct hook_file **hook_fdtab;
int hook_fdtab_size;
int hook_fd_max = -1;
atomic_int hook_nfiles;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

int hook_fdtable_init(void)
{
	struct rlimit rl;
	rlim_t n = 1 << 20;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n)
		n = rl.rlim_max;
	/* Reserved address space; pages are touched only where descriptors are used. */
	void *p = mmap(NULL, n * sizeof(struct hook_file *), PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("chfs-hook: descriptor table");
		return -1;
	}
	hook_fdtab = p;
	hook_fdtab_size = (int)n;
	return 0;
}

struct hook_file *hook_file_new(int cfd, int flags, int is_dir, const char *vpath, const char *cpath)
{
	struct hook_file *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->cfd = cfd;
	h->flags = flags;
	h->is_dir = is_dir;
	h->vpath = strdup(vpath);
	h->cpath = strdup(cpath);
	pthread_mutex_init(&h->lock, NULL);
	if (!h->vpath || !h->cpath) {
		free(h->vpath);
		free(h->cpath);
		free(h);
		return NULL;
	}
	return h;
}

/* Names a file had before a rename was followed: other threads may still be reading them. */
struct hook_names {
	struct hook_names *next;
	char *vpath, *cpath;
};

int hook_file_rename(struct hook_file *h, const char *vpath, const char *cpath)
{
	struct hook_names *n = malloc(sizeof *n);
	char *v = strdup(vpath), *c = strdup(cpath);
	if (!n || !v || !c) {
		free(n);
		free(v);
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_lock(&h->lock);
	n->vpath = h->vpath;
	n->cpath = h->cpath;
	n->next = h->old_names;
	h->old_names = n;
	__atomic_store_n(&h->vpath, v, __ATOMIC_RELEASE);
	__atomic_store_n(&h->cpath, c, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

void hook_file_unref(struct hook_file *h)
{
	if (atomic_fetch_sub(&h->refs, 1) != 1)
		return;
	chfs_close(h->cfd);
	hook_dirlist_free(h->dir);
	free(h->vpath);
	free(h->cpath);
	for (struct hook_names *n = h->old_names, *next; n; n = next) {
		next = n->next;
		free(n->vpath);
		free(n->cpath);
		free(n);
	}
	free(h);
}

void hook_fd_install(int fd, struct hook_file *h)
{
	atomic_fetch_add(&h->refs, 1);
	pthread_mutex_lock(&table_lock);
	struct hook_file *old = hook_fdtab[fd];
	hook_fdtab[fd] = h;
	if (fd > hook_fd_max)
		hook_fd_max = fd;
	if (!old)
		atomic_fetch_add(&hook_nfiles, 1);
	pthread_mutex_unlock(&table_lock);
	if (old)
		hook_file_unref(old);
}

void hook_fd_forget(int fd)
{
	if (fd < 0 || fd >= hook_fdtab_size)
		return;
	pthread_mutex_lock(&table_lock);
	struct hook_file *old = hook_fdtab[fd];
	hook_fdtab[fd] = NULL;
	if (old)
		atomic_fetch_sub(&hook_nfiles, 1);
	pthread_mutex_unlock(&table_lock);
	if (old)
		hook_file_unref(old);
}

int hook_placeholder_open(int flags, const char *vpath, int cloexec)
{
	int fd = (int)RAW2(SYS_memfd_create, PLACEHOLDER_NAME, cloexec ? MFD_CLOEXEC : 0);
	if (fd < 0)
		return fd;
	/* the header, then the path with its NUL: the path may be longer than PATH_MAX */
	char hdr[64];
	int n = snprintf(hdr, sizeof hdr, "%s\n%d\n", PLACEHOLDER_MAGIC, flags);
	struct iovec iov[2] = {{hdr, (size_t)n}, {(void *)vpath, strlen(vpath) + 1}};
	long want = (long)(iov[0].iov_len + iov[1].iov_len);
	long w = RAW4(SYS_pwritev, fd, iov, 2, 0);
	if (w != want) {
		RAW1(SYS_close, fd);
		return w < 0 ? (int)w : -EIO;
	}
	if (flags & O_APPEND) /* mirrored so an exec'ed program sees F_GETFL's O_APPEND */
		RAW3(SYS_fcntl, fd, F_SETFL, O_APPEND);
	return fd;
}

/* After execve the table is empty but placeholders without close-on-exec survived: find them
 * by name, read back flags and path, and re-open the CHFS files (their offsets live on in the
 * kernel). */
static void adopt(int fd, char *hdr, size_t size, char *cpath)
{
	long n = RAW4(SYS_pread64, fd, hdr, size - 1, 0);
	if (n <= 0)
		return;
	hdr[n] = 0;
	int flags;
	char *nl1 = strchr(hdr, '\n'), *nl2 = nl1 ? strchr(nl1 + 1, '\n') : NULL;
	if (strncmp(hdr, PLACEHOLDER_MAGIC "\n", sizeof PLACEHOLDER_MAGIC) != 0 || !nl2 ||
	    sscanf(nl1 + 1, "%d", &flags) != 1)
		return;
	const char *vpath = nl2 + 1;
	if (hook_vpath_to_chfs(vpath, cpath, HOOK_CHFS_PATH_MAX) != 1 || hook_chfs_ready() < 0)
		return;
	long fl = RAW2(SYS_fcntl, fd, F_GETFL);
	if (fl >= 0)
		flags = (flags & ~O_APPEND) | ((int)fl & O_APPEND);
	int cfd = chfs_open(cpath, flags & (O_ACCMODE | O_APPEND));
	if (cfd < 0) {
		fprintf(stderr, "chfs-hook: inherited descriptor %d: cannot re-open %s: %s\n", fd, vpath,
		        strerror(errno));
		return;
	}
	int mode = chfs_mode_of(cfd);
	int is_dir = mode >= 0 && S_ISDIR((mode_t)mode);
	struct hook_file *h =
	        hook_file_new(cfd, flags & (O_ACCMODE | O_APPEND | O_NONBLOCK), is_dir, vpath, cpath);
	if (!h) {
		chfs_close(cfd);
		return;
	}
	hook_fd_install(fd, h);
}

void hook_fdtable_adopt_inherited(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	int self = dirfd(d);
	struct dirent *e;
	int fds[256], n = 0;
	while ((e = readdir(d)) && n < 256) {
		char link[64], target[64];
		int fd = atoi(e->d_name);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == self)
			continue;
		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		ssize_t len = readlink(link, target, sizeof target - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		if (strncmp(target, "/memfd:" PLACEHOLDER_NAME " ", 8 + sizeof PLACEHOLDER_NAME - 1) == 0)
			fds[n++] = fd;
	}
	closedir(d);
	/* a header holds a virtual path (up to HOOK_VPATH_MAX bytes) */
	size_t size = HOOK_VPATH_MAX + 64;
	char *hdr = n ? malloc(size) : NULL, *cpath = n ? malloc(HOOK_CHFS_PATH_MAX) : NULL;
	for (int i = 0; i < n && hdr && cpath; i++)
		adopt(fds[i], hdr, size, cpath);
	free(hdr);
	free(cpath);
}

void hook_fdtable_after_fork(void) { pthread_mutex_init(&table_lock, NULL); }

void hook_fdtable_close_all(void)
{
	for (int fd = 0; fd <= hook_fd_max && atomic_load(&hook_nfiles) > 0; fd++)
		if (hook_fdtab[fd])
			hook_fd_forget(fd);
}
