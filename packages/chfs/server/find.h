/*
 * find.h — WOP_FIND: the entries this server owns below a start path that match a predicate,
 * one page per call (see find.c).
 */
#ifndef CHFSD_FIND_H
#define CHFSD_FIND_H

#include "storage.h"
#include "wire.h"

/* Answer a validated WOP_FIND request q into e (reply body); 0 or -errno. */
int find_handle(struct storage *st, const struct wire_req *q, struct wenc *e);

#endif
