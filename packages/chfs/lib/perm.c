/*
 * perm.c — who a libchfs call acts for, and POSIX permission checks on its behalf.
 *
 * The trust model is NFS AUTH_SYS: the pool secret admits a client process; the client asserts
 * the uid, gid and groups it acts for, and libchfs applies the permission rules of a local file
 * system for that identity before it sends a request. By default a call acts for the process's
 * effective uid, gid and supplementary groups. A FUSE daemon serves many users from one process:
 * chfs_act_as() makes the calling thread act for the requester instead (new entries get its
 * owner; checks use its credentials), and CHFS_ACT_CHECKED says the caller (the kernel, with
 * FUSE's default_permissions) has already checked access, so only ownership is taken from it.
 *
 * Rules (as Linux, for an identity without capabilities unless uid 0):
 *   - access: owner bits if uid matches, else group bits if gid or a supplementary group
 *     matches, else other bits; uid 0 passes everything but execute of a non-directory that
 *     no one may execute;
 *   - creating or removing a name needs write and search on the directory; in a sticky
 *     directory only the entry's owner, the directory's owner or root may remove or rename it
 *     (EPERM);
 *   - chmod, and setting times to explicit values, need ownership or root (EPERM); setting them
 *     to now also passes with write access (EACCES otherwise); a non-root chmod that sets
 *     set-group-ID on a file of a group the caller is not in drops that bit;
 *   - chown: root changes anything; the owner may change the group to one of its groups
 *     (EPERM otherwise);
 *   - new entries get the caller's uid and gid, or the directory's gid when it has
 *     set-group-ID (subdirectories then inherit the bit).
 * Search permission on the ancestors of a path is not checked: that would cost a lookup per
 * component (README, "Semantics").
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct act_as {
	int active, checked, ngroups;
	uid_t uid;
	gid_t gid;
	gid_t groups[CHFS_ACT_MAX_GROUPS];
};

static __thread struct act_as act;

/* A benchmark build without checks (lib/CMakeLists.txt, CHFS_BENCH_NO_PERM_CHECKS): every caller
 * is exempt, as root is. Never a run-time switch, so no user can turn the checks off. */
#ifdef CHFS_BENCH_NO_PERM_CHECKS
enum { checks_off = 1 };
#else
enum { checks_off = 0 };
#endif

int chfs_act_as(uid_t uid, gid_t gid, int ngroups, const gid_t *groups, int flags)
{
	if (uid == (uid_t)-1) {
		act.active = 0;
		return 0;
	}
	if (ngroups < 0 || (ngroups > 0 && !groups) || (flags & ~CHFS_ACT_CHECKED)) {
		errno = EINVAL;
		return -1;
	}
	if (ngroups > CHFS_ACT_MAX_GROUPS)
		ngroups = CHFS_ACT_MAX_GROUPS; /* the rest cannot grant group access here */
	act.uid = uid;
	act.gid = gid;
	act.ngroups = ngroups;
	if (ngroups)
		memcpy(act.groups, groups, (size_t)ngroups * sizeof *groups);
	act.checked = !!(flags & CHFS_ACT_CHECKED);
	act.active = 1;
	return 0;
}

static uid_t my_uid(void) { return act.active ? act.uid : geteuid(); }
static gid_t my_gid(void) { return act.active ? act.gid : getegid(); }

/* Nothing to check: root, or the caller checked already. */
static int exempt(void) { return checks_off || (act.active && act.checked) || my_uid() == 0; }
int perm_exempt(void) { return exempt(); }

int perm_sticky_applies(const struct chfs_md *dir)
{
	return !exempt() && (dir->mode & S_ISVTX) && dir->uid != my_uid();
}

static int in_group(gid_t gid)
{
	if (gid == my_gid())
		return 1;
	if (act.active) {
		for (int i = 0; i < act.ngroups; i++)
			if (act.groups[i] == gid)
				return 1;
		return 0;
	}
	gid_t list[CHFS_ACT_MAX_GROUPS];
	int n = getgroups(CHFS_ACT_MAX_GROUPS, list);
	for (int i = 0; i < n; i++)
		if (list[i] == gid)
			return 1;
	return 0;
}

void perm_new_owner(struct chfs_md *md, const struct chfs_md *dir)
{
	md->uid = my_uid();
	md->gid = my_gid();
	if (dir && (dir->mode & S_ISGID)) {
		md->gid = dir->gid;
		if (S_ISDIR(md->mode))
			md->mode |= S_ISGID;
	}
}

int perm_access(const struct chfs_md *md, int want)
{
	if (checks_off || (act.active && act.checked))
		return 0;
	if (my_uid() == 0) {
		if ((want & PERM_X) && !S_ISDIR(md->mode) && !(md->mode & 0111))
			return -EACCES;
		return 0;
	}
	unsigned bits;
	if (md->uid == my_uid())
		bits = (md->mode >> 6) & 7;
	else if (in_group(md->gid))
		bits = (md->mode >> 3) & 7;
	else
		bits = md->mode & 7;
	return ((unsigned)want & ~bits) ? -EACCES : 0;
}

int perm_dir_change(const struct chfs_md *dir, const struct chfs_md *victim)
{
	int rc = perm_access(dir, PERM_W | PERM_X);
	if (rc || exempt() || !victim || !(dir->mode & S_ISVTX))
		return rc;
	return victim->uid == my_uid() || dir->uid == my_uid() ? 0 : -EPERM;
}

int perm_owner(const struct chfs_md *md) { return exempt() || md->uid == my_uid() ? 0 : -EPERM; }

uint32_t perm_chmod_mode(const struct chfs_md *md, uint32_t mode)
{
	if (!exempt() && !S_ISDIR(md->mode) && (mode & S_ISGID) && !in_group(md->gid))
		mode &= ~(uint32_t)S_ISGID;
	return mode;
}

int perm_times(const struct chfs_md *md, int to_now)
{
	if (perm_owner(md) == 0)
		return 0;
	return to_now ? perm_access(md, PERM_W) : -EPERM;
}

int perm_chown(const struct chfs_md *md, uid_t uid, gid_t gid)
{
	if (exempt())
		return 0;
	if (md->uid != my_uid())
		return -EPERM;
	if (uid != (uid_t)-1 && uid != md->uid)
		return -EPERM;
	if (gid != (gid_t)-1 && gid != md->gid && !in_group(gid))
		return -EPERM;
	return 0;
}
