/*
 * test_placement.c — the hash and file placement on top of the ring: deterministic, metadata
 * spread evenly, and a striped file's chunks spread over every server independently of its
 * path (the placement key is fixed at create, so rename never moves data).
 */
#include "check.h"
#include "placement.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
	/* Fixed values guard against accidental changes (clients and servers must agree). */
	CHECK_EQ(chfs_hash_str(""), chfs_hash("", 0));
	CHECK(chfs_hash_str("a12") != chfs_hash_str("a21")); /* koyama_hash would collide */
	CHECK(chfs_hash_str("abc") == chfs_hash_str("abc"));
	CHECK_EQ(chfs_hash_str("abc"), 0x0dd490490804b508ull);

	const char *ids[] = {"00000000000000000000000000000001", "00000000000000000000000000000002",
	                     "00000000000000000000000000000003", "00000000000000000000000000000004"};
	struct ring *r;
	CHECK_EQ(ring_build(ids, 4, RING_VNODES_DEFAULT, &r), 0);
	CHECK_EQ(ring_size(r), 4u);

	/* Owners of 40000 paths over 4 servers: each gets 25% +- 3%. */
	unsigned count[4] = {0}, chunks[4] = {0};
	char p[64];
	for (int i = 0; i < 40000; i++) {
		snprintf(p, sizeof p, "dir/file%05d", i);
		count[placement_owner(r, p)]++;
	}
	for (int s = 0; s < 4; s++)
		CHECK(count[s] > 8800 && count[s] < 11200);

	/* 4000 chunks of one file cover all servers evenly; placement depends on the key only. */
	uint32_t k = placement_new_key("a/file");
	for (uint64_t i = 0; i < 4000; i++)
		chunks[placement_chunk_server(r, k, i)]++;
	for (int s = 0; s < 4; s++)
		CHECK(chunks[s] > 850 && chunks[s] < 1150);
	CHECK_EQ(placement_chunk_server(r, k, 7), placement_chunk_server(r, k, 7));
	CHECK(placement_chunk_key(k, 0) != placement_chunk_key(k, 1));
	/* Chunk 0 of a new file sits with its namespace entry. */
	for (int i = 0; i < 100; i++) {
		snprintf(p, sizeof p, "d/f%d", i);
		CHECK_EQ(placement_owner(r, p), placement_chunk_server(r, placement_new_key(p), 0));
	}
	CHECK(placement_chunk_key(1, 0) != placement_chunk_key(2, 0));

	/* A one-server ring owns everything. */
	struct ring *one;
	CHECK_EQ(ring_build(ids, 1, 1, &one), 0);
	CHECK_EQ(placement_owner(one, "x"), 0u);
	ring_free(one);
	ring_free(r);
	return check_result("test_placement");
}
