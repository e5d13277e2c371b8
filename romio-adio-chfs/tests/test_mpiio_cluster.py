"""MPI-IO and parallel HDF5 across simulated nodes, started by Debian's mpiexec over real ssh.

Nodes 0-3 of the session's simulated cluster (sim_cluster: network namespaces, an sshd each)
run one chfsd each (chfsctl -h over ssh) and one MPI rank each; mpiexec runs on node 4, the
login node, and hydra's ssh launcher starts its proxies on the nodes through their sshd, as on
a real cluster. Ranks talk MPI over the nodes' cluster interface (HYDRA_IFACE) and reach CHFS servers on
other nodes over the bridge, so every chunk RPC and every two-phase exchange crosses "the
network". Files are then read through the native API from node 4. Programs live in the
cluster's shared directory (each node has its own /tmp).
"""
import hashlib
import os
import shutil

import pytest

from adchfs_testlib import CHFS_PREFIX, pattern

SIZE = 4 << 20
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@pytest.fixture(scope="module")
def cluster_mpi(sim_cluster, progs, mpich_lib):
    """(run on node 4, mpiexec argv prefix) on a pool of nodes 0-3, stopped after the module."""
    sc = sim_cluster
    bindir = os.path.join(sc.shared, "mpiio-progs")
    os.makedirs(bindir, exist_ok=True)
    for p in ("mpiio_pattern", "h5_2d", "chfs_cat"):
        shutil.copy2(progs / p, bindir)
    hosts = sc.hostfile([0, 1, 2, 3], "mpiio-hosts")
    secret = os.path.join(sc.shared, "mpiio-secret")
    ctl = f"chfsctl -h {hosts} -c /tmp/chfs-mpiio -k {secret}"
    r = sc.ssh(4, f"{ctl} start", timeout=120)
    assert r.returncode == 0, r.stderr
    env = {"CHFS_SERVER": r.stdout.split('"')[1], "CHFS_SECRET_FILE": secret,
           "LD_LIBRARY_PATH": f"{mpich_lib}:{CHFS_PREFIX / 'lib'}"}

    def run(command, timeout=180):
        return sc.ssh(4, command, env=env, timeout=timeout)

    mpiexec = (f"mpiexec -launcher ssh -hosts {','.join(sc.ip(i) for i in range(4))} "
               "-n 4 -ppn 1")
    assert run("chmkdir -p /cluster").returncode == 0
    try:
        yield run, mpiexec, bindir
    finally:
        sc.ssh(4, f"{ctl} clean", timeout=120)


@pytest.mark.netns
def test_mpiexec_over_ssh_puts_one_rank_on_each_node(sim_cluster, cluster_mpi):
    run, mpiexec, _ = cluster_mpi
    r = run(f"{mpiexec} sh -c 'hostname; ip -o -4 addr show {sim_cluster.cluster.iface}'",
            timeout=60)
    assert r.returncode == 0, r.stderr
    names = {ln for ln in r.stdout.split("\n") if ln.startswith(sim_cluster.name(0)[:-1])}
    assert names == {sim_cluster.name(i) for i in range(4)}
    assert {sim_cluster.ip(i) for i in range(4)} == {
        ln.split()[3].split("/")[0] for ln in r.stdout.splitlines() if " inet " in ln}


@pytest.mark.netns
@pytest.mark.parametrize("mode", ["coll", "indep"])
def test_four_ranks_on_four_simulated_nodes(cluster_mpi, mode):
    run, mpiexec, bindir = cluster_mpi
    path = f"/cluster/{mode}"
    r = run(f"{mpiexec} {bindir}/mpiio_pattern {mode} chfs:{path} {SIZE}")
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "ok" in r.stdout
    out = f"/tmp/mpiio-{mode}.out"
    r = run(f"{bindir}/chfs_cat {path} > {out} && sha256sum {out} && rm -f {out}", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == hashlib.sha256(pattern(SIZE)).hexdigest()


@pytest.mark.netns
def test_parallel_hdf5_on_four_simulated_nodes(cluster_mpi):
    run, mpiexec, bindir = cluster_mpi
    r = run(f"{mpiexec} {bindir}/h5_2d chfs:/cluster/a2d.h5 256 192")
    assert "ok (0 bad values)" in r.stdout, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    r = run(f"{bindir}/chfs_cat /cluster/a2d.h5 | head -c 8 | od -An -tx1", timeout=60)
    assert r.stdout.split() == [f"{b:02x}" for b in HDF5_SIGNATURE], r.stderr
    r = run(f"{bindir}/chfs_cat --size /cluster/a2d.h5", timeout=60)
    assert r.returncode == 0 and int(r.stdout.split()[0]) >= 256 * 192 * 8, r.stdout + r.stderr
