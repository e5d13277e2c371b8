/*
 * raw_pingpong.c — the reference for xprt-bench: a 64-byte ping-pong written directly on
 * libfabric, with no RPC layer, between this process and a forked echo child.
 *
 * Same provider set-up as the transport (FI_EP_RDM, untagged fi_send/fi_recv, AV table) and
 * the waiting that measured fastest per provider in ../shared/reference/libfabric-1.17-facts.md:
 * tcp blocks in fi_cq_sread (FI_WAIT_UNSPEC), shm busy-polls fi_cq_read (it has no wait object).
 * The client's first message carries its address; the child inserts it and then echoes every
 * message back unchanged. `window` messages are kept in flight: each reply sends the next one.
 * The figures are what one thread on each side can do with nothing but the provider in between.
 */
#include "raw_pingpong.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define MSG 64
#define NRECV 64
#define NSEND 64

struct raw_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	int busy_poll;
	struct fi_context2 rctx[NRECV];
	char rbuf[NRECV][256];
	struct fi_context2 sctx[NSEND];
	char sbuf[NSEND][MSG];
	unsigned snext;
};

static int raw_open(struct raw_ep *r, const char *proto)
{
	int shm = strcmp(proto, "shm") == 0;
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -ENOMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->fabric_attr->prov_name = strdup(shm ? "shm" : "tcp;ofi_rxm");
	hints->addr_format = shm ? FI_ADDR_STR : FI_SOCKADDR_IN;
	int rc = shm ? fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info)
	             : fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &r->info);
	fi_freeinfo(hints);
	if (rc)
		return rc;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_MSG, .wait_obj = shm ? FI_WAIT_NONE : FI_WAIT_UNSPEC};
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	r->busy_poll = shm;
	if ((rc = fi_fabric(r->info->fabric_attr, &r->fabric, NULL)) ||
	    (rc = fi_domain(r->fabric, r->info, &r->domain, NULL)) ||
	    (rc = fi_cq_open(r->domain, &ca, &r->cq, NULL)) ||
	    (rc = fi_av_open(r->domain, &aa, &r->av, NULL)) ||
	    (rc = fi_endpoint(r->domain, r->info, &r->ep, NULL)) ||
	    (rc = fi_ep_bind(r->ep, &r->av->fid, 0)) ||
	    (rc = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV)) || (rc = fi_enable(r->ep)))
		return rc;
	for (int i = 0; i < NRECV; i++)
		if ((rc = (int)fi_recv(r->ep, r->rbuf[i], sizeof r->rbuf[i], NULL, FI_ADDR_UNSPEC,
		                       &r->rctx[i])))
			return rc;
	return 0;
}

static void raw_close(struct raw_ep *r)
{
	if (r->ep)
		fi_close(&r->ep->fid);
	if (r->av)
		fi_close(&r->av->fid);
	if (r->cq)
		fi_close(&r->cq->fid);
	if (r->domain)
		fi_close(&r->domain->fid);
	if (r->fabric)
		fi_close(&r->fabric->fid);
	if (r->info)
		fi_freeinfo(r->info);
}

/* Send len bytes of msg to dest; the copy lives in a ring slot until long after completion. */
static int raw_send(struct raw_ep *r, const void *msg, size_t len, fi_addr_t dest)
{
	unsigned i = r->snext++ % NSEND;
	memcpy(r->sbuf[i], msg, len);
	for (;;) {
		ssize_t rc = fi_send(r->ep, r->sbuf[i], len, NULL, dest, &r->sctx[i]);
		if (rc != -FI_EAGAIN)
			return (int)rc;
		struct fi_cq_entry e;
		fi_cq_read(r->cq, &e, 1); /* make room: progress */
	}
}

/* One completion; returns the index of a receive buffer, -1 for a send, -2 on error/timeout. */
static int raw_next(struct raw_ep *r, size_t *len)
{
	struct fi_cq_msg_entry e;
	for (;;) {
		ssize_t n = r->busy_poll ? fi_cq_read(r->cq, &e, 1) : fi_cq_sread(r->cq, &e, 1, NULL, 2000);
		if (n == 1) {
			char *c = e.op_context;
			if (c >= (char *)r->rctx && c < (char *)(r->rctx + NRECV)) {
				*len = e.len;
				return (int)((struct fi_context2 *)c - r->rctx);
			}
			return -1;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(r->cq, &err, 0);
			return -2;
		}
		if (n != -FI_EAGAIN)
			return -2;
		if (!r->busy_poll)
			return -2; /* sread timed out: the peer is gone */
	}
}

static int raw_repost(struct raw_ep *r, int i)
{
	return (int)fi_recv(r->ep, r->rbuf[i], sizeof r->rbuf[i], NULL, FI_ADDR_UNSPEC, &r->rctx[i]);
}

static void child(const char *proto, int fd)
{
	struct raw_ep *r = calloc(1, sizeof *r);
	char name[256];
	size_t namelen = sizeof name;
	if (!r || raw_open(r, proto) || fi_getname(&r->ep->fid, name, &namelen))
		_exit(1);
	if (write(fd, &namelen, sizeof namelen) != sizeof namelen ||
	    write(fd, name, namelen) != (ssize_t)namelen)
		_exit(1);
	close(fd);
	fi_addr_t client = FI_ADDR_NOTAVAIL;
	for (;;) {
		size_t len;
		int i = raw_next(r, &len);
		if (i == -1 || (i == -2 && !r->busy_poll))
			continue;
		if (i < 0)
			_exit(1);
		if (client == FI_ADDR_NOTAVAIL) { /* the first message: the client's address */
			if (fi_av_insert(r->av, r->rbuf[i], 1, &client, 0, NULL) != 1)
				_exit(1);
		} else if (raw_send(r, r->rbuf[i], len, client)) {
			_exit(1);
		}
		if (raw_repost(r, i))
			_exit(1);
	}
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

int raw_pingpong(const char *proto, const int *windows, int nwin, double secs, struct raw_result *out)
{
	int fds[2];
	if (pipe(fds))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		child(proto, fds[1]);
		_exit(0);
	}
	close(fds[1]);
	char srv[256];
	size_t srvlen = 0;
	int rc = -EIO;
	struct raw_ep *r = calloc(1, sizeof *r);
	fi_addr_t dest;
	char name[256];
	size_t namelen = sizeof name;
	float *us = malloc(sizeof(float) * 2000000);
	if (read(fds[0], &srvlen, sizeof srvlen) != sizeof srvlen || srvlen > sizeof srv ||
	    read(fds[0], srv, srvlen) != (ssize_t)srvlen || !r || !us || raw_open(r, proto) ||
	    fi_getname(&r->ep->fid, name, &namelen) || fi_av_insert(r->av, srv, 1, &dest, 0, NULL) != 1 ||
	    raw_send(r, name, namelen, dest))
		goto out;
	for (int w = 0; w < nwin; w++) {
		int win = windows[w];
		double sent_at[NSEND];
		char msg[MSG];
		memset(msg, 0x5a, sizeof msg);
		long done = 0, nus = 0, cap = 2000000;
		double t0 = now_us(), end = t0 + secs * 1e6;
		for (int k = 0; k < win; k++) {
			memcpy(msg, &k, sizeof k);
			sent_at[k] = now_us();
			if (raw_send(r, msg, MSG, dest))
				goto out;
		}
		int outstanding = win;
		while (outstanding > 0) {
			size_t len;
			int i = raw_next(r, &len);
			if (i == -1)
				continue;
			if (i < 0)
				goto out;
			int k;
			memcpy(&k, r->rbuf[i], sizeof k);
			double t = now_us();
			if (k >= 0 && k < win && nus < cap)
				us[nus++] = (float)(t - sent_at[k]);
			done++;
			outstanding--;
			if (raw_repost(r, i))
				goto out;
			if (t < end && k >= 0 && k < win) {
				memcpy(msg, &k, sizeof k);
				sent_at[k] = now_us();
				if (raw_send(r, msg, MSG, dest))
					goto out;
				outstanding++;
			}
		}
		double dt = (now_us() - t0) / 1e6;
		qsort(us, (size_t)nus, sizeof *us, cmp_f);
		out[w] = (struct raw_result){.window = win,
		                             .median_us = nus ? us[nus / 2] : 0,
		                             .p90_us = nus ? us[nus * 9 / 10] : 0,
		                             .calls_per_s = done / dt};
	}
	rc = 0;
out:
	close(fds[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (r)
		raw_close(r);
	free(r);
	free(us);
	return rc;
}
