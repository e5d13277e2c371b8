/* paths.c — lexical normalisation of paths (see paths.h). No system calls: the policy is matched
 * against the path the program named; the methods check the symlink-resolved path separately
 * (resolve.c) so a symbolic link cannot lead around a denial. */
#include "paths.h"

#include <errno.h>
#include <string.h>

int cj_path_normalize(const char *in, char *out, size_t outlen)
{
	if (in[0] != '/')
		return -EINVAL;
	if (outlen < 2)
		return -ENAMETOOLONG;
	size_t n = 0;
	out[n++] = '/';
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - s);
		if (len == 0 || (len == 1 && s[0] == '.'))
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			/* drop the last component ("/a/b" -> "/a", "/a" -> "/") */
			while (n > 1 && out[n - 1] != '/')
				n--;
			if (n > 1)
				n--;
			continue;
		}
		if (n > 1)
			out[n++] = '/';
		if (n + len + 1 > outlen)
			return -ENAMETOOLONG;
		memmove(out + n, s, len); /* in and out may be the same buffer: n never passes s */
		n += len;
	}
	out[n] = '\0';
	return 0;
}

int cj_path_join(const char *base, const char *rel, char *out, size_t outlen)
{
	if (rel[0] == '/')
		return cj_path_normalize(rel, out, outlen);
	size_t bl = strlen(base), rl = strlen(rel);
	if (bl + rl + 2 > outlen)
		return -ENAMETOOLONG;
	if (out != base)
		memmove(out, base, bl);
	out[bl] = '/';
	memmove(out + bl + 1, rel, rl + 1);
	return cj_path_normalize(out, out, outlen);
}

int cj_path_under(const char *path, const char *prefix, size_t prefix_len)
{
	if (prefix_len == 1 && prefix[0] == '/')
		return 1;
	return strncmp(path, prefix, prefix_len) == 0 &&
	       (path[prefix_len] == '\0' || path[prefix_len] == '/');
}
