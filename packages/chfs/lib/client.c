/*
 * client.c — library state: chfs_init/term, the setters, the server list and fork handling.
 *
 * chfs_init() reads the configuration (config.c), the pool secret, opens the transport with the
 * protocol of the first server address, and fetches the member list (server ids, addresses,
 * the ring's virtual-node count) from the first bootstrap server that answers (CHFS_SERVER
 * entries are tried starting at a random one, as upstream); the snapshot carries the placement
 * ring built from the ids. The list is an immutable snapshot swapped on refresh (after
 * CHFS_NODE_LIST_CACHE_TIMEOUT seconds) so readers never lock.
 * The refresh takes no lock either: the first thread to see the list due asks the members
 * (from a random one on, skipping down ones), the others keep using the snapshot they have
 * until the new one is published.
 * A list taken from the node's cache (listcache.c) may call down a server that is back since:
 * a fresh list from a live member is fetched before its requests fail (client_down_confirmed).
 *
 * Fork: the transport's threads do not exist in a child, so a child (detected by pid, or told by
 * chfs_after_fork) abandons the inherited transport and opens its own on first use; descriptors
 * stay valid because they hold paths and file ids, not transport state.
 */
#define _GNU_SOURCE
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

struct client chfs_client = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void proto_of(const char *addr, char *out, size_t size)
{
	const char *sep = strstr(addr, "://");
	size_t n = sep ? (size_t)(sep - addr) : 0;
	if (n >= size)
		n = size - 1;
	memcpy(out, addr, n);
	out[n] = '\0';
}

/* IPv4 address part of "proto://a.b.c.d:port" into out; 0 if none. */
static int addr_ip(const char *addr, struct in_addr *out)
{
	const char *h = strstr(addr, "://");
	char ip[64];
	if (!h)
		return 0;
	h += 3;
	size_t n = strcspn(h, ":");
	if (n >= sizeof ip)
		return 0;
	memcpy(ip, h, n);
	ip[n] = '\0';
	return inet_pton(AF_INET, ip, out) == 1;
}

static int ip_is_mine(struct in_addr a)
{
	struct ifaddrs *ifs, *i;
	int mine = 0;
	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i && !mine; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr)
			mine = 1;
	freeifaddrs(ifs);
	return mine;
}

/* The local IPv4 address the kernel would use to reach `addr` (for binding the client). */
static int source_ip_for(const char *addr, char *out, size_t size)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9)};
	if (!addr_ip(addr, &sa.sin_addr))
		return -1;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	socklen_t len = sizeof sa;
	int rc = connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	                         getsockname(s, (struct sockaddr *)&sa, &len) == 0
	                 ? 0
	                 : -1;
	close(s);
	if (rc == 0 && !inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)size))
		rc = -1;
	return rc;
}

static void srvlist_free(struct srvlist *s)
{
	while (s) {
		struct srvlist *o = s->older;
		for (unsigned i = 0; i < s->n; i++)
			free(s->addrs[i]);
		free(s->addrs);
		if (s->ring)
			ring_free(s->ring);
		nodelist_free(&s->members);
		free(s->peers);
		free(s->local);
		free(s->down);
		free(s);
		s = o;
	}
}

/* Build a snapshot from a fetched member list (peers resolved on the current transport); takes
 * ownership of l->list. */
static int srvlist_build(struct nodelist *l, struct srvlist **out)
{
	struct srvlist *s = calloc(1, sizeof *s);
	if (!s) {
		nodelist_free(l);
		return -ENOMEM;
	}
	s->members = *l;
	s->epoch = l->epoch;
	l->list = NULL;
	int n = wire_list_parse(s->members.list, s->members.len, NULL, WIRE_LIST_MAX);
	struct wire_member *m = n > 0 ? calloc((size_t)n, sizeof *m) : NULL;
	const char **ids = n > 0 ? calloc((size_t)n, sizeof *ids) : NULL;
	s->addrs = calloc((size_t)(n > 0 ? n : 1), sizeof *s->addrs);
	s->peers = calloc((size_t)(n > 0 ? n : 1), sizeof *s->peers);
	s->local = calloc((size_t)(n > 0 ? n : 1), sizeof *s->local);
	s->down = calloc((size_t)(n > 0 ? n : 1), sizeof *s->down);
	int rc = n <= 0 ? -EIO : m && ids && s->addrs && s->peers && s->local && s->down ? 0 : -ENOMEM;
	if (rc == 0 && wire_list_parse(s->members.list, s->members.len, m, (unsigned)n) != n)
		rc = -EIO;
	for (int i = 0; rc == 0 && i < n; i++) {
		const char *a = m[i].addr;
		ids[i] = m[i].id;
		if (!(s->addrs[s->n] = strdup(a))) {
			rc = -ENOMEM;
			break;
		}
		rc = xprt_connect(chfs_client.x, a, &s->peers[s->n]);
		struct in_addr ip;
		s->local[s->n] = strncmp(a, "shm://", 6) == 0 || (addr_ip(a, &ip) && ip_is_mine(ip));
		s->nlocal += s->local[s->n];
		s->down[s->n] = (unsigned char)wire_id_in(m[i].id, s->members.down, s->members.ndown);
		s->ndown += s->down[s->n];
		s->n++;
	}
	if (rc == 0)
		rc = ring_build(ids, s->n, s->members.vnodes, &s->ring);
	free(ids);
	free(m);
	if (rc) {
		srvlist_free(s);
		return rc;
	}
	s->fetched = time(NULL);
	*out = s;
	return 0;
}

/* While the list reports a server down, look again this often: it may be back. */
#define DOWN_RECHECK_S 2

/* A member that does not answer the list request within this long is passed over first (a hung
 * server must not cost every new client its whole RPC timeout); the full timeout is the last
 * resort. */
#define LIST_QUICK_TIMEOUT_MS 1000

/* Ask server `addr` for the list. */
static int fetch_list(const char *addr, int timeout, struct srvlist **out)
{
	struct nodelist l;
	int rc = nodelist_fetch(chfs_client.x, addr, chfs_client.secret, timeout, NULL, NULL, &l);
	if (rc == 0 && l.epoch == 0) { /* a server still joining its pool: it has no list yet */
		nodelist_free(&l);
		log_info("server %s is still joining its pool", addr);
		return -EAGAIN;
	}
	if (rc == 0)
		rc = srvlist_build(&l, out);
	if (rc == -EACCES)
		log_err("server %s refused the client: wrong or missing pool secret (CHFS_SECRET_FILE=%s)",
		        addr, chfs_client.cfg.secret_file);
	else if (nodelist_no_answer(rc))
		log_info("server %s: %s", addr, rc == -ENOTCONN ? "no answer" : strerror(-rc));
	return rc;
}

static int open_transport(const char *addr)
{
	char host[64];
	struct xprt_opts o = {.proto = chfs_client.proto, .host = NULL, .is_server = 0};
	if (strcmp(chfs_client.proto, "shm") != 0 && source_ip_for(addr, host, sizeof host) == 0)
		o.host = host;
	return xprt_open(&o, &chfs_client.x);
}

/* A random index below n (where to start trying servers, so clients spread over them). */
static unsigned random_index(unsigned n)
{
	unsigned r = 0;
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
		r = (unsigned)getpid() ^ (unsigned)time(NULL);
	return n ? r % n : 0;
}

/* Why a server is unreachable: for shm, whether anybody (and whom) serves that name here. */
static void shm_or_route(char *why, size_t size, const char *addr)
{
	uid_t uid = 0;
	int rc = xprt_shm_owner(addr, &uid);
	if (rc == -EACCES)
		snprintf(why, size, "served by uid %u; shm connects one user's processes only: use tcp",
		         (unsigned)uid);
	else if (rc == -ENOENT || rc == 0)
		snprintf(why, size, "no shm server of this user by that name on this node");
	else
		snprintf(why, size, "unreachable: no route, or no TCP answer");
}

/* Append "addr (why)" for a server that did not answer to the message in buf. */
static void note_failure(char *buf, size_t size, int *shown, const char *addr, int rc, int timeout)
{
	size_t o = strlen(buf);
	if (*shown == 3) {
		snprintf(buf + o, size - o, ", ...");
	} else if (*shown < 3) {
		char why[128];
		if (rc == -ENOTCONN)
			snprintf(why, sizeof why, "no answer within %d ms", timeout);
		else if (rc == -EHOSTUNREACH)
			shm_or_route(why, sizeof why, addr);
		else
			snprintf(why, sizeof why, "%s", strerror(-rc));
		snprintf(buf + o, size - o, "%s%s (%s)", *shown ? ", " : "", addr, why);
	}
	++*shown;
}

/* Fetch the list from the bootstrap list (or one server): the first that answers. A server
 * nobody listens at (refused, no route: the transport knows within a second) is not tried
 * again with the long timeout. Opens the transport if there is none. */
static int fetch_bootstrap(const char *server, struct srvlist **out)
{
	char list[sizeof chfs_client.cfg.server];
	char *addrs[256];
	unsigned char gone[256] = {0};
	char why[768] = "";
	int n = 0, rc = -ENOTCONN, shown = 0, silent = 0;
	snprintf(list, sizeof list, "%s", server ? server : chfs_client.cfg.server);
	for (char *sv = NULL, *a = strtok_r(list, ",", &sv); a && n < 256; a = strtok_r(NULL, ",", &sv))
		if (*a)
			addrs[n++] = a;
	if (n == 0) {
		log_err("no server given: set CHFS_SERVER (e.g. eval \"$(chfsctl start)\")");
		return -ENOTCONN;
	}
	unsigned start = random_index((unsigned)n);
	int full = rpc_timeout(), quick = full < LIST_QUICK_TIMEOUT_MS ? full : LIST_QUICK_TIMEOUT_MS;
	for (int pass = quick < full ? 0 : 1; pass < 2; pass++) {
		for (int k = 0; k < n; k++) {
			unsigned i = (start + (unsigned)k) % (unsigned)n;
			const char *a = addrs[i];
			if (gone[i])
				continue;
			if (!wire_addr_ok(a, strlen(a))) {
				log_err("CHFS_SERVER entry \"%s\" is not an address like tcp://10.0.0.1:40000",
				        a);
				return -EINVAL;
			}
			if (!chfs_client.x) {
				proto_of(a, chfs_client.proto, sizeof chfs_client.proto);
				if ((rc = open_transport(a)) < 0) {
					log_err("cannot open the %s transport: %s", chfs_client.proto,
					        strerror(-rc));
					return -ENOTCONN;
				}
			}
			struct srvlist *s;
			int timeout = pass ? full : quick;
			rc = fetch_list(a, timeout, &s);
			if (rc == 0) {
				snprintf(chfs_client.bootstrap, sizeof chfs_client.bootstrap, "%s", a);
				*out = s;
				return 0;
			}
			if (rc == -EACCES || rc == -ENOMEM)
				return rc;
			gone[i] = rc != -ENOTCONN && nodelist_no_answer(rc);
			silent += pass == 1 && !gone[i];
			if (gone[i] || pass == 1)
				note_failure(why, sizeof why, &shown, a, rc, timeout);
		}
	}
	if (silent)
		log_err("no CHFS server answers: %s (from %s; servers do not answer without the pool "
		        "secret, CHFS_SECRET_FILE=%s)",
		        why, server ? "the argument" : "CHFS_SERVER", chfs_client.cfg.secret_file);
	else
		log_err("no CHFS server answers: %s (from %s)", why, server ? "the argument" : "CHFS_SERVER");
	return -ENOTCONN;
}

/* The list from the node's cache, if there is a young enough one: no server is contacted.
 * Age limit CHFS_LIST_CACHE_MSEC (500 ms): the epoch corrects membership changes whatever the
 * age, but a member the pool found down (or hung) since is only known from a fresh list, and a
 * new process must learn it about as soon as one without the cache would — the failure
 * detector itself takes over a second. A burst of processes (MPI ranks, a parallel make, the
 * short steps of a workflow) still fetches the list about once per interval, not per process. */
static int connect_cached(const char *server)
{
	char first[WIRE_ADDR_MAX];
	struct nodelist l;
	int64_t fetched, now = listcache_now_ms();
	snprintf(first, sizeof first, "%.*s", (int)strcspn(server, ","), server);
	if (!wire_addr_ok(first, strlen(first)) || listcache_load(&chfs_client.lc, &l, &fetched) < 0)
		return -ENOENT;
	if (fetched > now || now - fetched >= chfs_client.cfg.list_cache_msec) {
		nodelist_free(&l);
		return -ENOENT;
	}
	if (!chfs_client.x) {
		proto_of(first, chfs_client.proto, sizeof chfs_client.proto);
		if (open_transport(first) < 0) {
			nodelist_free(&l);
			return -ENOENT; /* the bootstrap path says why */
		}
	}
	struct srvlist *s;
	if (srvlist_build(&l, &s) < 0)
		return -ENOENT;
	s->fetched = (time_t)(fetched / 1000);
	atomic_store(&s->cached, 1);
	snprintf(chfs_client.bootstrap, sizeof chfs_client.bootstrap, "%s", first);
	s->older = atomic_load(&chfs_client.srv);
	atomic_store(&chfs_client.srv, s);
	return 0;
}

/* Join the pool: the cached list, else the bootstrap servers'. Caller holds the lock. */
static int connect_pool(const char *server)
{
	const char *list = server ? server : chfs_client.cfg.server;
	if (connect_cached(list) == 0)
		return 0;
	struct srvlist *s;
	int rc = fetch_bootstrap(server, &s);
	if (rc == 0) {
		listcache_store(&chfs_client.lc, &s->members);
		s->older = atomic_load(&chfs_client.srv);
		atomic_store(&chfs_client.srv, s);
	}
	return rc;
}

int client_cached_list_failed(struct srvlist *s, unsigned idx, int xrc)
{
	if (xrc == -ETIMEDOUT && atomic_load(&s->cached)) {
		listcache_drop(&chfs_client.lc); /* it did not say the server is down: do not share it */
		return 0;
	}
	if (xrc != -ECONNREFUSED && xrc != -EHOSTUNREACH && xrc != -ENETUNREACH)
		return 0;
	if (!atomic_exchange(&s->cached, 0))
		return 0;
	log_info("cached member list names %s, which is not there (%s): fetching the list", s->addrs[idx],
	         strerror(-xrc));
	listcache_drop(&chfs_client.lc);
	atomic_store(&s->refetch, 1);
	return 1;
}

static void atfork_prepare(void) { pthread_mutex_lock(&chfs_client.lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&chfs_client.lock); }
static void atfork_child(void)
{
	pthread_mutex_init(&chfs_client.lock, NULL);
	chfs_after_fork();
}
static void register_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

void chfs_after_fork(void)
{
	/* Lazy: the next client_begin() reopens the transport. */
	atomic_store(&chfs_client.forked, 1);
	open_lease_after_fork(); /* a lease identity of its own, none of the parent's leases */
}

static int reopen_after_fork(void)
{
	if (chfs_client.x)
		xprt_abandon_after_fork(chfs_client.x);
	chfs_client.x = NULL;
	chfs_client.pid = getpid();
	atomic_store(&chfs_client.list_refreshing, 0); /* the refreshing thread was not forked */
	/* Peers belong to the abandoned transport: rebuild the snapshot on the new one. */
	struct srvlist *old = atomic_load(&chfs_client.srv);
	if (!old)
		return -ENOTCONN;
	int rc = open_transport(chfs_client.bootstrap);
	if (rc < 0)
		return -EIO;
	struct nodelist l = old->members;
	l.down = strndup(old->members.down, old->members.ndown);
	l.prev = strndup(old->members.prev, old->members.nprev);
	if (!(l.list = strndup(old->members.list, old->members.len)) || !l.down || !l.prev) {
		nodelist_free(&l);
		return -ENOMEM;
	}
	struct srvlist *s;
	rc = srvlist_build(&l, &s);
	if (rc)
		return rc;
	s->older = old;
	atomic_store(&chfs_client.srv, s);
	return 0;
}

/* Seconds a snapshot is used before it is fetched again (0: never). */
static int list_ttl(const struct srvlist *s)
{
	int t = chfs_client.cfg.node_list_cache_timeout;
	return s->ndown && (t == 0 || t > DOWN_RECHECK_S) ? DOWN_RECHECK_S : t;
}

/* True when s is older than its time to live and no failed refresh is recent. */
static int list_stale(const struct srvlist *s)
{
	int timeout = list_ttl(s);
	if (timeout == 0)
		return 0;
	time_t now = time(NULL);
	return (atomic_load(&chfs_client.list_due) || now - s->fetched >= timeout) &&
	       now >= (time_t)atomic_load(&chfs_client.list_retry_at);
}

/* The list from any live member of s: from a random one on, skipping those s calls down, a
 * short timeout first (a dead member costs a short wait now and then). */
static int fetch_from_members(struct srvlist *s, struct srvlist **out)
{
	unsigned start = random_index(s->n);
	int rc = -ENOTCONN;
	int full = rpc_timeout(), quick = full < LIST_QUICK_TIMEOUT_MS ? full : LIST_QUICK_TIMEOUT_MS;
	for (int pass = quick < full ? 0 : 1; pass < 2 && rc != 0; pass++)
		for (unsigned k = 0; k < s->n && rc != 0; k++) {
			unsigned i = (start + k) % s->n;
			if (!s->down[i])
				rc = fetch_list(s->addrs[i], pass ? full : quick, out);
		}
	return rc;
}

/* Make ns the current list unless a newer one is there already (a thread refreshing after
 * WIRE_ERETRY and the periodic refresh may race); returns the current list. */
static struct srvlist *install_list(struct srvlist *ns)
{
	struct srvlist *cur = atomic_load(&chfs_client.srv);
	for (;;) {
		if (cur && cur->epoch > ns->epoch) {
			srvlist_free(ns); /* never published */
			return cur;
		}
		ns->older = cur;
		if (atomic_compare_exchange_weak(&chfs_client.srv, &cur, ns)) {
			listcache_store(&chfs_client.lc, &ns->members);
			return ns;
		}
	}
}

enum { RECHECK_NONE, RECHECK_RUNNING, RECHECK_DONE };

/* The cached list was written up to CHFS_LIST_CACHE_MSEC ago, maybe just before the server came
 * back (SIGCONT, a restart): a fresh list from a live member — what a process without the cache
 * would have started with — decides, at the cost of one round trip for the first request that
 * needs a server the cached list calls down. Refusing such lists outright would send every new
 * process to the bootstrap server, which the cache spares a hung one. The fresh list becomes the
 * process's and the node's (install_list). */
int client_down_confirmed(struct srvlist *s, unsigned idx)
{
	if (!atomic_load(&s->cached))
		return 1;
	int st = RECHECK_NONE;
	if (atomic_compare_exchange_strong(&s->recheck, &st, RECHECK_RUNNING)) {
		struct srvlist *ns = NULL;
		if (fetch_from_members(s, &ns) == 0)
			ns = install_list(ns);
		atomic_store(&s->fresh, ns);
		atomic_store(&s->recheck, RECHECK_DONE);
	} else {
		struct timespec tick = {0, 1000000};
		while (atomic_load(&s->recheck) != RECHECK_DONE) /* another thread asks */
			nanosleep(&tick, NULL);
	}
	struct srvlist *ns = atomic_load(&s->fresh);
	int i = ns && ns != s ? client_server_index(ns, s->addrs[idx]) : -1;
	if (i < 0 || ns->down[i])
		return 1;
	log_info("server %s, down in the node's cached member list, is up in the pool's", s->addrs[idx]);
	return 0;
}

struct srvlist *client_list_retry(struct srvlist *s, unsigned idx, int attempt)
{
	struct srvlist *cur = atomic_load(&chfs_client.srv);
	if (cur->epoch > s->epoch)
		return cur; /* another thread has the newer list already */
	struct srvlist *ns;
	if (atomic_exchange(&s->refetch, 0)) { /* the cached list was wrong: ask the pool */
		if (fetch_bootstrap(chfs_client.lc.server, &ns) == 0)
			return install_list(ns);
		return atomic_load(&chfs_client.srv);
	}
	if (fetch_list(s->addrs[idx], rpc_timeout(), &ns) == 0) {
		if (ns->epoch > cur->epoch)
			return install_list(ns);
		srvlist_free(ns);
	}
	/* The server that refused has not got a newer list to give (it is catching up): wait a
	 * little, longer each time. */
	struct timespec t = {0, (attempt < 10 ? attempt + 1 : 10) * 20 * 1000000L};
	nanosleep(&t, NULL);
	return atomic_load(&chfs_client.srv);
}

/* Replace the list s by a fresh one. One thread refreshes, without the global lock: the others
 * go on with the snapshot they have (it stays valid until chfs_term). Members are asked starting
 * at a random one (down ones skipped, a short timeout first), so a dead member costs one thread
 * a short wait now and then, not a stall of every thread at every refresh. Returns the list. */
static struct srvlist *refresh_list(struct srvlist *s)
{
	if (atomic_exchange(&chfs_client.list_refreshing, 1))
		return s;
	struct srvlist *cur = atomic_load(&chfs_client.srv), *ns = NULL;
	if (cur == s) {
		if (fetch_from_members(s, &ns) == 0) {
			cur = install_list(ns);
			atomic_store(&chfs_client.list_due, 0);
		} else {
			/* Keep the old list; retry after another time to live. */
			atomic_store(&chfs_client.list_retry_at, (long long)time(NULL) + list_ttl(s));
		}
	}
	atomic_store(&chfs_client.list_refreshing, 0);
	return cur;
}

int client_begin(struct srvlist **out)
{
	struct srvlist *s = atomic_load(&chfs_client.srv);
	if (!chfs_client.initialized || !s)
		return -ENOTCONN;
	/* No getpid() on the fast path: it is a real system call; fork is signalled by
	 * chfs_after_fork(), and checked by pid only when the list is due anyway. */
	int stale = list_stale(s), rc = 0;
	if (atomic_load(&chfs_client.forked) || (stale && chfs_client.pid != getpid())) {
		pthread_mutex_lock(&chfs_client.lock);
		if (atomic_exchange(&chfs_client.forked, 0) || chfs_client.pid != getpid())
			rc = reopen_after_fork();
		pthread_mutex_unlock(&chfs_client.lock);
		s = atomic_load(&chfs_client.srv);
		stale = list_stale(s); /* the child's rebuilt list is fresh */
	}
	if (rc == 0 && stale)
		s = refresh_list(s);
	*out = s;
	return rc;
}

/* A flag, not a write into the snapshot: other threads read the snapshot without a lock. */
void client_list_stale(void) { atomic_store(&chfs_client.list_due, 1); }

int client_local_server(const struct srvlist *s)
{
	if (s->nlocal == 0)
		return -1;
	/* Several servers on this host (tests, fat nodes): spread processes over them. */
	int pick = (int)((unsigned)getpid() % (unsigned)s->nlocal);
	for (unsigned i = 0; i < s->n; i++)
		if (s->local[i] && pick-- == 0)
			return (int)i;
	return -1;
}

int client_server_index(const struct srvlist *s, const char *a)
{
	for (unsigned i = 0; i < s->n; i++)
		if (strcmp(s->addrs[i], a) == 0)
			return (int)i;
	return -1;
}

int chfs_init(const char *server)
{
	char err[512];
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&chfs_client.lock);
	if (chfs_client.initialized) {
		pthread_mutex_unlock(&chfs_client.lock);
		return 0;
	}
	int rc = chfs_config_load(&chfs_client.cfg, err, sizeof err);
	if (rc) {
		chfs_log_msg(LOG_ERR, "%s", err);
		goto out;
	}
	chfs_log_level = chfs_client.cfg.log_priority;
	atomic_store(&chfs_client.async_access, chfs_client.cfg.async_access);
	rc = secret_load(chfs_client.cfg.secret_file, chfs_client.secret);
	/* A launcher (chfs-run) may hand down the secret file open: a process that changed its uid
	 * since (su, setpriv, daemons dropping root) keeps the admission it started with. */
	if (rc && chfs_client.cfg.secret_fd >= 0 &&
	    secret_load_fd(chfs_client.cfg.secret_fd, chfs_client.secret) == 0)
		rc = 0;
	if (rc) {
		/* Servers drop requests without the secret unanswered: fail here, clearly. */
		log_err("pool secret %s: %s%s", chfs_client.cfg.secret_file, strerror(-rc),
		        rc == -EACCES ? " (must be readable only by its owner)" : "");
		rc = -EACCES;
		goto out;
	}
	chfs_client.pid = getpid();
	open_lease_init();
	listcache_init(&chfs_client.lc, &chfs_client.cfg, server ? server : chfs_client.cfg.server,
	               chfs_client.secret);
	rc = connect_pool(server);
	if (rc == 0) {
		chfs_client.initialized = 1;
	} else if (chfs_client.x) {
		/* A failed start keeps nothing open: an shm endpoint's region and doorbell in
		 * /dev/shm go with it (a root client's sweep leaves another user's files alone). */
		xprt_close(chfs_client.x);
		chfs_client.x = NULL;
	}
out:
	pthread_mutex_unlock(&chfs_client.lock);
	return set_err(rc);
}

int chfs_initialized(void) { return chfs_client.initialized; }

int chfs_term_without_sync(void)
{
	/* The lease renewal thread first (it takes chfs_client.lock in client_begin): it must not
	 * use the server list and transport freed below. */
	orphan_lease_stop();
	pthread_mutex_lock(&chfs_client.lock);
	if (chfs_client.initialized) {
		if (chfs_client.pid == getpid() && chfs_client.x)
			xprt_close(chfs_client.x);
		else if (chfs_client.x)
			xprt_abandon_after_fork(chfs_client.x);
		chfs_client.x = NULL;
		srvlist_free(atomic_exchange(&chfs_client.srv, NULL));
		chfs_client.initialized = 0;
	}
	pthread_mutex_unlock(&chfs_client.lock);
	return 0;
}

int chfs_term(void)
{
	/* Sizes are always reported; the backend flush (one request to every server) only by a
	 * process that wrote data: a reader's exit must not wait for every server (a stopped one
	 * cost each `chls` or `stat` the RPC timeout), and short processes pay no extra round. */
	if (chfs_client.initialized && fd_sync_sizes(0) == 0 && atomic_exchange(&chfs_client.wrote, 0))
		client_flush_backend();
	if (chfs_client.initialized) {
		open_lease_end();
		orphan_term();
	}
	return chfs_term_without_sync();
}

int chfs_size(void)
{
	struct srvlist *s;
	int rc = client_begin(&s);
	return rc ? set_err(rc) : (int)s->n;
}

const char *chfs_version(void) { return "3.0.0-chfs-stack"; }

void chfs_set_chunk_size(int v)
{
	if (v > 0 && (unsigned)v <= CHFS_MAX_CHUNK_SIZE)
		chfs_client.cfg.chunk_size = (uint32_t)v;
}
void chfs_set_buf_size(int v)
{
	if (v >= 0)
		chfs_client.cfg.buf_size = (uint32_t)v;
}
void chfs_set_async_access(int v) { atomic_store(&chfs_client.async_access, v ? 1 : 0); }
void chfs_set_rdma_thresh(size_t v) { chfs_client.cfg.rdma_thresh = v; }
void chfs_set_rpc_timeout_msec(int v)
{
	if (v >= 0)
		chfs_client.cfg.rpc_timeout_msec = v;
}
void chfs_set_node_list_cache_timeout(int v)
{
	if (v >= 0)
		chfs_client.cfg.node_list_cache_timeout = v;
}
