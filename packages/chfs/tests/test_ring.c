/*
 * test_ring.c — the consistent-hash ring (common/placement.c): balanced load, minimal and
 * one-way key movement when a server joins, and owners that follow a server's identity, not its
 * address.
 */
#include "check.h"
#include "placement.h"
#include "wire.h"

#include <errno.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKEYS 100000
#define MAXN 65

static char ids[MAXN][40];
static const char *idp[MAXN];

static uint64_t key(unsigned k)
{
	char s[32];
	snprintf(s, sizeof s, "dir%u/file%u", k % 97, k);
	return chfs_hash_str(s);
}

static struct ring *build(unsigned n, unsigned vnodes)
{
	struct ring *r = NULL;
	CHECK_EQ(ring_build(idp, n, vnodes, &r), 0);
	return r;
}

int main(void)
{
	/* Server ids as chfsd makes them: 32 hex digits of randomness (fixed here). */
	srand(19);
	for (unsigned m = 0; m < MAXN; m++) {
		for (int i = 0; i < 32; i++)
			ids[m][i] = "0123456789abcdef"[rand() % 16];
		ids[m][32] = '\0';
		idp[m] = ids[m];
	}
	unsigned *owner = malloc(NKEYS * sizeof *owner);
	double worst_load = 0, worst_move = 0;
	for (unsigned n = 1; n < MAXN; n++) {
		struct ring *r = build(n, RING_VNODES_DEFAULT), *r2 = build(n + 1, RING_VNODES_DEFAULT);
		unsigned count[MAXN] = {0}, moved = 0, wrong = 0;
		for (unsigned k = 0; k < NKEYS; k++) {
			owner[k] = ring_owner(r, key(k));
			count[owner[k]]++;
			unsigned o2 = ring_owner(r2, key(k));
			if (o2 != owner[k]) {
				moved++;
				wrong += o2 != n; /* a moved key may only go to the new server */
			}
		}
		unsigned max = 0;
		for (unsigned m = 0; m < n; m++)
			max = count[m] > max ? count[m] : max;
		double load = max / ((double)NKEYS / n), ideal = (double)NKEYS / (n + 1);
		double move = moved / ideal;
		if (load > 1.15 || wrong || move < 0.75 || move > 1.25)
			fprintf(stderr,
			        "n=%u: max/mean %.3f, %u moved (ideal %.0f), %u between old servers\n", n,
			        load, moved, ideal, wrong);
		CHECK(load <= 1.15);
		CHECK_EQ(wrong, 0u);
		CHECK(move >= 0.75 && move <= 1.25);
		worst_load = load > worst_load ? load : worst_load;
		worst_move = abs((int)(move * 1000) - 1000) / 1000.0 > worst_move
		                     ? abs((int)(move * 1000) - 1000) / 1000.0
		                     : worst_move;
		ring_free(r);
		ring_free(r2);
	}
	printf("ring, 64 vnodes, 1..64 servers, %d keys: worst max/mean load %.3f, worst deviation of "
	       "moved keys from 1/(n+1) %.1f%%\n",
	       NKEYS, worst_load, worst_move * 100);

	/* Stable identity: the same ids with new addresses give the same owners (by id). */
	char la[512], lb[512];
	snprintf(la, sizeof la, "%s=tcp://10.0.0.1:40000,%s=tcp://10.0.0.2:40000,%s=tcp://10.0.0.3:40000",
	         ids[0], ids[1], ids[2]);
	snprintf(lb, sizeof lb, "%s=tcp://10.0.0.3:40000,%s=tcp://10.0.0.1:40000,%s=tcp://10.0.0.9:41234",
	         ids[2], ids[0], ids[1]);
	struct wire_member ma[3], mb[3];
	CHECK_EQ(wire_list_parse(la, strlen(la), ma, 3), 3);
	CHECK_EQ(wire_list_parse(lb, strlen(lb), mb, 3), 3);
	const char *ia[3], *ib[3];
	for (int i = 0; i < 3; i++) {
		ia[i] = ma[i].id;
		ib[i] = mb[i].id;
	}
	struct ring *ra, *rb;
	CHECK_EQ(ring_build(ia, 3, 64, &ra), 0);
	CHECK_EQ(ring_build(ib, 3, 64, &rb), 0);
	unsigned same = 0, seen[3] = {0};
	for (unsigned k = 0; k < 3000; k++) {
		const struct wire_member *a = &ma[ring_owner(ra, key(k))], *b = &mb[ring_owner(rb, key(k))];
		CHECK(strcmp(a->id, b->id) == 0);
		same += strcmp(a->addr, b->addr) == 0;
		seen[b - mb]++;
	}
	/* Keys of ids[1] now resolve to its new address, the others' to unchanged ones. */
	CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
	CHECK_EQ(same, 3000 - seen[2]);
	ring_free(ra);
	ring_free(rb);

	/* Malformed lists are refused; vnodes are bounded. */
	struct ring *bad;
	CHECK_EQ(ring_build(idp, 2, 0, &bad), -EINVAL);
	CHECK_EQ(ring_build(idp, 0, 64, &bad), -EINVAL);
	CHECK_EQ(ring_build(idp, 2, RING_VNODES_MAX + 1, &bad), -EINVAL);
	CHECK(wire_list_parse("tcp://10.0.0.1:1", 16, ma, 3) < 0);     /* no id */
	CHECK(wire_list_parse("xyz=tcp://10.0.0.1:1", 20, ma, 3) < 0); /* id not 32 hex */
	snprintf(la, sizeof la, "%s=tcp://a:1,%s=tcp://b:1", ids[0], ids[0]);
	CHECK(wire_list_parse(la, strlen(la), ma, 3) < 0); /* duplicate id */
	free(owner);
	return check_result("test_ring");
}
