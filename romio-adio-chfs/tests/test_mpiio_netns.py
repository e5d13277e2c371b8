"""A 4-rank MPI-IO job across simulated nodes (network namespaces of the shared test cluster).

Nodes 0-3 each run one chfsd and one MPI rank (client and server co-located, as on a real
cluster with node-local storage); mpiexec runs on node 4 and starts its proxies in the other
namespaces through tests/netns-launcher (hydra's ssh launcher with `ip netns exec` instead of
ssh). Ranks talk MPI over the nodes' eth0 and reach CHFS servers on other nodes over the
bridge, so every chunk RPC and every two-phase exchange crosses "the network". The file is then
read through the native API from node 4.
"""
from pathlib import Path

import pytest

from adchfs_testlib import client_env, pattern

LAUNCHER = Path(__file__).resolve().parent / "netns-launcher"
SIZE = 4 << 20


@pytest.mark.netns
@pytest.mark.parametrize("mode", ["coll", "vector-coll", "indep"])
def test_four_ranks_on_four_simulated_nodes(netns_cluster, progs, mpich_lib, mode):
    c = netns_cluster
    pool = c.start_chfs(servers=[0, 1, 2, 3])
    env = client_env(pool.env, mpich_lib)
    env["CHFS_NETNS_MAP"] = ",".join(f"{c.ip(i)}={c.names[i]}" for i in range(c.n))
    hosts = ",".join(c.ip(i) for i in range(4))
    path = f"/netns/{mode}"
    c.run(4, ["chmkdir", "-p", "/netns"], env=env, check=True, timeout=60)
    cmd = ["mpiexec", "-launcher", "ssh", "-launcher-exec", str(LAUNCHER), "-iface", "eth0",
           "-hosts", hosts, "-n", "4", "-ppn", "1",
           str(progs / "mpiio_pattern"), mode, f"chfs:{path}", str(SIZE)]
    r = c.run(4, cmd, env=env, check=False, timeout=180)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "ok" in r.stdout

    # Where did the ranks run? One per node, each on its own address.
    r = c.run(4, ["mpiexec", "-launcher", "ssh", "-launcher-exec", str(LAUNCHER), "-iface",
                  "eth0", "-hosts", hosts, "-n", "4", "-ppn", "1", "ip", "-o", "-4", "addr",
                  "show", "eth0"], env=env, check=True, timeout=60)
    assert {c.ip(i) for i in range(4)} == {
        line.split()[3].split("/")[0] for line in r.stdout.splitlines()}

    native = c.run(4, [str(progs / "chfs_cat"), path], env=env, check=False, timeout=60,
                   text=False)
    assert native.returncode == 0, native.stderr.decode()
    assert native.stdout == pattern(SIZE)
