/* notif_wait.h — the seccomp supervisor's blocking wait for user notifications (notif_wait.c). */
#ifndef CHFS_JOB_NOTIF_WAIT_H
#define CHFS_JOB_NOTIF_WAIT_H

#include <linux/seccomp.h>

struct cj_notif_wait;

/* Set the listener's synchronous wake-up and start watching for the end of the job; NULL if the
 * kernel lacks it (before Linux 6.6) or a thread cannot start: then poll() the listener. */
struct cj_notif_wait *cj_notif_wait_start(int listener);
/* The next notification into req: 1, or 0 once no process holds the filter, or -errno. */
int cj_notif_wait_next(struct cj_notif_wait *w, struct seccomp_notif *req);
void cj_notif_wait_stop(struct cj_notif_wait *w);

#endif
