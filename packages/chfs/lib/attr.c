/*
 * attr.c — changing an entry's attributes: mode (chfs_chmod), owner and group (chfs_chown,
 * chfs_lchown), times (chfs_utimens, chfs_lutimens), and the access check (chfs_access).
 *
 * Each is one SETATTR to the owner of the name (symlinks followed, except by the l* calls),
 * after the permission rules of perm.c for the identity the call acts for. The root has no
 * record (it is fixed: root-owned, mode 1777, like /tmp): setting what it already has succeeds
 * (`chmod 1777` of a mount point, `chown 0:0`), anything else is EPERM. This process's
 * pending writes to the file are reported first: their size report bumps mtime, and it must
 * not land after (and override) the times set here — cp -p and tar set them right after
 * writing.
 */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Which permission rule a change needs. */
enum attr_rule { RULE_OWNER, RULE_TIMES_NOW, RULE_CHOWN };

struct attr_change {
	struct wire_setattr set;
	enum attr_rule rule;
	int nofollow;
};

static int setattr_path(const char *path, struct attr_change *a)
{
	NS_CALL_DECL(c);
	int rc = ns_begin(path, a->nofollow ? NS_LOOKUP : NS_RESOLVE, c);
	if (rc)
		return rc;
	const char *name = a->nofollow ? c->cp : c->real;
	struct chfs_md *md = &c->md;
	if (!name[0]) {
		int same = !(a->set.which & ~(uint32_t)(WIRE_SET_MODE | WIRE_SET_UID | WIRE_SET_GID)) &&
		           (!(a->set.which & WIRE_SET_MODE) || a->set.mode == (md->mode & 07777)) &&
		           (!(a->set.which & WIRE_SET_UID) || a->set.uid == md->uid) &&
		           (!(a->set.which & WIRE_SET_GID) || a->set.gid == md->gid);
		return same && perm_owner(md) == 0 ? 0 : -EPERM;
	}
	switch (a->rule) {
	case RULE_OWNER: rc = perm_owner(md); break;
	case RULE_TIMES_NOW: rc = perm_times(md, 1); break;
	case RULE_CHOWN: rc = perm_chown(md, a->set.uid, a->set.gid); break;
	}
	if (rc == 0 && (a->set.which & WIRE_SET_MODE))
		a->set.mode = perm_chmod_mode(md, a->set.mode);
	if (rc == 0 && S_ISREG(md->mode))
		rc = fd_sync_sizes(md->fileid);
	if (rc)
		return rc;
	if (md->flags & MD_LINKED)
		return link_setattr(c->s, md->fileid, &a->set, NULL);
	RPC_DECL(r);
	rpc_begin(&r, WOP_SETATTR);
	wenc_str(&r.e, name);
	wenc_u64(&r.e, 0);
	wenc_setattr(&r.e, &(struct wire_setattr){.which = a->set.which,
	                                          .mode = a->set.mode,
	                                          .uid = a->set.uid,
	                                          .gid = a->set.gid,
	                                          .atime_ns = a->set.atime_ns,
	                                          .mtime_ns = a->set.mtime_ns});
	rc = rpc_call_path(c->s, name, &r);
	if (rc == WIRE_ELINKED) /* linked since we looked */
		rc = link_setattr(c->s, md->fileid, &a->set, NULL);
	return rc;
}

int chfs_chmod(const char *path, mode_t mode)
{
	struct attr_change a = {.set = {.which = WIRE_SET_MODE, .mode = mode & 07777}, .rule = RULE_OWNER};
	return set_err(setattr_path(path, &a));
}

static int chown_path(const char *path, uid_t uid, gid_t gid, int nofollow)
{
	struct attr_change a = {.set = {.uid = (uint32_t)uid, .gid = (uint32_t)gid},
	                        .rule = RULE_CHOWN,
	                        .nofollow = nofollow};
	if (uid != (uid_t)-1)
		a.set.which |= WIRE_SET_UID;
	if (gid != (gid_t)-1)
		a.set.which |= WIRE_SET_GID;
	if (!a.set.which) { /* chown(path, -1, -1): only the existence check */
		struct stat st;
		return nofollow ? chfs_lstat(path, &st) : chfs_stat(path, &st);
	}
	return set_err(setattr_path(path, &a));
}

int chfs_chown(const char *path, uid_t uid, gid_t gid) { return chown_path(path, uid, gid, 0); }
int chfs_lchown(const char *path, uid_t uid, gid_t gid) { return chown_path(path, uid, gid, 1); }

static int64_t ts_ns(const struct timespec *t, int64_t now)
{
	return t->tv_nsec == UTIME_NOW ? now : (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static int utimens_path(const char *path, const struct timespec times[2], int nofollow)
{
	int64_t now = now_ns();
	struct attr_change a = {
	        .set = {.which = WIRE_SET_ATIME | WIRE_SET_MTIME, .atime_ns = now, .mtime_ns = now},
	        .rule = RULE_TIMES_NOW,
	        .nofollow = nofollow};
	if (times) {
		int explicit = 0;
		for (int i = 0; i < 2; i++) {
			long ns = times[i].tv_nsec;
			if (ns != UTIME_NOW && ns != UTIME_OMIT && (ns < 0 || ns >= 1000000000))
				return set_err(-EINVAL);
			explicit |= ns != UTIME_NOW && ns != UTIME_OMIT;
		}
		if (times[0].tv_nsec == UTIME_OMIT)
			a.set.which &= ~(uint32_t)WIRE_SET_ATIME;
		if (times[1].tv_nsec == UTIME_OMIT)
			a.set.which &= ~(uint32_t)WIRE_SET_MTIME;
		if (!a.set.which)
			return 0;
		a.set.atime_ns = ts_ns(&times[0], now);
		a.set.mtime_ns = ts_ns(&times[1], now);
		if (explicit)
			a.rule = RULE_OWNER;
	}
	return set_err(setattr_path(path, &a));
}

int chfs_utimens(const char *path, const struct timespec times[2]) { return utimens_path(path, times, 0); }
int chfs_lutimens(const char *path, const struct timespec times[2]) { return utimens_path(path, times, 1); }

int chfs_access(const char *path, int mode)
{
	if (mode & ~(R_OK | W_OK | X_OK))
		return set_err(-EINVAL);
	NS_CALL_DECL(c);
	int rc = ns_begin(path, NS_SYNC | NS_RESOLVE, c);
	if (rc == 0 && mode != F_OK)
		rc = perm_access(&c->md, (mode & R_OK ? PERM_R : 0) | (mode & W_OK ? PERM_W : 0) |
		                                 (mode & X_OK ? PERM_X : 0));
	return set_err(rc);
}
