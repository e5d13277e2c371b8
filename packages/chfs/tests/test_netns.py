"""CHFS across simulated nodes: 4 chfsd, each in its own network namespace with its own IP on a
bridge, and a client in a fifth namespace (netns_cluster fixture)."""
import pytest

from chfsutil import rand, sha


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
