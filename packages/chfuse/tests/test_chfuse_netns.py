"""Simulated nodes (network namespaces): a file written through passthrough on node 0 is seen,
with its size and content, by clients on other nodes — libchfs on node 4 and another chfuse on
node 1 (whose reads go through its daemon, since the data is not on node 1).

Each chfuse runs inside `ip netns exec`, which gives it a private mount namespace: the mount,
the workload and the unmount happen in one shell script there (a trap unmounts on any error,
and the namespace's mounts vanish with its last process anyway)."""
import hashlib
import subprocess

import pytest

from chfuse_util import read_stats, tool

NODE_SCRIPT = r"""
set -euo pipefail
mnt=$1 stats=$2; shift 2
mkdir -p "$mnt"
chfuse --foreground -o stats="$stats" "$mnt" &
daemon=$!
trap 'fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; wait $daemon || true' EXIT
for _ in $(seq 100); do grep -q " $mnt fuse.chfuse " /proc/self/mounts && break; sleep 0.1; done
grep -q " $mnt fuse.chfuse " /proc/self/mounts || { echo "chfuse did not mount $mnt" >&2; exit 1; }
cd "$mnt"
eval "$@"
cd /
fusermount3 -u "$mnt"
wait $daemon
trap - EXIT
"""


def on_node(cluster, node, env, mnt, stats, workload):
    r = cluster.run(node, ["bash", "-c", NODE_SCRIPT, "node", mnt, stats, workload], env=env,
                    check=False, timeout=180)
    assert r.returncode == 0, f"node {node}: {r.stderr}"
    return r.stdout


@pytest.mark.netns
def test_reader_on_other_node_sees_passthrough_writes(netns_cluster, tmp_path):
    pool = netns_cluster.start_chfs(servers=[0, 1, 2, 3])
    env = pool.env
    local = dict(env, CHFS_PLACEMENT="local")
    mnt, st0, st1 = str(tmp_path / "mnt"), str(tmp_path / "n0.stats"), str(tmp_path / "n1.stats")

    out = on_node(netns_cluster, 0, local, mnt, st0,
                  "dd if=/dev/urandom of=data bs=1M count=48 status=none; "
                  "printf tail >> data; sha256sum data | cut -d' ' -f1; stat -c %s data")
    digest, size = out.split()
    assert int(size) == 48 * (1 << 20) + 4
    s0 = read_stats(st0)
    assert s0["passthrough_opens"] >= 2 and s0["write_requests"] == 0, s0

    # libchfs on node 4 (no server there).
    stat = netns_cluster.run(4, [tool("chfs-io"), "stat", "/data"], env=env).stdout.split()
    assert int(stat[1]) == int(size)
    got = netns_cluster.run(4, [tool("chfs-io"), "get", "/data"], env=env, text=False).stdout
    assert hashlib.sha256(got).hexdigest() == digest

    # chfuse on node 1: a remote file, so no passthrough, reads through the daemon.
    out = on_node(netns_cluster, 1, env, mnt, st1,
                  "stat -c %s data; sha256sum data | cut -d' ' -f1")
    assert out.split() == [size, digest]
    s1 = read_stats(st1)
    assert s1["passthrough_opens"] == 0 and s1["read_requests"] > 0, s1
