/* paths.h — lexical path handling shared by the policy and the interception methods: absolute
 * paths made normal without touching the file system (".", "..", repeated slashes), relative
 * paths joined to a base (a process's working directory or a directory descriptor's path). */
#ifndef CHFS_JOB_PATHS_H
#define CHFS_JOB_PATHS_H

#include <stddef.h>

/* Normal form of absolute path in into out (PATH_MAX bytes): -EINVAL if not absolute,
 * -ENAMETOOLONG if it does not fit. ".." at "/" stays at "/". */
int cj_path_normalize(const char *in, char *out, size_t outlen);
/* base (absolute) + "/" + rel, normalized; rel absolute ignores base. */
int cj_path_join(const char *base, const char *rel, char *out, size_t outlen);
/* Does path lie at or below prefix (both normal)? */
int cj_path_under(const char *path, const char *prefix, size_t prefix_len);

#endif
