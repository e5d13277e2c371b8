"""Pwrake across simulated nodes: workers on four nodes over ssh, on a CHFS pool spanning them.

The session's simulated cluster (sim_cluster: network namespaces with an sshd each, own host
name and own /tmp) gets a CHFS pool on nodes 0-3, started from node 4 with `chfsctl -h` over ssh
as a user would. `workflows/run --runner pwrake --hosts FILE` then runs the Rakefile from this
host with one Pwrake worker per node (Pwrake's own ssh, through the cluster's ssh on PATH):

  hook   --attach to that pool; each worker starts under chfs-run on its node (the runner's ssh
         for Pwrake: workflows/lib/pwrake_hosts.py), so every Montage tool reads and writes the
         pool from the node it runs on. Only CHFS_SERVER and the secret (in the cluster's shared
         directory) reach the nodes.
  fuse   a pool of its own brought up on node 0 with `environments/stack up fuse` and
         CHFS_STACK_HOSTFILE, as the Slurm job script does: one chfsd and one chfuse mount per
         node, at the same node-local path; workflows/run runs on node 0 (the master must see
         the mount too) with --attach and uses that mount.
  local  a working directory in the cluster's shared directory, which every node sees at the
         same path (the nodes' /tmp is their own, so pytest's tmp_path would not do).

Each mosaic must equal `rake`'s on the local baseline byte for byte, and Pwrake's logs must show
commands on at least two nodes, run by workers whose host names are the nodes'.
"""
import csv
import os
import shlex
import shutil

import pytest

from montage_helpers import RUN, run_workflow

NO_PWRAKE = "pwrake not installed (not in Debian; RubyGems unreachable here)"
pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(shutil.which("pwrake") is None, reason=NO_PWRAKE)]
NODES = [0, 1, 2, 3]
SCRATCH = "/tmp/chfs-pwrake"        # each server's storage, in its node's own /tmp


@pytest.fixture(scope="module")
def cluster_pool(sim_cluster):
    """(cluster, client environment) of a pool on nodes 0-3, cleaned after the module."""
    sc = sim_cluster
    hosts = sc.hostfile(NODES, "pwrake-servers")
    secret = os.path.join(sc.shared, "pwrake-secret")
    ctl = f"chfsctl -h {hosts} -c {SCRATCH} -k {secret}"
    r = sc.ssh(4, f"{ctl} start", timeout=120)
    assert r.returncode == 0, r.stderr
    env = {**sc.env, "CHFS_SERVER": r.stdout.split('"')[1], "CHFS_SECRET_FILE": secret}
    try:
        yield sc, env
    finally:
        sc.ssh(4, f"{ctl} clean", timeout=120)


@pytest.fixture
def shared_tmp(sim_cluster, request):
    """A fresh directory every node sees at the same path, removed after the test."""
    d = os.path.join(sim_cluster.shared, "pwrake-" + request.node.name.replace("[", "-")
                     .replace("]", ""))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def workers_file(sc, top):
    hosts = os.path.join(top, "workers")
    with open(hosts, "w") as f:
        f.writelines(f"{sc.ip(i)} 1\n" for i in NODES)
    return hosts


def run_on_nodes(sc, env, tiles, top, *extra):
    """workflows/run with one Pwrake worker per node; returns (output dir, log dir)."""
    hosts = workers_file(sc, top)
    out, logs = os.path.join(top, "out"), os.path.join(top, "logs")
    r = run_workflow(extra[0], tiles, out, *extra[1:], "--runner", "pwrake", "--hosts", hosts,
                     "--log-dir", logs, environ=env, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    return out, logs


def check_ran_on_nodes(sc, logs):
    with open(os.path.join(logs, "command.csv")) as f:
        hosts = {row["host"] for row in csv.DictReader(f) if row["command"].startswith("m")}
    assert hosts <= {sc.ip(i) for i in NODES}, hosts
    assert len(hosts) >= 2, f"every Montage command ran on {hosts}"
    # worker-HOSTNAME-PID.log: the worker's own host name, i.e. the node it ran on
    names = {f.split("-")[1] for f in os.listdir(logs) if f.startswith("worker-")}
    assert names == {sc.name(i) for i in NODES}, names


def same_mosaic(out, baseline):
    with open(os.path.join(out, "mosaic.fits"), "rb") as a:
        assert a.read() == (baseline / "mosaic.fits").read_bytes(), "mosaic differs from rake's"


@pytest.mark.timeout(500)
def test_pwrake_workers_on_four_nodes_use_the_pool_through_the_hook(
        cluster_pool, tiny_tiles, local_baseline, shared_tmp):
    sc, env = cluster_pool
    out, logs = run_on_nodes(sc, env, tiny_tiles, shared_tmp, "hook", "--attach")
    same_mosaic(out, local_baseline)
    check_ran_on_nodes(sc, logs)
    # the workers' ssh wrapper goes with the run; the working directory was removed from the pool
    assert not [d for d in os.listdir(out) if d.startswith(("pwrake-ssh-", "work-"))]
    r = sc.ssh(4, "chls /", env={k: env[k] for k in ("CHFS_SERVER", "CHFS_SECRET_FILE")},
               timeout=60)
    assert r.returncode == 0 and "montage-" not in r.stdout, r.stdout + r.stderr


@pytest.mark.timeout(500)
def test_pwrake_workers_on_cluster_nodes_over_ssh(sim_cluster, tiny_tiles, local_baseline,
                                                  shared_tmp):
    # No pool: a working directory every node sees (the cluster's shared directory).
    out, logs = run_on_nodes(sim_cluster, sim_cluster.env, tiny_tiles, shared_tmp, "local")
    same_mosaic(out, local_baseline)
    check_ran_on_nodes(sim_cluster, logs)


@pytest.mark.timeout(500)
def test_pwrake_workers_on_four_nodes_use_their_own_chfuse_mounts(
        sim_cluster, tiny_tiles, local_baseline, shared_tmp):
    sc = sim_cluster
    raw = os.path.join(shared_tmp, "raw")          # node 0 runs the runner: a path it sees
    shutil.copytree(tiny_tiles, raw)
    mnt = "/tmp/chfs-pwrake-mnt"                    # node-local: each node its own mount
    stack = {"CHFS_STACK_HOSTFILE": sc.hostfile(NODES, "pwrake-fuse-servers"),
             "CHFS_STACK_SCRATCH": "/tmp/chfs-pwrake-fuse", "CHFS_STACK_MOUNT": mnt,
             "CHFS_SECRET_FILE": os.path.join(shared_tmp, "secret"),
             "CHFS_STACK_RUN": os.path.join(shared_tmp, "run")}
    root = os.path.dirname(os.path.dirname(RUN))
    out, logs = os.path.join(shared_tmp, "out"), os.path.join(shared_tmp, "logs")
    run = shlex.join([RUN, "--env", "fuse", "--attach", "--runner", "pwrake",
                      "--hosts", workers_file(sc, shared_tmp), "--log-dir", logs,
                      "--input", raw, "--out", out])
    down = f"{root}/environments/stack down fuse"
    try:
        r = sc.ssh(0, f'eval "$({root}/environments/stack up fuse)" && {run}', env=stack,
                   timeout=400)
        assert r.returncode == 0, r.stdout + r.stderr
        same_mosaic(out, local_baseline)
        check_ran_on_nodes(sc, logs)
        for i in NODES:     # the working directory went with the run
            assert not sc.ssh(i, f"ls {mnt}/montage-* 2>/dev/null", env=stack).stdout
    finally:
        r = sc.ssh(0, f"{down}; chfsctl -h $CHFS_STACK_HOSTFILE -c $CHFS_STACK_SCRATCH "
                   "-k $CHFS_SECRET_FILE clean", env=stack, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for i in NODES:
        assert not running(sc, i, "chfuse", mnt), f"chfuse left on node {i}"
        assert not running(sc, i, "chfsd", stack["CHFS_STACK_SCRATCH"]), f"chfsd left on node {i}"


def running(sc, node, comm, arg):
    """Processes named comm on node with arg in their command line."""
    found = []
    for pid in sc.pids_on(node, comm):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if arg.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.timeout(300)
def test_a_working_directory_the_nodes_do_not_see_is_named_before_the_workflow_runs(
        sim_cluster, tiny_tiles, tmp_path):
    # pytest's tmp_path is in this host's /tmp; each node has its own /tmp
    sc = sim_cluster
    out = tmp_path / "out"
    r = run_workflow("local", tiny_tiles, out, "--runner", "pwrake", "--hosts",
                     workers_file(sc, str(tmp_path)), environ=sc.env, timeout=200)
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr
    assert "every host must see the working directory at the same path" in err, err
    for i in NODES:
        assert f"{sc.ip(i)}: does not see {out}/work-" in err, err
    for noise in ("mProjectPP", "Traceback", ".rb:"):       # Pwrake never started
        assert noise not in err, err
    assert not [d for d in os.listdir(out) if d.startswith("work-")]
