/*
 * inode.h — the inode records of hard-linked files (WOP_INODE_*; see inode.c).
 */
#ifndef CHFSD_INODE_H
#define CHFSD_INODE_H

#include "wire.h"

struct chfsd;

/* 1 if op is one of the WOP_INODE_* requests. */
int inode_op(unsigned op);
/* The request's key (wire_inode_key of its file id) into key (WIRE_INODE_KEY_LEN + 1 bytes):
 * what the rebalance takes before the request runs. */
void inode_req_key(const struct wire_req *q, char *key);
/* Answer a validated WOP_INODE_* request q into e (reply body); 0 or -errno. */
int inode_handle(struct chfsd *d, const struct wire_req *q, struct wenc *e);

#endif
