"""A patched client (cooperative cache on) against a stock, unpatched gfmd (issue 15 item 1).

build-gfarm also builds gfmd from the untouched Gfarm source into <build>/stock/prefix; the
cluster runs that gfmd (GFARM_GFMD_PREFIX) with the patched clients and gfccd. A stock gfmd
closes any connection that sends it a request it does not know; the client must find out on
a throw-away connection, say so in one line, keep its working gfmd connection and read the
file with the cache off.
"""
import os
import re
import subprocess

import pytest

from gfcluster import GfarmCluster

pytestmark = [pytest.mark.netns, pytest.mark.timeout(300)]

CACHE = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
GFARM_PREFIX = os.environ.get("GFARM_PREFIX", os.path.join(CACHE, "gfarm", "prefix"))
STOCK = os.environ.get("GFARM_STOCK_PREFIX",
                       os.path.join(os.path.dirname(GFARM_PREFIX), "stock", "prefix"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    assert os.access(os.path.join(STOCK, "sbin", "gfmd"), os.X_OK), \
        f"no stock gfmd in {STOCK} (packages/gfarm/build-gfarm builds it)"
    c = GfarmCluster(clients=2, cluster_id=84, state_dir=str(tmp_path_factory.mktemp("gfst")),
                     gfmd_prefix=STOCK)
    try:
        yield c
    finally:
        c.close()


def test_patched_client_keeps_its_gfmd_connection_with_a_stock_gfmd(cluster, tmp_path):
    data = os.urandom(3 << 20)
    (tmp_path / "f").write_bytes(data)
    cluster.put("c1", str(tmp_path / "f"), "/f", coop=False)
    cluster.put("c1", str(tmp_path / "f"), "/g", coop=False)
    # one process reads /f (the cache's first gfmd request would come here), then opens,
    # reads and closes /g and /f again through the same gfmd connection
    r = cluster.run("c2", ["gfexport", "/f", "/g", "/f"], stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout == data * 3, r.stderr
    lines = [ln for ln in r.stderr.decode().splitlines() if "cooperative cache" in ln]
    assert len(lines) == 1 and "does not speak" in lines[0], r.stderr
    # the previous build got the data too, but only by reconnecting: "compound_begin
    # request: broken pipe ... connection to metadb server was failed over"
    assert b"broken pipe" not in r.stderr and b"failed over" not in r.stderr, r.stderr
    r = cluster.run("c2", ["gfexport", "/f"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    timeout=60, check=False)
    assert r.returncode == 0 and r.stdout == data, r.stderr
    assert cluster.stat("c2")["local_requested"] == 0  # the cache stayed off
    with open(os.path.join(cluster.dir, "log", "gfmd.log")) as f:
        log = f.read()
    unknown = re.findall(r"unknown request: (-?\d+)", log)
    hello = 0xF0000C07 - (1 << 32)  # GFM_PROTO_COOP_CACHE_HELLO, on the throw-away connection
    assert unknown and all(int(u) == hello for u in unknown), unknown  # never a real request
