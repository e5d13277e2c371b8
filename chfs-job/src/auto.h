/* auto.h — the `auto` method: inspect the program, drop the methods that cannot run the policy
 * or the program here, and pick the cheapest of the rest for the job's kind from the guideline
 * table `chfs-job bench` measured. */
#ifndef CHFS_JOB_AUTO_H
#define CHFS_JOB_AUTO_H

#include "inspect.h"
#include "policy.h"

#include <stddef.h>

/* Why method m cannot run program prog under p, or NULL (policy checks included). */
const char *cj_method_unusable_for(enum cj_method m, const struct cj_policy *p, const struct cj_prog *prog,
                                   char *why, size_t len);
/* Pick for argv under p with the guideline CSV (NULL: the installed default). Returns the
 * method, or -errno with reason filled; reason always says why (one line). */
int cj_auto_pick(const struct cj_policy *p, char **argv, const char *guideline, char *reason, size_t len);
/* The installed guideline (next to the executable: ../share/chfs-job/guideline.csv). */
const char *cj_default_guideline(char *buf, size_t len);

#endif
