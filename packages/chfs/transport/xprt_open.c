/*
 * xprt_open.c — choose the provider, bring the endpoint up, tear it down.
 *
 * Set-up order (works on tcp;ofi_rxm, shm, sockets, verbs;ofi_rxm): fi_getinfo -> fabric ->
 * domain -> CQ (tagged format, which every provider fills; FI_WAIT_UNSPEC where the provider has a wait object, because
 * fi_cq_sread on a FI_WAIT_NONE CQ crashes in 1.17; none on shm) -> AV (table) -> endpoint ->
 * bind -> enable -> post receive buffers -> start the progress thread.
 *
 * Where to listen: tcp/verbs/sockets servers bind opts->host (IPv4, host or interface name,
 * optional ":port"), 127.0.0.1 by default; clients take the provider's first IPv4 interface.
 * shm endpoints are named (opts->host or a unique "chfs-<pid>-<n>") so their address is stable
 * and their doorbell file can be found by peers.
 */
#include "xprt_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

static pthread_mutex_t first_getinfo_mu = PTHREAD_MUTEX_INITIALIZER;
static bool first_getinfo_done;

int xprt_fi_err(int fi_err)
{
	if (fi_err < 0)
		fi_err = -fi_err;
	if (fi_err == 0)
		return -EIO;
	/* libfabric's codes below FI_ERRNO_OFFSET are the system's errno values. */
	return fi_err < FI_ERRNO_OFFSET ? -fi_err : -EIO;
}

static const char *provider_name(enum xprt_kind k)
{
	switch (k) {
	case XPRT_TCP: return "tcp;ofi_rxm";
	case XPRT_SHM: return "shm";
	case XPRT_VERBS: return "verbs;ofi_rxm";
	case XPRT_SOCKETS: return "sockets";
	}
	return NULL;
}

/* Split "host[:port]" and turn an interface name into its IPv4 address. */
static int resolve_listen(const char *spec, char *node, size_t nsize, char *service, size_t ssize)
{
	char host[256];
	snprintf(service, ssize, "0");
	if (snprintf(host, sizeof host, "%s", spec) >= (int)sizeof host)
		return -EINVAL;
	char *colon = strrchr(host, ':');
	if (colon) {
		*colon = 0;
		char *end;
		unsigned long port = strtoul(colon + 1, &end, 10);
		if (!colon[1] || *end || port > 65535)
			return -EINVAL;
		snprintf(service, ssize, "%lu", port);
	}
	if (!host[0])
		snprintf(host, sizeof host, "127.0.0.1");
	struct in_addr a;
	if (inet_pton(AF_INET, host, &a) == 1) {
		snprintf(node, nsize, "%s", host);
		return 0;
	}
	struct ifaddrs *ifs, *i;
	if (getifaddrs(&ifs) == 0) {
		for (i = ifs; i; i = i->ifa_next)
			if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			    strcmp(i->ifa_name, host) == 0) {
				inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, node,
				          nsize);
				freeifaddrs(ifs);
				return 0;
			}
		freeifaddrs(ifs);
	}
	struct addrinfo hints = {.ai_family = AF_INET}, *res;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return -EINVAL;
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, node, nsize);
	freeaddrinfo(res);
	return 0;
}

/* ofi_rxm (tcp, verbs) pre-touches its 16 KiB bounce buffers for the receive queue of its
 * message endpoints: with the 1.17 defaults that is ~70 MB of RSS per process — for every CHFS
 * client, hooked processes included. 64 entries (~20 MB) keep the measured RPC rates; a full
 * queue only applies TCP back-pressure. The user's own setting wins; the value is read when
 * libfabric initialises its providers, so it only takes effect before the first fi_getinfo. */
static void limit_rxm_buffers(enum xprt_kind k)
{
	if (k == XPRT_TCP || k == XPRT_VERBS)
		setenv("FI_OFI_RXM_MSG_RX_SIZE", "64", 0);
}

/* ofi_rxm handles connection requests and replies only every cm_progress_interval (10 ms by
 * default) of CQ progress, on both sides: each new connection cost a fresh client ~10 ms per
 * server it talks to (measured: second server's first call 10.5 ms -> 1.3 ms at 1 ms, 0.6 ms at
 * 0.2 ms; the server's value counts as much as the client's). 1 ms keeps the extra event-queue
 * checks rare. Same rule as above: the user's setting wins, read at provider initialisation. */
static void quicken_rxm_connect(enum xprt_kind k)
{
	if (k == XPRT_TCP || k == XPRT_VERBS)
		setenv("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "1000", 0);
}

static int get_info(xprt_t *x, const struct xprt_opts *o, char *shm_name, size_t shm_size)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -ENOMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->fabric_attr->prov_name = strdup(provider_name(x->kind));
	hints->addr_format = x->kind == XPRT_SHM ? FI_ADDR_STR : FI_SOCKADDR_IN;

	char node[256], service[16];
	const char *n = NULL, *s = NULL;
	uint64_t flags = 0;
	int rc = 0;
	if (x->kind == XPRT_SHM) {
		rc = xprt_shm_name(x, o->host, shm_name, shm_size);
		if (rc < 0)
			goto out;
		n = shm_name;
		flags = FI_SOURCE;
	} else if (o->is_server || (o->host && *o->host)) {
		rc = resolve_listen(o->host ? o->host : "127.0.0.1", node, sizeof node, service,
		                    sizeof service);
		if (rc < 0)
			goto out;
		n = node;
		s = service;
		flags = FI_SOURCE;
	}
	limit_rxm_buffers(x->kind);
	quicken_rxm_connect(x->kind);
	/* The first fi_getinfo of the process initialises libfabric's providers. */
	pthread_mutex_lock(&first_getinfo_mu);
	bool first = !first_getinfo_done;
	if (first)
		xprt_fastinit_begin();
	rc = fi_getinfo(FI_VERSION(1, 17), n, s, flags, hints, &x->info);
	if (first) {
		xprt_fastinit_end();
		first_getinfo_done = true;
	}
	pthread_mutex_unlock(&first_getinfo_mu);
	rc = rc ? xprt_fi_err(rc) : 0;
	if (rc == -ENODATA || rc == -ENOENT)
		rc = -ENODEV;
out:
	fi_freeinfo(hints);
	return rc;
}

static int open_endpoint(xprt_t *x)
{
	struct fi_info *fi = x->info;
	int rc = fi_fabric(fi->fabric_attr, &x->fabric, NULL);
	if (!rc)
		rc = fi_domain(x->fabric, fi, &x->domain, NULL);
	if (rc)
		return xprt_fi_err(rc);
	struct fi_cq_attr cqa = {
	        .format = FI_CQ_FORMAT_TAGGED,
	        .wait_obj = x->kind == XPRT_SHM ? FI_WAIT_NONE : FI_WAIT_UNSPEC,
	        .size = 4096,
	};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	rc = fi_cq_open(x->domain, &cqa, &x->cq, NULL);
	if (!rc)
		rc = fi_av_open(x->domain, &ava, &x->av, NULL);
	if (!rc)
		rc = fi_endpoint(x->domain, fi, &x->ep, NULL);
	/* shm names the endpoint "<src_addr>:<uid>:<per-process index>" unless given a bare name.
	 * We give "<stable name>~<random tag>": the stable part is the address peers know, the tag
	 * makes each incarnation a new libfabric peer (see shm_doorbell.h for why). */
	if (!rc && x->kind == XPRT_SHM)
		rc = fi_setname(&x->ep->fid, x->shm_epname, strlen(x->shm_epname) + 1);
	if (!rc)
		rc = fi_ep_bind(x->ep, &x->av->fid, 0);
	if (!rc)
		rc = fi_ep_bind(x->ep, &x->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!rc)
		rc = fi_enable(x->ep);
	if (rc)
		return xprt_fi_err(rc);
	x->inject_size = fi->tx_attr->inject_size;
	x->mr_mode = fi->domain_attr->mr_mode;

	size_t len = sizeof x->self_raw;
	rc = fi_getname(&x->ep->fid, x->self_raw, &len);
	if (rc)
		return xprt_fi_err(rc);
	if (x->kind == XPRT_SHM)
		len = strnlen((char *)x->self_raw, len) + 1;
	x->self_rawlen = len;
	return xprt_format_addr(x->kind, x->self_raw, len, x->self_addr, sizeof x->self_addr);
}

/* The libfabric endpoint, its receive buffers and progress thread (xprt_ofi_ensure). */
static int ofi_open(xprt_t *x, const struct xprt_opts *o)
{
	int rc = xprt_fi_load();
	if (!rc)
		rc = get_info(x, o, x->shm_name, sizeof x->shm_name);
	if (!rc)
		rc = open_endpoint(x);
	if (!rc && x->kind == XPRT_SHM)
		rc = xprt_shm_open_doorbell(x);
	if (!rc)
		rc = xprt_grow_bufs(x, x->nbufs_base);
	if (!rc)
		rc = xprt_progress_start(x);
	return rc;
}

/* Everything of an xprt_t but the endpoint. */
static void init_state(xprt_t *x, const struct xprt_opts *o)
{
	snprintf(x->proto, sizeof x->proto, "%s", xprt_kind_name(x->kind));
	x->is_server = o->is_server;
	x->nworkers = o->nworkers ? o->nworkers : 4;
	pthread_mutex_init(&x->ofi_mu, NULL);
	pthread_mutex_init(&x->peer_mu, NULL);
	pthread_mutex_init(&x->call_mu, NULL);
	pthread_mutex_init(&x->cq_mu, NULL);
	pthread_mutex_init(&x->send_mu, NULL);
	pthread_mutex_init(&x->bufs_mu, NULL);
	pthread_mutex_init(&x->q_mu, NULL);
	pthread_cond_init(&x->q_cv, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&x->park_cv, &ca);
	pthread_condattr_destroy(&ca);
	/* Off by default: with it on, a clean-clone CI run lost a tcp reply under MPI (an HDF5
	 * collective write: "no reply within 5000 ms"); CHFS_XPRT_CALLER_PROGRESS=1 turns it on. */
	const char *cp = getenv("CHFS_XPRT_CALLER_PROGRESS");
	x->caller_progress = !x->is_server && cp && strcmp(cp, "1") == 0;
	atomic_init(&x->next_id, 1);
	atomic_init(&x->next_key, 1);
	x->nbufs_base = x->is_server ? XPRT_NBUFS_SERVER : XPRT_NBUFS_CLIENT;
	if (o->host && snprintf(x->ofi_host, sizeof x->ofi_host, "%s", o->host) < (int)sizeof x->ofi_host)
		x->ofi_has_host = true;
}

int xprt_ofi_ensure(xprt_t *x)
{
	if (atomic_load(&x->ofi_open))
		return 0;
	pthread_mutex_lock(&x->ofi_mu);
	if (!x->ofi_tried) {
		struct xprt_opts o = {.proto = x->proto,
		                      .host = x->ofi_has_host ? x->ofi_host : NULL,
		                      .is_server = x->is_server};
		x->ofi_tried = true;
		x->ofi_rc = ofi_open(x, &o);
		if (x->ofi_rc == 0)
			atomic_store(&x->ofi_open, true);
	}
	int rc = x->ofi_rc;
	pthread_mutex_unlock(&x->ofi_mu);
	return rc;
}

/* CHFS_XPRT_LOCAL: 1 (the default) = a client uses node-local sockets where servers publish
 * them; 0 = libfabric for every server. */
static int local_option(bool *on)
{
	const char *e = getenv("CHFS_XPRT_LOCAL");
	*on = !e || strcmp(e, "0") != 0;
	if (e && *e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0) {
		fprintf(stderr, "chfs: CHFS_XPRT_LOCAL=%s: expected 0 or 1\n", e);
		return -EINVAL;
	}
	return 0;
}

int xprt_open(const struct xprt_opts *o, xprt_t **out)
{
	if (!o || !out)
		return -EINVAL;
	xprt_t *x = calloc(1, sizeof *x);
	if (!x)
		return -ENOMEM;
	int rc = xprt_parse_proto(o->proto, &x->kind);
	if (rc == 0 && !o->is_server)
		rc = local_option(&x->local_on);
	if (rc < 0) {
		free(x);
		return rc;
	}
	init_state(x, o);
	rc = x->local_on ? 0 : xprt_ofi_ensure(x);
	if (rc) {
		xprt_close(x);
		return rc;
	}
	*out = x;
	return 0;
}

void xprt_close(xprt_t *x)
{
	if (!x)
		return;
	xprt_local_stop(x);
	xprt_workers_stop(x);
	xprt_progress_stop(x);
	if (x->ep)
		fi_close(&x->ep->fid);
	if (x->av)
		fi_close(&x->av->fid);
	if (x->cq)
		fi_close(&x->cq->fid);
	if (x->domain)
		fi_close(&x->domain->fid);
	if (x->fabric)
		fi_close(&x->fabric->fid);
	if (x->self_db)
		shm_doorbell_destroy(x->self_db, x->shm_name);
	for (int i = 0; i < x->nbufs; i++)
		free(x->bufs[i]);
	free(x->bufs);
	xprt_sends_free(x);
	xprt_local_free(x);
	xprt_peers_free(x);
	fi_freeinfo(x->info);
	free(x->workers);
	free(x);
}

void xprt_abandon_after_fork(xprt_t *x)
{
	/* The parent still owns the endpoint, files and threads; the child keeps its hands off and
	 * leaks the bookkeeping (threads do not exist in the child, locks may be held); only the
	 * descriptors of local connections are closed, so the servers see the parent alone. */
	xprt_local_after_fork(x);
}

size_t xprt_max_msg(const xprt_t *x)
{
	(void)x;
	return XPRT_MAX_BODY;
}

void xprt_get_stats(const xprt_t *x, struct xprt_stats *s)
{
	s->calls = x->st.calls;
	s->requests = x->st.requests;
	s->replies = x->st.replies;
	s->rma_reads = x->st.rma_reads;
	s->rma_writes = x->st.rma_writes;
	s->rma_bytes = x->st.rma_bytes;
	s->timeouts = x->st.timeouts;
	s->wakeups = x->st.wakeups;
	s->refused = x->st.refused;
	s->peers = x->st.peers;
	s->local_peers = x->st.local_peers;
}
