"""The shipped Slurm job scripts on a simulated 4-node Slurm cluster (sim_cluster).

slurmctld on the head, a slurmd on each of nodes 0-3 (ci/testlib/cluster_slurm.py), jobs
submitted from the host with the cluster's SLURM_CONF. Both job scripts run at once (one rank
per node leaves room for both), each must finish with its expected outputs and leave no server,
mount, storage directory or secret on any node; a job cancelled while its MPI job runs must
leave nothing either (its trap, and the epilog behind it).
"""
import csv
import os
import signal
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SLURM_DIR = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(SLURM_DIR))
NODES = [0, 1, 2, 3]


def job_env(sc, **extra):
    env = dict(sc.env)
    cache = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
    env.update({"CHFS_STACK_ROOT": ROOT, "CHFS_STACK_CACHE": cache})
    env.update(extra)
    return env


def submit_env(sc, script, workdir, **extra):
    env = job_env(sc, **extra)
    r = subprocess.run(["sbatch", "--parsable", "-N", "4", os.path.join(SLURM_DIR, script)],
                       env=env, cwd=workdir, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


def job_state(sc, job):
    r = sc.slurm.cmd("scontrol", "show", "job", "-o", job, check=False, timeout=30)
    for field in r.stdout.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return "GONE"


def wait_done(sc, jobs, timeout):
    end = time.time() + timeout
    states = {}
    while time.time() < end:
        states = {j: job_state(sc, j) for j in jobs}
        active = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
        if all(s not in active for s in states.values()):
            return states
        time.sleep(1)
    for j in jobs:
        sc.slurm.cmd("scancel", j, check=False)
    raise AssertionError(f"jobs not done after {timeout} s: {states}")


def wait_nodes_idle(sc, timeout=60):
    """Until the nodes are idle again: each node's epilog has finished."""
    sc.slurm.wait_idle(timeout)


def leftovers(sc, job):
    """What job left on the nodes: chfsd/chfuse processes, mounts, files, its secret."""
    found = []
    for i in NODES:
        for comm in ("chfsd", "chfuse"):
            if sc.pids_on(i, comm):
                found.append(f"node {i}: {comm} running")
        tmp = sc.node_tmp(i)
        found += [f"node {i}: /tmp/{n}" for n in os.listdir(tmp) if n.startswith(f"chfs-job-{job}")]
        holder = sc.cluster.holders[i]
        with open(f"/proc/{holder}/mounts") as f:
            found += [f"node {i}: mount {ln.split()[1]}" for ln in f if f"chfs-job-{job}" in ln]
    secret = os.path.expanduser(f"~/.chfs/job-{job}.secret")
    if os.path.exists(secret):
        found.append(secret)
    return found


@pytest.fixture(scope="module")
def workdir(sim_cluster):
    d = os.path.join(sim_cluster.shared, "slurm-jobs")
    os.makedirs(d, exist_ok=True)
    return d


@pytest.mark.netns
def test_srun_runs_one_task_on_each_of_four_nodes(sim_cluster):
    r = sim_cluster.slurm.cmd("srun", "-N", "4", "hostname", timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(sim_cluster.name(i) for i in NODES)


@pytest.fixture(scope="module")
def finished_jobs(sim_cluster, workdir):
    """Both job scripts, submitted together, run to the end: {script: (job id, state)}."""
    sc = sim_cluster
    jobs = {
        "chfs-ior.sbatch": submit_env(sc, "chfs-ior.sbatch", workdir,
                                      CHFS_JOB_IOR_BYTES="8M", CHFS_JOB_IOR_REPS="1"),
        "chfs-montage.sbatch": submit_env(sc, "chfs-montage.sbatch", workdir,
                                          CHFS_JOB_PRESET="tiny", CHFS_JOB_JOBS="2"),
    }
    states = wait_done(sc, list(jobs.values()), timeout=240)
    wait_nodes_idle(sc)
    return {s: (j, states[j]) for s, j in jobs.items()}


def job_log(workdir, script, job):
    with open(os.path.join(workdir, f"{script.split('.')[0]}-{job}.out")) as f:
        return f.read()


@pytest.mark.netns
@pytest.mark.timeout(400)
def test_ior_job_runs_mpiio_on_four_nodes_and_cleans_up(sim_cluster, workdir, finished_jobs):
    job, state = finished_jobs["chfs-ior.sbatch"]
    log = job_log(workdir, "chfs-ior.sbatch", job)
    assert state == "COMPLETED", log
    out = os.path.join(workdir, f"chfs-job-{job}")
    with open(os.path.join(out, "hostfile")) as f:
        assert sorted(f.read().split()) == sorted(sim_cluster.ip(i) for i in NODES)
    with open(os.path.join(out, "ior.csv")) as f:
        rows = list(csv.DictReader(f))
    cases = {(r["api"], r["mode"], r["layout"], r["op"]) for r in rows
             if r["ranks"] == "4" and r["xfer"] == "1048576" and float(r["mib_s"]) > 0}
    for mode in ("indep", "coll"):
        for layout in ("fpp", "shared"):
            for op in ("write", "read"):
                assert ("mpiio", mode, layout, op) in cases, rows
    assert "pool stopped and removed (exit 0)" in log, log
    assert leftovers(sim_cluster, job) == []


@pytest.mark.netns
@pytest.mark.timeout(400)
def test_montage_job_stages_the_mosaic_out_and_cleans_up(sim_cluster, workdir, finished_jobs):
    job, state = finished_jobs["chfs-montage.sbatch"]
    log = job_log(workdir, "chfs-montage.sbatch", job)
    assert state == "COMPLETED", log
    out = os.path.join(workdir, f"chfs-job-{job}", "montage")
    with open(os.path.join(out, "mosaic.fits"), "rb") as f:
        assert f.read(30).startswith(b"SIMPLE  =                    T"), log
    assert os.path.getsize(os.path.join(out, "mosaic.png")) > 1000
    assert "pool stopped and removed (exit 0)" in log, log
    assert leftovers(sim_cluster, job) == []


@pytest.mark.netns
@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["scancel", "sigkill"])
def test_job_cancelled_during_its_mpi_run_leaves_nothing_behind(sim_cluster, workdir, how):
    """scancel: SIGTERM, the job's trap cleans up; sigkill: the batch script is SIGKILLed (as an
    out-of-memory kill would), its trap cannot run and the epilog on each node must clean up."""
    sc = sim_cluster
    job = submit_env(sc, "chfs-ior.sbatch", workdir, CHFS_JOB_IOR_BYTES="1G",
                     CHFS_JOB_IOR_REPS="20")
    log = os.path.join(workdir, f"chfs-ior-{job}.out")
    end = time.time() + 120
    while time.time() < end:   # until the MPI job runs on the pool
        if os.path.exists(log) and "ior: 4 ranks" in open(log).read():
            break
        assert job_state(sc, job) in ("PENDING", "RUNNING", "CONFIGURING"), open(log).read()
        time.sleep(0.5)
    else:
        raise AssertionError(f"job {job} did not reach its MPI run in 120 s")
    time.sleep(2)
    assert all(sc.pids_on(i, "chfsd") for i in NODES)   # the pool is up on every node
    if how == "scancel":
        sc.slurm.cmd("scancel", job)
    else:
        killed = 0
        for i in NODES:
            for pid in sc.pids_on(i, "bash") + sc.pids_on(i, "slurm_script"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if f"job{int(job):05d}/slurm_script".encode() in f.read():
                            os.kill(pid, signal.SIGKILL)
                            killed += 1
                except OSError:
                    pass
        assert killed == 1
    state = wait_done(sc, [job], timeout=90)[job]
    wait_nodes_idle(sc)
    text = open(log).read()
    if how == "scancel":
        assert state == "CANCELLED", state
        assert "signal received: cleaning up" in text and "pool stopped and removed" in text, text
    else:
        assert state in ("CANCELLED", "FAILED"), state
        assert "pool stopped" not in text, text   # the trap did not run: the epilog cleaned up
    assert leftovers(sc, job) == [], text
