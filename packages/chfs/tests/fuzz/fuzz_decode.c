/*
 * fuzz_decode.c — libFuzzer target for the request decoder that every chfsd worker runs on
 * untrusted bytes: wire_decode_req() must reject or accept any input without reading out of
 * bounds, and what it accepts must satisfy the invariants handlers rely on (canonical paths,
 * segment totals, RMA ranges inside the descriptor). Built by run-fuzz with clang
 * -fsanitize=fuzzer,address,undefined.
 */
#include "path.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

static struct wire_req req;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (wire_decode_req(data, size, &req) != 0)
		return 0;
	unsigned op = req.h.op;
	if (op == WOP_STAT || op == WOP_STAT_OPEN || op == WOP_CREATE || op == WOP_UNLINK ||
	    op == WOP_RENAME || op == WOP_MKDIR || op == WOP_READDIR || op == WOP_SETATTR ||
	    op == WOP_META_SETTLE) {
		if (path_check_canonical(req.path, strlen(req.path), 1) != 0)
			abort();
	}
	if (op == WOP_RELINK_OWED &&
	    (!wire_addr_ok(req.addr, strlen(req.addr)) || (req.id[0] && !wire_id_ok(req.id, strlen(req.id)))))
		abort();
	if (op == WOP_LEASE_RENEW) { /* every item validated, and exactly items_len of them */
		struct wdec d;
		uint64_t id;
		uint32_t closes;
		wdec_init(&d, req.items, req.items_len);
		for (uint32_t i = 0; i < req.nitems; i++)
			if (wire_lease_item_get(&d, &id, &closes) != 0)
				abort();
		if (req.nitems > WIRE_LEASE_MAX || wdec_finish(&d) != 0)
			abort();
	}
	if (op == WOP_WRITE_REPORT && path_check_canonical(req.path2, strlen(req.path2), 0) != 0)
		abort();
	if (op == WOP_WRITE_REPORT && req.size > WIRE_MAX_OFFSET)
		abort();
	if (op == WOP_WRITE || op == WOP_READ || op == WOP_WRITE_REPORT) {
		uint64_t total = 0;
		for (uint32_t i = 0; i < req.nseg; i++) {
			total += req.seg[i].len;
			if (req.has_rma && req.seg[i].bufoff + req.seg[i].len > req.rma.len)
				abort();
		}
		if (total != req.seg_total || req.nseg == 0 || req.nseg > WIRE_MAX_SEGS)
			abort();
		if (op != WOP_READ && !req.has_rma && req.data_len != total)
			abort();
		if (req.data && (req.data < data || req.data + req.data_len > data + size))
			abort();
	}
	if (op == WOP_STAGE_ENTRIES || op == WOP_STAGE_FILES) {
		/* The handler reads the items back without checking: each must decode, in bounds. */
		static struct wire_stage_file f;
		struct wdec d;
		if (req.items < data || req.items + req.items_len > data + size || req.nitems == 0 ||
		    req.nitems > WIRE_STAGE_MAX)
			abort();
		wdec_init(&d, req.items, req.items_len);
		for (uint32_t i = 0; i < req.nitems; i++) {
			int rc = op == WOP_STAGE_FILES ? wire_stage_file_get(&d, &f)
			                               : wire_stage_path_get(&d, f.path);
			if (rc != 0 || path_check_canonical(f.path, strlen(f.path), 0) != 0)
				abort();
			if (op == WOP_STAGE_FILES && !(f.tag.flags & MD_BACKEND))
				abort();
		}
		if (d.pos != d.len)
			abort();
	}
	return 0;
}
