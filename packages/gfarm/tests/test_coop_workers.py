"""gfccd serves its node's processes while peers stall it (issue 15, item 1: worker pool).

A peer whose reader stops reading (a stopped process, a full link) holds the gfccd worker that
sends it a reply for up to gfccd's 5 s I/O timeout. With one pool of 8 workers shared by local
and peer requests, a few such connections left the node's own processes waiting: their requests
timed out (1 s), they bypassed their gfccd for 10 s and read from gfsd. stall_peer.py opens 16
authenticated connections to c1's gfccd and asks each for 8 MiB it never reads; c1's own reads
and `gfccd stat` must still be answered at once. Cluster id 88 (moved by
$GFARM_TEST_CLUSTER_ID_OFFSET, see gfcluster.py).
"""
import os
import subprocess
import sys
import time

import pytest

from gfcluster import GfarmCluster, pages

pytestmark = [pytest.mark.netns, pytest.mark.timeout(300)]

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    c = GfarmCluster(clients=2, cluster_id=88, state_dir=str(tmp_path_factory.mktemp("gfw")))
    try:
        yield c
    finally:
        c.close()


def timed(fn):
    t0 = time.monotonic()
    result = fn()
    return result, time.monotonic() - t0


def test_a_peer_that_stops_reading_does_not_delay_local_requests(cluster, tmp_path):
    size = 16 * MIB
    data = os.urandom(size)
    (tmp_path / "big").write_bytes(data)
    cluster.put("c1", str(tmp_path / "big"), "/stall")  # c1's cache holds all of it
    sock = str(tmp_path / "stall.sock")
    peer = subprocess.Popen(
        ["ip", "netns", "exec", os.path.basename(cluster.netns("c2")), sys.executable,
         os.path.join(HERE, "stall_peer.py"), sock,
         os.path.join(cluster.dir, "etc", "cache.secret"), cluster.stat("c1")["endpoint"],
         "16", str(8 * MIB)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert peer.stdout.readline().strip() == "ready"
        # c2 reads the file through stall_peer's socket: it learns the file's cache key
        cluster.run("c2", ["env", f"GFARM_COOP_CACHE_SOCKET={sock}", "GFARM_COOP_CACHE_PEERS=0",
                           "gfexport", "/stall"], stdout=subprocess.DEVNULL)
        before = cluster.stat("c1")
        peer.stdin.write("go\n")
        peer.stdin.flush()
        assert peer.stdout.readline().strip() == "stalled"
        time.sleep(0.5)  # c1's gfccd is now sending 16 replies of 8 MiB nobody reads
        got, read_s = timed(lambda: cluster.get("c1", "/stall"))
        after, stat_s = timed(lambda: cluster.stat("c1"))
        print(f"with a stalled peer: local 16 MiB read {read_s:.2f} s, gfccd stat {stat_s:.2f} s")
        assert got == data
        # every page came from c1's own cache: no local request timed out into a bypass
        assert after["local_hit"] - before["local_hit"] == pages(size)
        assert after["gfsd_pages"] == before["gfsd_pages"]
        assert stat_s < 2.0, f"gfccd stat took {stat_s:.2f} s"
        assert read_s < 3.0, f"the local read took {read_s:.2f} s"
    finally:
        peer.stdin.close()
        peer.wait(timeout=30)
    assert cluster.get("c2", "/stall") == data  # the holder serves peers again
