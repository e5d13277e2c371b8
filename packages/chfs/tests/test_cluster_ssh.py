"""chfsctl over real ssh: a pool on 4 simulated nodes started from a fifth (sim_cluster).

The login node (node 4) runs `chfsctl -h HOSTFILE` as a user would; chfsctl reaches nodes 0-3
through their own sshd (ci/testlib/cluster_ssh.py; no launcher shim), each server stores its
chunks in its node's own /tmp, and a client on node 4 writes and reads a file striped over all
four. stop must leave no chfsd on any node, clean no storage directory.
"""
import os

import pytest

from chfsutil import rand, sha

SCRATCH = "/tmp/chfs-sshtest"


def storage_bytes(sc, node):
    """Bytes of chunk data under node's storage directory (logs, pid and info files aside)."""
    top = os.path.join(sc.node_tmp(node), SCRATCH[len("/tmp/"):])
    total = 0
    for d, _, files in os.walk(top):
        for f in files:
            if f not in ("chfsd.log", "info", "chfsd.pid"):
                total += os.path.getsize(os.path.join(d, f))
    return total


@pytest.mark.netns
@pytest.mark.timeout(240)
def test_chfsctl_over_ssh_runs_a_four_node_pool_for_a_client_on_a_fifth_node(sim_cluster):
    sc = sim_cluster
    hosts = sc.hostfile([0, 1, 2, 3], "ssh-hosts")
    secret = os.path.join(sc.shared, "ssh-secret")
    ctl = f"chfsctl -h {hosts} -c {SCRATCH} -k {secret}"
    r = sc.ssh(4, f"{ctl} start", timeout=120)
    assert r.returncode == 0, r.stderr
    server = r.stdout.split('"')[1]
    try:
        assert sorted(a.split("//")[1].split(":")[0] for a in server.split(",")) == \
            sorted(sc.ip(i) for i in range(4))
        # status: four running servers, each chfsd a process of its own node
        r = sc.ssh(4, f"{ctl} status", timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = [ln for ln in r.stdout.splitlines() if ln.endswith(" running")]
        assert len(lines) == 4, r.stdout
        for i in range(4):
            assert len(sc.pids_on(i, "chfsd")) == 1, f"node {i}: {r.stdout}"
        assert not sc.pids_on(4, "chfsd")

        # a client on node 4 writes 4 MiB (64 KiB chunks: striped over every server) and reads
        # it back; its /tmp is its own, so the copy really comes from the servers
        data = rand(4 << 20, 17)
        with open(os.path.join(sc.node_tmp(4), "ssh-in"), "wb") as f:
            f.write(data)
        env = {"CHFS_SERVER": server, "CHFS_SECRET_FILE": secret, "CHFS_CHUNK_SIZE": "65536"}
        r = sc.ssh(4, "chmkdir -p /ssh && chcp /tmp/ssh-in chfs:/ssh/data && "
                   "chcp chfs:/ssh/data /tmp/ssh-out", env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        with open(os.path.join(sc.node_tmp(4), "ssh-out"), "rb") as f:
            assert sha(f.read()) == sha(data)
        assert all(storage_bytes(sc, i) > 0 for i in range(4)), \
            [storage_bytes(sc, i) for i in range(4)]
        assert sum(storage_bytes(sc, i) for i in range(4)) >= len(data)
        # and a client on node 2 (a server node) reads the same bytes
        r = sc.ssh(2, "chcp chfs:/ssh/data /tmp/ssh-out2 && sha256sum /tmp/ssh-out2",
                   env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[0] == sha(data)

        r = sc.ssh(4, f"{ctl} stop", timeout=120)
        assert r.returncode == 0, r.stderr
        assert all(not sc.pids_on(i, "chfsd") for i in range(4))
        r = sc.ssh(4, f"{ctl} status", timeout=60)
        assert r.returncode == 1 and r.stdout.count(" stopped") == 4, r.stdout
    finally:
        r = sc.ssh(4, f"{ctl} clean", timeout=120)
    assert r.returncode == 0, r.stderr
    assert all(not os.path.exists(os.path.join(sc.node_tmp(i), "chfs-sshtest", "srv0"))
               for i in range(4))
    assert all(not sc.pids_on(i, "chfsd") for i in range(5))


@pytest.mark.netns
@pytest.mark.timeout(240)
def test_chfsctl_options_reach_the_remote_servers(sim_cluster):
    """-x, -L and -m over ssh: the variable is in each remote chfsd's environment, each node's
    server logs to its own file in a shared log directory, chfuse mounts the pool on every
    node (a file written through one node's mount is read through another's) and stop
    unmounts it everywhere."""
    sc = sim_cluster
    hosts = sc.hostfile([0, 1], "opt-hosts")
    secret = os.path.join(sc.shared, "opt-secret")
    logs = os.path.join(sc.shared, "opt-logs")
    mnt = "/tmp/chfs-optmnt"
    ctl = (f"chfsctl -h {hosts} -c /tmp/chfs-opttest -k {secret} -L {logs} "
           f"-x CHFS_TEST_REMOTE=from-the-login-node -m {mnt}")
    r = sc.ssh(4, f"{ctl} start", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        for i in range(2):
            (pid,) = sc.pids_on(i, "chfsd")
            with open(f"/proc/{pid}/environ", "rb") as f:
                assert b"CHFS_TEST_REMOTE=from-the-login-node" in f.read().split(b"\0")
            with open(os.path.join(logs, f"chfsd-{sc.name(i)}-srv0.log")) as f:
                assert f"serving /tmp/chfs-opttest/srv0 on tcp://{sc.ip(i)}:" in f.read()
            assert sc.ssh(i, f"mountpoint -q {mnt}").returncode == 0, f"node {i}: not mounted"
        r = sc.ssh(0, f"echo through-node-0 > {mnt}/x && sync")
        assert r.returncode == 0, r.stderr
        r = sc.ssh(1, f"cat {mnt}/x")
        assert r.returncode == 0 and r.stdout == "through-node-0\n", r.stdout + r.stderr
        r = sc.ssh(4, f"{ctl} status", timeout=60)
        assert r.stdout.count(f" mount {mnt} mounted") == 2, r.stdout
        r = sc.ssh(4, f"{ctl} stop", timeout=120)
        assert r.returncode == 0, r.stderr
        for i in range(2):
            assert sc.ssh(i, f"mountpoint -q {mnt}").returncode != 0, f"node {i}: still mounted"
    finally:
        sc.ssh(4, f"{ctl} clean", timeout=120)
        for i in range(2):
            sc.ssh(i, f"umount -l {mnt} 2>/dev/null; true")
