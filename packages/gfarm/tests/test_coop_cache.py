"""Cooperative cache of the patched Gfarm, on a real cluster in network namespaces.

One gfmd (none backend), one gfsd and three client nodes, each with its gfccd node cache
(packages/gfarm/gfarm-cluster). Files are written with gfreg and read with gfexport, the
stock Gfarm tools, through the patched libgfarm. Counters come from `gfccd stat`.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from gfcluster import GfarmCluster, pages

pytestmark = [pytest.mark.netns, pytest.mark.timeout(300)]

SIZE = 3 * 1024 * 1024 + 12345  # not a whole number of pages: exercises the EOF page


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    c = GfarmCluster(clients=3, cluster_id=78, state_dir=str(tmp_path_factory.mktemp("gfc")))
    try:
        yield c
    finally:
        c.close()


def random_file(tmp_path, name, size=SIZE):
    path = tmp_path / name
    data = os.urandom(size)
    path.write_bytes(data)
    return str(path), data


def delta(after, before, key):
    return after[key] - before[key]


def test_peer_read_is_byte_identical_to_the_file(cluster, tmp_path):
    local, data = random_file(tmp_path, "w1")
    cluster.put("c1", local, "/peer1")  # c1 keeps what it wrote, as generation g
    b1, b2 = cluster.stat("c1"), cluster.stat("c2")
    got = cluster.get("c2", "/peer1")
    a1, a2 = cluster.stat("c1"), cluster.stat("c2")
    assert got == data
    assert delta(a2, b2, "peer_transferred") == pages(SIZE)  # all of it came from c1
    assert delta(a2, b2, "gfsd_pages") == 0
    assert delta(a1, b1, "served_pages") == pages(SIZE)


def test_counters_a_then_b_shows_peer_transfer_for_b(cluster, tmp_path):
    local, data = random_file(tmp_path, "w2")
    cluster.put("c3", local, "/ab", coop=False)  # written without the cache: no holder yet
    b1, b2 = cluster.stat("c1"), cluster.stat("c2")
    assert cluster.get("c1", "/ab") == data  # A: nobody has it, gfsd serves
    a1 = cluster.stat("c1")
    assert delta(a1, b1, "gfsd_pages") == pages(SIZE)
    assert delta(a1, b1, "peer_transferred") == 0
    assert cluster.get("c2", "/ab") == data  # B: gfmd names A, A serves every page
    a1b, a2 = cluster.stat("c1"), cluster.stat("c2")
    assert delta(a2, b2, "peer_requested") == pages(SIZE)
    assert delta(a2, b2, "peer_transferred") == pages(SIZE)
    assert delta(a2, b2, "gfsd_pages") == 0
    assert delta(a1b, a1, "served_pages") == pages(SIZE)
    assert a2["peer_hit_rate"] > 0


def test_rewrite_new_generation_serves_no_stale_data(cluster, tmp_path):
    old_local, old = random_file(tmp_path, "old")
    new_local, new = random_file(tmp_path, "new")  # same size: only the generation differs
    cluster.put("c1", old_local, "/rw")
    assert cluster.get("c2", "/rw") == old  # c1 and c2 now both cache the old generation
    assert cluster.get("c2", "/rw") == old
    cluster.put("c3", new_local, "/rw", coop=False)  # rewritten behind every cache's back
    assert cluster.get("c2", "/rw") == new
    assert cluster.get("c1", "/rw") == new
    cluster.put("c1", old_local, "/rw")  # and rewritten again by a caching client
    assert cluster.get("c3", "/rw") == old
    assert cluster.get("c2", "/rw") == old


def test_evicted_peer_falls_back_to_gfsd(cluster, tmp_path):
    local, data = random_file(tmp_path, "ev")
    cluster.put("c1", local, "/evicted")
    cluster.run("c1", ["gfccd", "drop", "--socket", cluster.socket("c1")])
    b2 = cluster.stat("c2")
    assert cluster.get("c2", "/evicted") == data
    a2 = cluster.stat("c2")
    assert delta(a2, b2, "peer_transferred") == 0
    assert delta(a2, b2, "peer_requested") > 0  # c1 was asked and had nothing
    assert delta(a2, b2, "gfsd_pages") == pages(SIZE)


def test_hung_or_dead_peer_read_succeeds_from_gfsd_within_timeout(cluster, tmp_path):
    local, data = random_file(tmp_path, "dead")
    cluster.put("c3", local, "/dead")
    pid = cluster.daemon_pid("c3")
    timeout_ms = 500
    chunks = -(-SIZE // (1024 * 1024))  # gfexport reads 1 MiB at a time
    os.kill(pid, signal.SIGSTOP)  # hung: accepts connections, never answers
    try:
        t0 = time.monotonic()
        got = cluster.get("c2", "/dead", env=[f"GFARM_COOP_CACHE_TIMEOUT_MS={timeout_ms}"],
                          timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert got == data
    assert elapsed < chunks * timeout_ms / 1000 * 2 + 5, elapsed
    cluster.run("c2", ["gfccd", "drop", "--socket", cluster.socket("c2")])
    os.kill(pid, signal.SIGKILL)  # dead: connection refused
    t0 = time.monotonic()
    assert cluster.get("c2", "/dead", timeout=60) == data
    assert time.monotonic() - t0 < 10


PEER_PROBE = r"""
import os, socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
hdr = struct.Struct("!IIQQQII")
s.sendall(hdr.pack(0x47464343, 2, 0, 0, 0, 64, 0) + os.urandom(64))  # AUTH, proof without the secret
s.sendall(hdr.pack(0x47464343, 3, int(sys.argv[2]), int(sys.argv[3]), 0, 4096, 0))  # GET
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
print(len(data))
"""


def test_peer_without_the_cache_secret_gets_no_data(cluster, tmp_path):
    local, _ = random_file(tmp_path, "sec")
    cluster.put("c1", local, "/secret")
    st = cluster.run("c1", ["gfstat", "/secret"], stdout=subprocess.PIPE, text=True).stdout
    ino = int(st.split("Inode:")[1].split()[0])
    gen = int(st.split("Gen:")[1].split()[0])
    ep = cluster.stat("c1")["endpoint"]
    out = cluster.run("c2", [sys.executable, "-c", PEER_PROBE, ep, str(ino), str(gen)],
                      stdout=subprocess.PIPE, text=True).stdout
    # at most the challenge (8 + 32 bytes) and the 8-byte EACCES reply to AUTH, never data
    assert int(out.strip()) <= 48


def table(cluster):
    """gfmd's cache management table: {inode: [(gen, endpoint, requested, transferred)]}."""
    out = cluster.run("c1", ["gfcctable"], stdout=subprocess.PIPE, text=True).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("#"):  # the per-holder totals
            continue
        ino, gen, ep, req, tr = line.split()
        rows.setdefault(int(ino), []).append((int(gen), ep, int(req), int(tr)))
    return rows


def inode_gen(cluster, path):
    st = cluster.run("c1", ["gfstat", path], stdout=subprocess.PIPE, text=True).stdout
    return int(st.split("Inode:")[1].split()[0]), int(st.split("Gen:")[1].split()[0])


def test_gfmd_table_tracks_holders_generation_and_unlink(cluster, tmp_path):
    local, data = random_file(tmp_path, "tbl")
    cluster.put("c1", local, "/tbl")
    ino, gen = inode_gen(cluster, "/tbl")
    c1, c2 = cluster.stat("c1")["endpoint"], cluster.stat("c2")["endpoint"]
    assert [(g, ep) for g, ep, _, _ in table(cluster)[ino]] == [(gen, c1)]  # the writer
    assert cluster.get("c2", "/tbl") == data
    rows = table(cluster)[ino]
    assert {ep for _, ep, _, _ in rows} == {c1, c2}  # the reader, once it held every page
    served = [r for r in rows if r[1] == c1][0]
    assert served[2] == served[3] == pages(SIZE)  # c2's report: requested = transferred
    cluster.put("c3", local, "/tbl", coop=False)  # new generation: old holders are stale
    _, gen2 = inode_gen(cluster, "/tbl")
    assert gen2 > gen
    assert cluster.get("c2", "/tbl") == data
    assert all(g == gen2 for g, _, _, _ in table(cluster)[ino])
    cluster.run("c1", ["gfrm", "/tbl"])
    assert ino not in table(cluster)  # unlinked: the entry is gone


def holder_totals(cluster):
    """gfmd's per-holder totals since it started: {endpoint: (requested, transferred)}."""
    out = cluster.run("c1", ["gfcctable"], stdout=subprocess.PIPE, text=True).stdout
    return {f[2]: (int(f[3]), int(f[4])) for f in
            (line.split() for line in out.splitlines() if line.startswith("# holder "))}


def test_a_node_holding_only_a_prefix_is_not_handed_out(cluster, tmp_path):
    """A reader that stopped early caches only the file's first chunk; requesters sent to it
    would find nothing past that (a miss counted at the holder). A node becomes a holder
    only once its cache has the whole file."""
    size = 16 * 1024 * 1024 + 777  # gfexport reads 4 MiB at a time
    local, data = random_file(tmp_path, "prefix", size)
    cluster.put("c3", local, "/prefix", coop=False)  # no holder yet
    ino, _ = inode_gen(cluster, "/prefix")
    c1, c2 = cluster.stat("c1")["endpoint"], cluster.stat("c2")["endpoint"]
    cluster.run("c1", ["sh", "-c", "gfexport /prefix | head -c 4096 >/dev/null"])
    before, b2 = holder_totals(cluster), cluster.stat("c2")
    assert cluster.get("c2", "/prefix") == data
    after, a2 = holder_totals(cluster), cluster.stat("c2")
    asked = delta(a2, b2, "peer_requested")
    assert asked == delta(a2, b2, "peer_transferred"), "a holder was asked for pages it lacks"
    r0, t0 = before.get(c1, (0, 0))
    r1, t1 = after.get(c1, (0, 0))
    assert r1 - r0 == t1 - t0
    assert [ep for _, ep, _, _ in table(cluster)[ino]] == [c2]  # c2 has it all, c1 a prefix
    b1 = cluster.stat("c1")
    assert cluster.get("c1", "/prefix") == data  # its own prefix, then the rest from c2
    a1 = cluster.stat("c1")
    assert delta(a1, b1, "peer_requested") == delta(a1, b1, "peer_transferred") > 0
    assert delta(a1, b1, "gfsd_pages") == 0


def test_bad_timeout_setting_disables_the_cache_with_one_message(cluster, tmp_path):
    local, data = random_file(tmp_path, "badcfg")
    cluster.put("c1", local, "/badcfg")
    before = cluster.stat("c2")
    r = cluster.run("c2", ["env", "GFARM_COOP_CACHE_TIMEOUT_MS=soon", "gfexport", "/badcfg"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.stdout == data  # stock Gfarm read
    assert b"GFARM_COOP_CACHE_TIMEOUT_MS=soon" in r.stderr
    after = cluster.stat("c2")
    assert after["local_requested"] == before["local_requested"]  # the cache was not used
