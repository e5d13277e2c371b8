/* tracee.h — reading and writing another process's memory and naming its directories: what
 * both interception methods need to see the path a system call names. */
#ifndef CHFS_JOB_TRACEE_H
#define CHFS_JOB_TRACEE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Copy the NUL-terminated string at addr in pid into buf (len bytes): its length, -EFAULT if
 * unreadable, -ENAMETOOLONG if no NUL within len. Reads page by page so a string ending just
 * before an unmapped page is still read. */
ssize_t cj_tracee_read_str(pid_t pid, uint64_t addr, char *buf, size_t len);
int cj_tracee_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int cj_tracee_write(pid_t pid, uint64_t addr, const void *buf, size_t len);
/* The absolute path of pid's working directory (dirfd < 0) or of its descriptor dirfd. */
int cj_tracee_dir(pid_t pid, int dirfd, char *out, size_t outlen);
/* Is fd of pid a regular file (CJ_DISK), a socket (CJ_NET), or neither (-1)? */
int cj_tracee_fd_class(pid_t pid, int fd);
/* The size a read/write-family call asks to move: args[2], or (iov 1) the sum of its iovec
 * args[1..2], or (iov 2) of the msghdr's at args[1] (sysc.h's iov); 0 if unreadable. */
uint64_t cj_tracee_io_size(pid_t pid, int iov, const uint64_t *args);
/* pid's umask (from /proc/PID/status; 022 if unreadable). */
mode_t cj_tracee_umask(pid_t pid);
/* A duplicate of pid's descriptor tfd in our table (pidfd_getfd: same open file description,
 * same offset), or -errno. pid may be a thread. */
int cj_tracee_getfd(pid_t pid, int tfd);

#endif
