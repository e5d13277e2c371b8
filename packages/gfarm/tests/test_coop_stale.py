"""The cooperative cache never serves bytes the file does not hold (issue 15, item 1, data half).

Every check compares what the caching clients read with what gfsd holds, read by a client with
the cache off (`reference`). Writes go through libgfarm's gfs_pio API driven line by line
(gfpio_script.c, so other nodes can read between two writes of one open) and through gfarm2fs
with ordinary Python file writes. Covered: an in-place overwrite that does not start on a page
boundary, readers while a file is open for writing, two writers on one node and on two nodes,
a write the node's gfccd missed (timed out, then bypassed), O_APPEND writes, a write that failed
at c1 although gfsd took it, a gfmd restart (the `none` backend reuses inode numbers and
generations) and two file systems behind one gfccd. Cluster ids 81-83 (test_coop_cache.py uses
78, test_coop_security.py 85 and 87, test_coop_stock_gfmd.py 84, test_coop_workers.py 88; all
moved by $GFARM_TEST_CLUSTER_ID_OFFSET, see gfcluster.py).
"""
import contextlib
import os
import signal
import subprocess
import time

import pytest

from gfcluster import GfarmCluster

pytestmark = [pytest.mark.netns, pytest.mark.timeout(600)]

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
PREFIX = os.environ.get("GFARM_PREFIX", os.path.join(CACHE, "gfarm", "prefix"))
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def script_exe(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("gfpio") / "gfpio_script")
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-O1",
                    "-I", os.path.join(PREFIX, "include"), os.path.join(HERE, "gfpio_script.c"),
                    "-L", os.path.join(PREFIX, "lib"), "-lgfarm", "-o", exe],
                   check=True, timeout=120)
    return exe


def need_root():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    need_root()
    c = GfarmCluster(clients=3, cluster_id=81, state_dir=str(tmp_path_factory.mktemp("gfc")))
    try:
        yield c
    finally:
        c.close()


class Script:
    """gfpio_script on a node: each step returns once libgfarm has done it."""

    def __init__(self, cluster, node, exe, env=()):
        cmd = [cluster_script(cluster), "exec", node, "--", "env", *env, exe]
        self.p = subprocess.Popen(cmd, env=cluster.env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def reply(self):
        return self.p.stdout.readline().strip()

    def __call__(self, line):
        self.send(line)
        reply = self.reply()
        assert reply == "ok", f"{line}: {reply}"

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=60) == 0


def cluster_script(cluster):
    return os.path.join(os.path.dirname(HERE), "gfarm-cluster")


def reference(cluster, path):
    """what gfsd holds: read by a client with the cache off"""
    return cluster.get("c3", path, coop=False)


def assert_every_node_reads(cluster, path, want, nodes=("c1", "c2", "c3")):
    for node in nodes:
        for attempt in (1, 2):  # the second read is served by the node's own cache
            got = cluster.get(node, path)
            assert len(got) == len(want), (node, attempt, len(got), len(want))
            assert got == want, (node, attempt, first_difference(got, want))


def first_difference(a, b):
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at byte {i}: {a[i:i + 8]!r} vs {b[i:i + 8]!r}"


@pytest.mark.parametrize("off", [4, 4094])  # inside page 0; across pages 0 and 1
def test_overwrite_not_on_a_page_boundary_through_gfs_pio(cluster, script_exe, off):
    path = f"/overwrite{off}"
    s = Script(cluster, "c1", script_exe)
    s(f"open 0 {path} trunc")
    s(f"write 0 0 A {2 * MIB}")
    s(f"write 0 {off} B 4")
    s("close 0")
    s.close()
    want = bytearray(b"A" * (2 * MIB))
    want[off:off + 4] = b"BBBB"
    assert reference(cluster, path) == want
    assert_every_node_reads(cluster, path, bytes(want))  # c1 is the writer, c2 and c3 peers


def test_overwrite_not_on_a_page_boundary_through_gfarm2fs(cluster):
    mnt = cluster.mount()
    try:
        with open(os.path.join(mnt["c1"], "fuse_overwrite"), "wb") as f:
            f.write(b"A" * (2 * MIB))
            f.seek(4)
            f.write(b"BBBB")
        want = b"AAAABBBB" + b"A" * (2 * MIB - 8)
        assert reference(cluster, "/fuse_overwrite") == want
        for node in ("c1", "c2", "c3"):
            with open(os.path.join(mnt[node], "fuse_overwrite"), "rb") as f:
                got = f.read()
            assert got == want, (node, first_difference(got, want))
        assert_every_node_reads(cluster, "/fuse_overwrite", want)
    finally:
        cluster.umount()


def test_reads_while_a_file_is_open_for_writing_see_what_gfsd_holds(cluster, script_exe):
    path = "/during"
    s = Script(cluster, "c1", script_exe)
    s(f"open 0 {path} trunc")
    s(f"write 0 0 A {2 * MIB}")
    s("close 0")
    assert_every_node_reads(cluster, path, b"A" * (2 * MIB))  # every node caches A
    s(f"open 1 {path} keep")
    s("write 1 0 B 8192")  # in place, still open: same generation
    want = reference(cluster, path)
    assert want[:8192] == b"B" * 8192
    assert_every_node_reads(cluster, path, want)
    s("write 1 4 C 4")
    want = reference(cluster, path)
    assert want[:12] == b"BBBBCCCCBBBB"
    assert_every_node_reads(cluster, path, want)
    s("close 1")
    s.close()
    assert_every_node_reads(cluster, path, reference(cluster, path))


def test_two_writers_on_one_node_publish_nothing_the_file_does_not_hold(cluster, script_exe):
    path = "/twowriters"
    s = Script(cluster, "c1", script_exe)  # two descriptors of one process: one node
    s(f"open 0 {path} trunc")
    s(f"write 0 0 A {MIB}")
    s(f"open 1 {path} keep")
    s("write 1 8190 B 8")
    s(f"write 0 {MIB} A 4096")
    s("close 0")  # a new generation while descriptor 1 is still writing
    assert_every_node_reads(cluster, path, reference(cluster, path))
    s("write 1 100 C 5000")
    assert_every_node_reads(cluster, path, reference(cluster, path))
    s("close 1")
    s.close()
    want = bytearray(b"A" * (MIB + 4096))
    want[100:5100] = b"C" * 5000
    want[8190:8198] = b"B" * 8
    assert reference(cluster, path) == want
    assert_every_node_reads(cluster, path, bytes(want))


def test_writers_on_two_nodes_publish_nothing_the_file_does_not_hold(cluster, script_exe):
    path = "/twonodes"
    w1, w2 = Script(cluster, "c1", script_exe), Script(cluster, "c2", script_exe)
    w1(f"open 0 {path} trunc")
    w1(f"write 0 0 A {MIB}")
    w2(f"open 0 {path} keep")
    w2("write 0 0 B 4096")
    w1("close 0")  # a new generation while c2 still writes: c1 must not publish A at 0
    assert_every_node_reads(cluster, path, reference(cluster, path))
    w2("write 0 8192 C 100")
    w2("close 0")
    w1.close()
    w2.close()
    want = bytearray(b"A" * MIB)
    want[0:4096] = b"B" * 4096
    want[8192:8292] = b"C" * 100
    assert reference(cluster, path) == want
    assert_every_node_reads(cluster, path, bytes(want))


def test_a_write_its_gfccd_missed_publishes_no_older_staged_page(cluster, script_exe):
    """c1's gfccd misses one staged write (c1 bypasses a gfccd that did not answer in time, for
    10 s): at close, the pages staged before it are no longer the file's and must not be
    published (they were, and every node then read the page as first written)"""
    path = "/missedwrite"
    s = Script(cluster, "c1", script_exe)
    s(f"open 0 {path} trunc")
    s(f"write 0 0 A {MIB}")  # staged in c1's gfccd
    pid = cluster.daemon_pid("c1")
    os.kill(pid, signal.SIGSTOP)  # the next staging request times out (1 s)
    try:
        s(f"write 0 {MIB} C 4096")
    finally:
        os.kill(pid, signal.SIGCONT)
    s("write 0 0 B 4096")  # reaches gfsd while c1 bypasses its gfccd: not staged
    time.sleep(11)  # c1 uses its gfccd again by the close
    s("close 0")
    s.close()
    want = b"B" * 4096 + b"A" * (MIB - 4096) + b"C" * 4096
    assert reference(cluster, path) == want
    assert_every_node_reads(cluster, path, want)


def test_append_stages_nothing_at_a_guessed_offset(cluster, script_exe):
    """An O_APPEND write lands at gfsd's end of file; libgfarm staged it at its own idea of
    the size (gf->md.filesize), which does not count another client's appends."""
    path = "/append"
    w1, w2 = Script(cluster, "c1", script_exe), Script(cluster, "c2", script_exe)
    w1(f"open 0 {path} truncappend")
    w1("write 0 0 A 4096")
    w2(f"open 0 {path} append")
    w2("write 0 0 B 4096")  # gfsd: A B
    w2("close 0")
    w1("write 0 0 C 4096")  # gfsd: A B C; staged at 4096 (where B is) before the fix
    w1("close 0")
    w1.close()
    w2.close()
    want = b"A" * 4096 + b"B" * 4096 + b"C" * 4096
    assert reference(cluster, path) == want
    assert_every_node_reads(cluster, path, want)


def ip_of(cluster, node):
    """a node's address (gfarm-cluster: 10.213.ID.10 md, .11 sd, .20+K cK)"""
    host = {"md": 10, "sd": 11}.get(node) or 20 + int(node[1:])
    return f"10.213.{cluster.env['GFARM_CLUSTER_ID']}.{host}"


@contextlib.contextmanager
def blackhole(cluster, node, dest):
    """packets from NODE to node DEST are dropped (TCP retransmits them once it ends)"""
    argv = ["ip", "netns", "exec", os.path.basename(cluster.netns(node)), "ip", "route"]
    route = ["blackhole", ip_of(cluster, dest) + "/32"]
    subprocess.run(argv + ["add", *route], check=True, timeout=10)
    try:
        yield
    finally:
        subprocess.run(argv + ["del", *route], check=False, timeout=10)


def test_a_write_that_failed_although_gfsd_took_it_publishes_nothing(cluster, script_exe,
                                                                     tmp_path):
    """gfsd writes B over the staged A, but its replies never reach c1 (dropped), so the write
    fails there after libgfarm's 2 s receive timeout, and so do the flush and the gfsd close
    at c1's close; c1's close with gfmd is held back until gfsd has dealt with the file. The
    staged A must not be published: every node reads what gfmd and gfsd then hold."""
    conf = tmp_path / "gfarm2.conf"
    with open(os.path.join(cluster.dir, "etc", "gfarm2.conf")) as f:
        conf.write_text(f.read() + "network_receive_timeout 2\n")
    path = "/failedwrite"
    s = Script(cluster, "c1", script_exe, env=[f"GFARM_CONFIG_FILE={conf}"])
    s(f"open 0 {path} trunc")
    s("write 0 0 A 8192")  # staged in c1's gfccd
    with blackhole(cluster, "sd", "c1"):  # gfsd's replies to c1 are lost
        s.send("write 0 0 B 4096")
        assert s.reply().startswith("err"), "the write did not fail"
        with blackhole(cluster, "c1", "md"):
            s.send("close 0")
            time.sleep(0.5)
        assert s.reply().startswith("err"), "the close did not fail"
    s.close()
    assert_every_node_reads(cluster, path, reference(cluster, path))


def inode_gen(cluster, path):
    st = cluster.run("c1", ["gfstat", path], stdout=subprocess.PIPE, text=True).stdout
    return int(st.split("Inode:")[1].split()[0]), int(st.split("Gen:")[1].split()[0])


def test_restarted_gfmd_new_file_gets_its_own_bytes(tmp_path):
    need_root()
    c = GfarmCluster(clients=2, cluster_id=82, state_dir=str(tmp_path / "gfc"))
    try:
        old, new = tmp_path / "old", tmp_path / "new"
        old.write_bytes(os.urandom(MIB + 100))
        new.write_bytes(os.urandom(MIB + 100))
        c.put("c1", str(old), "/f")
        assert c.get("c2", "/f") == old.read_bytes()  # c1 and c2 cache it
        key = inode_gen(c, "/f")
        c._script("restart-gfmd")
        c.put("c2", str(new), "/f", coop=False)  # gfsd holds the new file only
        assert inode_gen(c, "/f") == key  # the none backend reuses (inode, generation)
        for node in ("c1", "c2"):
            assert c.get(node, "/f") == new.read_bytes(), node
    finally:
        c.close()


def test_two_file_systems_behind_one_gfccd(tmp_path):
    need_root()
    a = GfarmCluster(clients=1, cluster_id=82, state_dir=str(tmp_path / "a"))
    try:
        b = GfarmCluster(clients=1, cluster_id=83, state_dir=str(tmp_path / "b"))
        try:
            fa, fb = tmp_path / "fa", tmp_path / "fb"
            fa.write_bytes(os.urandom(MIB + 100))
            fb.write_bytes(os.urandom(MIB + 100))
            a.put("c1", str(fa), "/f")  # in a's c1 gfccd
            b.put("c1", str(fb), "/f", coop=False)
            assert inode_gen(a, "/f") == inode_gen(b, "/f")
            # a client of file system b on a node whose gfccd also serves file system a
            shared = ["env", f"GFARM_COOP_CACHE_SOCKET={a.socket('c1')}", "gfexport", "/f"]
            got = b.run("c1", shared, stdout=subprocess.PIPE).stdout
            assert got == fb.read_bytes()
            assert a.get("c1", "/f") == fa.read_bytes()
        finally:
            b.close()
    finally:
        a.close()
