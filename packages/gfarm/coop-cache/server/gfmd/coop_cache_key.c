/*
 * coop_cache_key.c - what a client may cache a file's bytes under
 * (chfs-stack patch against Gfarm 2.7.20).
 *
 *   KEY(ino, gen) -> (fs, inc, flags)
 *
 * The cooperative cache keys pages by (fs, inc, inode, generation) (see
 * coop_cache_wire.h).  Inode numbers and generations alone are not unique:
 * the none backend starts from scratch at every gfmd start, a restored
 * metadata backup rewinds them, and one node's gfccd may serve clients of
 * several file systems.  So gfmd draws `inc', a random 64-bit incarnation,
 * once per process, and names its file system by `fs', a hash of the host
 * name and port it serves on; a client uses no cached byte before it has
 * both.
 *
 * `flags' says whether bytes read now belong to generation gen:
 * GFM_PROTO_COOP_CACHE_KEY_STALE when gen is not the inode's generation any more (or the
 * inode is gone), GFM_PROTO_COOP_CACHE_KEY_WRITING while a process has the file open for
 * writing (its writes reach gfsd at once, the generation changes only at
 * its close).  A reader asks at its first read and again after each gfsd
 * read, before storing: a write that reached gfsd before the read ended
 * shows up as one flag or the other, so no page of new bytes is stored
 * under the old generation.  A writer asks at close: its staged pages are
 * published only if nobody else wrote in between (see gfs_pio_coop.c).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <gfarm/gflog.h>
#include <gfarm/error.h>
#include <gfarm/gfarm_misc.h>
#include <gfarm/gfs.h>

#include "gfp_xdr.h"
#include "gfm_proto.h"
#include "gfmd.h"
#include "subr.h"
#include "rpcsubr.h"
#include "inode.h"
#include "coop_cache_key.h"

static pthread_once_t ident_once = PTHREAD_ONCE_INIT;
static gfarm_uint64_t ident_fs, ident_inc;

static gfarm_uint64_t
fnv1a64(const char *s)
{
	gfarm_uint64_t h = 0xcbf29ce484222325ull;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return (h);
}

static void
ident_init(void)
{
	char name[300];
	struct timespec ts;

	snprintf(name, sizeof(name), "%s:%d", gfarm_host_get_self_name(),
	    gfmd_port);
	ident_fs = fnv1a64(name);
	if (getrandom(&ident_inc, sizeof(ident_inc), 0) !=
	    (ssize_t)sizeof(ident_inc)) {
		/* no entropy source: the start time still differs */
		clock_gettime(CLOCK_REALTIME, &ts);
		ident_inc = ((gfarm_uint64_t)ts.tv_sec * 1000000000ull +
		    (gfarm_uint64_t)ts.tv_nsec) ^ (gfarm_uint64_t)getpid() << 40;
	}
	gflog_info(GFARM_MSG_UNFIXED, "coop cache: fs %016llx incarnation "
	    "%016llx", (unsigned long long)ident_fs,
	    (unsigned long long)ident_inc);
}

gfarm_error_t
gfm_server_coop_cache_key(struct peer *peer, int from_client, int skip)
{
	gfarm_error_t e;
	gfarm_uint64_t ino, gen;
	gfarm_int32_t flags = 0;
	struct inode *inode;
	static const char diag[] = "GFM_PROTO_COOP_CACHE_KEY";

	e = gfm_server_get_request(peer, diag, "ll", &ino, &gen);
	if (e != GFARM_ERR_NO_ERROR || skip)
		return (e);
	pthread_once(&ident_once, ident_init);
	giant_lock();
	inode = inode_lookup(ino);
	if (inode == NULL || !inode_is_file(inode) ||
	    (gfarm_uint64_t)inode_get_gen(inode) != gen)
		flags |= GFM_PROTO_COOP_CACHE_KEY_STALE;
	else if (inode_is_opened_for_writing(inode))
		flags |= GFM_PROTO_COOP_CACHE_KEY_WRITING;
	giant_unlock();
	return (gfm_server_put_reply(peer, diag, e, "lli", ident_fs,
	    ident_inc, flags));
}
