"""CHFS across simulated nodes: 4 chfsd, each in its own network namespace with its own IP on a
bridge, and a client in a fifth namespace (netns_cluster fixture)."""
import json
import os
import signal
import sys
import time

import pytest

from ci.testlib.chfs_pool import wait_gone

import chfsload
from chfsutil import python_env, rand, sha


@pytest.mark.timeout(180)
def test_pool_of_four_namespaced_nodes_serves_a_remote_client(netns_cluster):
    c = netns_cluster
    pool = c.start_chfs(servers=[0, 1, 2, 3])
    assert all(a.startswith(f"tcp://{c.subnet}.") for a in pool.addrs)
    env = pool.env

    def io(*args, data=None, check=True):
        r = c.run(4, ["chfs-io", *map(str, args)], input=data, env=env, check=False, text=False)
        if check:
            assert r.returncode == 0, r.stderr.decode()
        return r

    data = rand(3 * (1 << 20) + 12345, 42)
    io("mkdir", "/n")
    io("put", "/n/data", 0, "create", data=data)
    assert sha(io("get", "/n/data").stdout) == sha(data)
    assert io("get", "/n/data", 65530, 100000).stdout == data[65530:165530]
    io("mkfiles", "/n", 500)
    names = io("ls", "/n").stdout.decode().split()
    assert len(names) == 501
    # every server node holds a part of the striped file
    import os
    assert all(os.listdir(os.path.join(d, "data")) for d in pool.dirs)
    # a client that cannot reach any server fails with ENOTCONN, not a hang
    r = c.run(4, ["chfs-io", "ls", "/"], env=dict(env, CHFS_SERVER="tcp://10.255.255.1:1"),
              check=False, timeout=60)
    assert r.returncode != 0 and "ENOTCONN" in r.stderr


@pytest.mark.timeout(240)
def test_servers_join_and_leave_namespaced_nodes_nothing_lost(netns_cluster):
    """A two-node pool holding data grows to four nodes, then one node leaves gracefully
    (SIGUSR1): after each change the keys have moved over the bridge (the new nodes received
    bytes) and every byte reads back from a client on a fifth node."""
    c = netns_cluster
    pool = c.start_chfs(servers=[0, 1])

    def io(*args, data=None, check=True):
        r = c.run(4, ["chfs-io", *map(str, args)], input=data, env=pool.env, check=False, text=False)
        if check:
            assert r.returncode == 0, r.stderr.decode()
        return r

    def settled(n):
        end = time.time() + 60
        while True:
            r = c.run(4, ["chlist", "-S"], env=pool.env, check=False)
            lines = [l.split() for l in r.stdout.splitlines() if l.strip()]
            st = [dict(kv.split("=", 1) for kv in l[1:] if "=" in kv) for l in lines]
            if (len(lines) == n and r.returncode == 0 and all(s.get("rebalance") == "idle" for s in st)
                    and len({s["epoch"] for s in st}) == 1):
                return {l[0]: s for l, s in zip(lines, st)}
            assert time.time() < end, r.stdout
            time.sleep(0.3)

    # One chfsload process writes and one verifies (a chfs-io per file cost ~0.25 s each):
    # 61 files from empty to over 1 MiB (every 20th), whose bytes follow from the seed.
    manifest = os.path.join(pool.tmp, "m.json")

    def load(*args):
        r = c.run(4, [sys.executable, chfsload.__file__, *map(str, args)], env=python_env(pool.env),
                  check=False, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout

    load("write", "--out", manifest, "--files", 61, "--seed", 900, "--top", "/m")

    def verify():
        r = json.loads(load("verify", manifest))
        assert r["ok"] == 61, f"files wrong or unreadable: {r}"

    for node in (2, 3):
        i = pool.add(node)
        st = settled(len(pool.nodes))
        assert int(st[pool.addrs[i]]["bytes_in"]) > 0, st
        verify()
    leaving = pool.pids[1]
    os.kill(leaving, signal.SIGUSR1)
    assert wait_gone(leaving, 60), "the leaving server did not exit"
    pool.pids[1], gone = None, pool.addrs[1]
    pool.addrs[1] = None
    pool.env["CHFS_SERVER"] = ",".join(a for a in pool.addrs if a)
    st = settled(3)
    assert gone not in st
    verify()
