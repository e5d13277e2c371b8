/*
 * test_placement.c — the hash, server ordering and chunk placement: deterministic, spread
 * evenly, independent of the order servers joined, and chunks striped round-robin.
 */
#include "check.h"
#include "placement.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
	/* Fixed values guard against accidental changes (clients and servers must agree, and
	 * tests/chfsutil.py mirrors this function). */
	CHECK_EQ(chfs_hash_str(""), chfs_hash("", 0));
	CHECK(chfs_hash_str("a12") != chfs_hash_str("a21")); /* koyama_hash would collide */
	CHECK(chfs_hash_str("abc") == chfs_hash_str("abc"));

	/* Owners of 40000 paths over 4 servers: each gets 25% +- 2%. */
	unsigned count[4] = {0};
	char p[64];
	for (int i = 0; i < 40000; i++) {
		snprintf(p, sizeof p, "dir/file%05d", i);
		count[placement_owner(p, 4)]++;
	}
	for (int s = 0; s < 4; s++)
		CHECK(count[s] > 9200 && count[s] < 10800);

	/* Chunk i of a file whose first server is f lives on (f + i) mod n. */
	CHECK_EQ(placement_chunk_server(3, 0, 4), 3u);
	CHECK_EQ(placement_chunk_server(3, 1, 4), 0u);
	CHECK_EQ(placement_chunk_server(3, 6, 4), 1u);
	CHECK_EQ(placement_chunk_server(0, 1ull << 40, 3), (unsigned)((1ull << 40) % 3));

	/* Server order depends only on the names, not on the join order. */
	char *a[] = {"tcp://10.0.0.1:1", "tcp://10.0.0.2:1", "tcp://10.0.0.3:1", "tcp://10.0.0.4:1"};
	char *b[] = {"tcp://10.0.0.4:1", "tcp://10.0.0.2:1", "tcp://10.0.0.1:1", "tcp://10.0.0.3:1"};
	placement_sort_servers(a, 4);
	placement_sort_servers(b, 4);
	for (int i = 0; i < 4; i++)
		CHECK(strcmp(a[i], b[i]) == 0);
	for (int i = 1; i < 4; i++)
		CHECK(chfs_hash_str(a[i - 1]) <= chfs_hash_str(a[i]));
	CHECK_EQ(placement_owner("x", 0), 0u);
	return check_result("test_placement");
}
