/*
 * path.c — see path.h. Canonicalisation walks the input once, keeping the output as a stack of
 * components: ".." pops the last one (an error if there is none), "." and empty components are
 * skipped.
 */
#include "path.h"

#include <errno.h>
#include <string.h>

int path_canonical(const char *in, char *out)
{
	size_t o = 0;
	if (!in || !*in)
		return -ENOENT;
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t n = (size_t)(p - s);
		if (n == 1 && s[0] == '.')
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (o == 0)
				return -EINVAL;
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* drop the separator too */
			continue;
		}
		if (n > CHFS_NAME_MAX)
			return -ENAMETOOLONG;
		if (o + (o ? 1 : 0) + n >= CHFS_PATH_MAX)
			return -ENAMETOOLONG;
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	out[o] = '\0';
	/* A top-level name starting with \x01 is reserved: the servers keep hard-linked files'
	 * inode records under such keys (wire_inode_key), never listed nor reachable by a path. */
	return out[0] == '\x01' ? -EINVAL : 0;
}

int path_check_canonical(const char *p, size_t len, int allow_root)
{
	if (len == 0)
		return allow_root ? 0 : -EINVAL;
	if (len >= CHFS_PATH_MAX)
		return -ENAMETOOLONG;
	if (memchr(p, '\0', len))
		return -EINVAL;
	size_t i = 0;
	while (i <= len) {
		size_t s = i;
		while (i < len && p[i] != '/')
			i++;
		size_t n = i - s;
		if (n == 0)
			return -EINVAL; /* leading, trailing or doubled '/' */
		if (n > CHFS_NAME_MAX)
			return -ENAMETOOLONG;
		if ((n == 1 && p[s] == '.') || (n == 2 && p[s] == '.' && p[s + 1] == '.'))
			return -EINVAL;
		i++; /* skip '/' (or step past the end) */
	}
	return 0;
}

const char *path_split(const char *p, char *parent)
{
	if (!*p)
		return NULL;
	const char *slash = strrchr(p, '/');
	if (!slash) {
		parent[0] = '\0';
		return p;
	}
	size_t n = (size_t)(slash - p);
	memcpy(parent, p, n);
	parent[n] = '\0';
	return slash + 1;
}

int path_join(const char *dir, const char *name, char *out)
{
	size_t a = strlen(dir), b = strlen(name);
	if (a + 1 + b >= CHFS_PATH_MAX)
		return -ENAMETOOLONG;
	if (a) {
		memcpy(out, dir, a);
		out[a] = '/';
		memcpy(out + a + 1, name, b + 1);
	} else {
		memcpy(out, name, b + 1);
	}
	return 0;
}
