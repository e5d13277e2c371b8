"""gfarm2fs with kernel passthrough for files on the node's own gfsd (issue 15 item 2).

A cluster of gfmd, one gfsd (node "sd") and one client node c1 (packages/gfarm/gfarm-cluster).
Our gfarm2fs (packages/gfarm2fs/build-gfarm2fs) is mounted on sd — where every replica is
local, so opens get the spool file as passthrough backing — and on c1, where the gfsd is remote.
Its counters (gfarm2fs.stats, rewritten at each release) say how many READ and WRITE requests
reached the daemon and how opens were served. Data and sizes are checked from the other node
with the stock tools (gfexport, gfls) and through c1's mount.
"""
import mmap
import os
import subprocess
import time

import pytest

from gfcluster import GfarmCluster

pytestmark = [pytest.mark.netns, pytest.mark.timeout(300)]

GFARM2FS = os.path.join(os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack")),
                        "gfarm2fs", "prefix", "bin", "gfarm2fs")
SIZE = 8 * 1024 * 1024 + 12345  # not a whole number of pages


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("network namespaces and FUSE mounts need root and /dev/fuse")
    if not os.access(GFARM2FS, os.X_OK):
        pytest.fail(f"no gfarm2fs build at {GFARM2FS} (run packages/gfarm2fs/build-gfarm2fs)")
    c = GfarmCluster(clients=1, cluster_id=86, state_dir=str(tmp_path_factory.mktemp("gfc")))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def mounts(cluster):
    yield cluster.mount(coop=False, nodes=["sd", "c1"])
    cluster.umount()


def settle(cluster, node, key, at_least, timeout=10.0):
    """Counters once `key` reached `at_least` (FUSE sends RELEASE after close() returns)."""
    end = time.monotonic() + timeout
    while True:
        try:
            st = cluster.gfarm2fs_stats(node)
            if st[key] >= at_least:
                return st
        except (FileNotFoundError, KeyError, ValueError):
            st = None
        if time.monotonic() > end:
            raise AssertionError(f"{node}: {key} never reached {at_least}: {st}")
        time.sleep(0.05)


def gfls_size(cluster, node, path):
    out = cluster.run(node, ["gfls", "-l", path], coop=False, stdout=subprocess.PIPE,
                      text=True).stdout.split()
    return int(out[4])


def test_local_replica_is_served_by_the_kernel_and_right_on_another_node(cluster, mounts):
    sd, c1 = mounts["sd"], mounts["c1"]
    data = bytearray(os.urandom(SIZE))
    with open(os.path.join(sd, "local"), "wb") as f:
        f.write(data)
    st = settle(cluster, "sd", "size_report", 1)
    assert st["passthrough"] == 1 and st["passthrough_open"] == 1, st
    # Overwrite 4 bytes in place (no size change) and append, in a second open; then mmap.
    with open(os.path.join(sd, "local"), "r+b") as f:
        f.seek(4)
        f.write(b"BBBB")
        f.seek(0, os.SEEK_END)
        f.write(b"tail")
    data[4:8] = b"BBBB"
    data += b"tail"
    settle(cluster, "sd", "size_report", 2)
    with open(os.path.join(sd, "local"), "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        m[SIZE // 2:SIZE // 2 + 5] = b"MMAP!"
        m.flush()
    data[SIZE // 2:SIZE // 2 + 5] = b"MMAP!"
    settle(cluster, "sd", "size_report", 3)
    with open(os.path.join(sd, "local"), "rb") as f:
        assert f.read() == data
    st = settle(cluster, "sd", "open", 4)
    assert st["passthrough_open"] == 4 and st["remote_open"] == 0, st
    assert st["read"] == 0 and st["write"] == 0, f"passthrough I/O reached gfarm2fs: {st}"

    # Another client node sees the kernel's writes: size from gfmd, bytes from gfsd.
    assert gfls_size(cluster, "c1", "/local") == len(data)
    assert cluster.get("c1", "/local", coop=False) == bytes(data)
    with open(os.path.join(c1, "local"), "rb") as f:
        assert f.read() == data
    st1 = settle(cluster, "c1", "open", 1)
    assert st1["passthrough_open"] == 0 and st1["remote_open"] == 1, st1
    assert st1["read"] > 0 and st1["read_bytes"] >= len(data), st1


def test_rewrite_in_place_and_with_o_trunc_pass_through(cluster, mounts):
    """IOzone's rewrite (an existing file opened O_WRONLY, no O_TRUNC) and a rewrite with
    O_TRUNC are served by the kernel too, and gfmd gets each new size at release."""
    path = os.path.join(mounts["sd"], "rewrite")
    data = bytearray(os.urandom(SIZE))
    with open(path, "wb") as f:
        f.write(data)
    settle(cluster, "sd", "size_report", 1)
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.write(fd, b"R" * 65536) == 65536
    finally:
        os.close(fd)
    data[:65536] = b"R" * 65536
    settle(cluster, "sd", "size_report", 2)
    assert cluster.get("c1", "/rewrite", coop=False) == bytes(data)
    with open(path, "wb") as f:  # O_WRONLY | O_CREAT | O_TRUNC on the existing file
        f.write(b"T" * 5000)
    st = settle(cluster, "sd", "size_report", 3)
    assert st["open"] == st["passthrough_open"] == 3, st
    assert st["read"] == 0 and st["write"] == 0, f"rewrite I/O reached gfarm2fs: {st}"
    assert gfls_size(cluster, "c1", "/rewrite") == 5000
    assert cluster.get("c1", "/rewrite", coop=False) == b"T" * 5000


def test_remote_replica_goes_through_the_daemon(cluster, mounts):
    c1 = mounts["c1"]
    data = os.urandom(SIZE)
    with open(os.path.join(c1, "remote"), "wb") as f:
        f.write(data)
    settle(cluster, "c1", "open", 1)
    with open(os.path.join(c1, "remote"), "rb") as f:
        assert f.read() == data
    st = settle(cluster, "c1", "open", 2)
    assert st["passthrough_open"] == 0 and st["remote_open"] == 2, st
    assert st["write_bytes"] >= len(data) and st["read_bytes"] >= len(data), st
    assert gfls_size(cluster, "sd", "/remote") == len(data)


def test_plain_mode_serves_local_files_through_the_daemon(cluster):
    mnt = cluster.mount(coop=False, nodes=["sd"], mode="plain")["sd"]
    try:
        data = os.urandom(SIZE)
        with open(os.path.join(mnt, "plain"), "wb") as f:
            f.write(data)
        settle(cluster, "sd", "open", 1)
        with open(os.path.join(mnt, "plain"), "rb") as f:
            assert f.read() == data
        st = settle(cluster, "sd", "open", 2)
        assert st["passthrough"] == 0 and st["passthrough_open"] == 0, st
        assert st["write_bytes"] >= len(data) and st["read_bytes"] >= len(data), st
        assert gfls_size(cluster, "c1", "/plain") == len(data)
        assert cluster.get("c1", "/plain", coop=False) == data
    finally:
        cluster.umount()
