/*
 * xprt_mem.c — memory regions a peer may read or write by RMA.
 *
 * Keys are requested by us (tcp and shm in 1.17 do not choose them) and must be unique within the
 * domain, so they come from a per-xprt counter; with FI_MR_PROV_KEY the provider's key is used.
 * The descriptor's addr is always the buffer's virtual address: a server that reaches the
 * client over its node-local socket copies from there (process_vm_readv), and a provider
 * without FI_MR_VIRT_ADDR (tcp addresses RMA by offset into the region) makes the server ignore
 * it (xprt_serve.c). Registration on tcp and shm is a table insert, not pinning, so no
 * registration cache is kept. A client whose libfabric endpoint is not open (every server
 * local so far, xprt_local.c) registers nothing with libfabric: key 0, usable by local servers
 * only — its peers are all connected before any I/O, so a later remote peer opens the
 * endpoint before the next registration.
 */
#include "xprt_internal.h"

#include <errno.h>
#include <stdlib.h>

struct xprt_mem {
	struct fid_mr *mr;
};

int xprt_mem_register(xprt_t *x, void *buf, size_t len, int access, xprt_mem_t **mrp,
                      struct xprt_rma_desc *desc)
{
	if (!x || !buf || !len || !mrp || !desc || !(access & (XPRT_MEM_REMOTE_READ | XPRT_MEM_REMOTE_WRITE)))
		return -EINVAL;
	xprt_mem_t *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	desc->addr = (uint64_t)(uintptr_t)buf;
	desc->len = len;
	if (!atomic_load(&x->ofi_open)) {
		desc->key = 0;
		*mrp = m;
		return 0;
	}
	uint64_t acc = 0;
	if (access & XPRT_MEM_REMOTE_READ)
		acc |= FI_REMOTE_READ;
	if (access & XPRT_MEM_REMOTE_WRITE)
		acc |= FI_REMOTE_WRITE;
	int rc = fi_mr_reg(x->domain, buf, len, acc, 0, atomic_fetch_add(&x->next_key, 1), 0, &m->mr, NULL);
	if (!rc && (x->mr_mode & FI_MR_ENDPOINT)) {
		rc = fi_mr_bind(m->mr, &x->ep->fid, 0);
		if (!rc)
			rc = fi_mr_enable(m->mr);
	}
	if (rc) {
		if (m->mr)
			fi_close(&m->mr->fid);
		free(m);
		return xprt_fi_err(rc);
	}
	desc->key = fi_mr_key(m->mr);
	*mrp = m;
	return 0;
}

void xprt_mem_deregister(xprt_mem_t *m)
{
	if (!m)
		return;
	if (m->mr)
		fi_close(&m->mr->fid);
	free(m);
}
