/*
 * xprt_mem.c — memory regions a peer may read or write by RMA.
 *
 * Keys are requested by us (tcp and shm in 1.17 do not choose them) and must be unique within the
 * domain, so they come from a per-xprt counter; with FI_MR_PROV_KEY the provider's key is used.
 * The descriptor's addr is the buffer's virtual address when the provider wants FI_MR_VIRT_ADDR
 * (shm) and 0 otherwise (tcp addresses RMA by offset into the region). Registration on tcp and
 * shm is a table insert, not pinning, so no registration cache is kept.
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
	desc->addr = (x->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	desc->key = fi_mr_key(m->mr);
	desc->len = len;
	*mrp = m;
	return 0;
}

void xprt_mem_deregister(xprt_mem_t *m)
{
	if (!m)
		return;
	fi_close(&m->mr->fid);
	free(m);
}
