"""chfsctl -A (add servers to a running pool) and chfsctl remove (graceful leave): the grown
pool's CHFS_SERVER line, the added servers counted by stop/status, progress and a bounded wait
for a leave, and clear refusals (no pool to add to, removing every member)."""
import os
import re
import signal
import subprocess
import time

import pytest

from ci.testlib.chfs_pool import stack_env, wait_gone
import chfsload
import poolstatus


def servers_of(out):
    return re.search(r'CHFS_SERVER="([^"]*)"; export CHFS_SERVER;', out).group(1).split(",")


@pytest.fixture
def ctl_pool(tmp_path):
    """A 2-server pool started by chfsctl in tmp_path/pool: (env, run(args...))."""
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    env["CHFS_RPC_TIMEOUT_MSEC"] = "5000"
    # Data over RPC, as on a multi-node pool: the local fast path's own rebalance defect is
    # test_rebalance.py's (FASTPATH_BUG).
    env["CHFS_LOCAL_FASTPATH"] = "0"
    env.pop("CHFS_SERVER", None)
    scratch = str(tmp_path / "pool")

    def run(*args, timeout=90):
        return subprocess.run(["chfsctl", "-c", scratch, *args], env=env, capture_output=True,
                              text=True, timeout=timeout)
    try:
        r = run("-N", "2", "start")
        assert r.returncode == 0, r.stderr
        env["CHFS_SERVER"] = ",".join(servers_of(r.stdout))
        yield env, run, scratch
    finally:
        for d in sorted(os.listdir(scratch)) if os.path.isdir(scratch) else []:
            try:  # every server, also those a failed test left running
                pid = int(open(os.path.join(scratch, d, "chfsd.pid")).read())
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
                wait_gone(pid)
            except (OSError, ValueError):
                pass


def assert_all(env, manifest, n):
    r = chfsload.verify(env, manifest)
    assert r["ok"] == n and not r["failed"] and not r["wrong"], (r["failed"][:5], r["wrong"][:5])


def pid_of(scratch, i):
    return int(open(os.path.join(scratch, f"srv{i}", "chfsd.pid")).read())


@pytest.mark.timeout(60)
def test_chfsctl_adds_a_server_then_removes_one_and_stop_covers_both(ctl_pool, tmp_path):
    env, run, scratch = ctl_pool
    manifest = str(tmp_path / "files.json")
    chfsload.write(env, manifest, 100, seed=5)
    e0 = poolstatus.epoch(env)
    r = run("-A", "start")
    assert r.returncode == 0, r.stderr
    added = open(os.path.join(scratch, "srv2", "info")).read().strip()
    grown = servers_of(r.stdout)
    assert len(grown) == 3 and added in grown, r.stdout
    assert os.path.exists(os.path.join(scratch, "srv2", "added-by-chfsctl"))
    env["CHFS_SERVER"] = ",".join(grown)
    poolstatus.wait_settled(env, 3, after_epoch=e0)
    assert_all(env, manifest, 100)

    st = run("-N", "2", "status")
    assert st.returncode == 0 and f"srv2 pid {pid_of(scratch, 2)} {added} running" in st.stdout, st.stdout

    # Removing every server of this host would leave no pool: refused, nothing stopped.
    r = run("remove", "localhost")
    assert r.returncode == 1 and "would leave the pool empty" in r.stderr, r.stderr
    assert len(poolstatus.status(env)) == 3

    first = open(os.path.join(scratch, "srv0", "info")).read().strip()
    pid0 = pid_of(scratch, 0)
    e1 = poolstatus.epoch(env)
    r = run("-w", "40", "remove", first)
    assert r.returncode == 0, r.stderr
    assert f"{first} (" in r.stderr and "leaving the pool" in r.stderr, r.stderr
    left = servers_of(r.stdout)
    assert sorted(left) == sorted(a for a in grown if a != first), r.stdout
    assert wait_gone(pid0, 5)
    env["CHFS_SERVER"] = ",".join(left)
    poolstatus.wait_settled(env, 2, after_epoch=e1)
    assert_all(env, manifest, 100)
    st = run("-N", "2", "status")
    assert st.returncode == 0 and f"srv0 {first} left the pool" in st.stdout, st.stdout

    pids = [pid_of(scratch, 1), pid_of(scratch, 2)]
    assert run("-N", "2", "stop").returncode == 0
    assert all(wait_gone(p, 1) for p in pids)


@pytest.mark.timeout(60)
def test_chfsctl_remove_gives_up_after_its_bound_and_says_so(ctl_pool):
    env, run, scratch = ctl_pool
    addr = open(os.path.join(scratch, "srv1", "info")).read().strip()
    pid = pid_of(scratch, 1)
    os.kill(pid, signal.SIGSTOP)  # cannot act on SIGUSR1 until continued
    try:
        t0 = time.time()
        r = run("-w", "2", "remove", addr)
        assert r.returncode == 1 and "did not leave within 2 s" in r.stderr, r.stderr
        assert time.time() - t0 < 15
    finally:
        os.kill(pid, signal.SIGCONT)
    # Continued, it acts on the pending SIGUSR1: it leaves the pool and exits.
    assert wait_gone(pid, 30), "the server did not leave once continued"
    left = poolstatus.status(env, via=open(os.path.join(scratch, "srv0", "info")).read().strip())
    assert list(left) == [open(os.path.join(scratch, "srv0", "info")).read().strip()], left


@pytest.mark.timeout(30)
def test_chfsctl_add_and_remove_refuse_clearly_without_a_pool(tmp_path):
    env = stack_env()
    env.pop("CHFS_SERVER", None)
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    r = subprocess.run(["chfsctl", "-c", str(tmp_path), "-A", "start"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "CHFS_SERVER" in r.stderr, r.stderr
    r = subprocess.run(["chfsctl", "-c", str(tmp_path), "-A", "stop"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "-A goes with start" in r.stderr, r.stderr
    r = subprocess.run(["chfsctl", "-c", str(tmp_path), "remove", "tcp://127.0.0.1:9"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "no running server at tcp://127.0.0.1:9" in r.stderr, r.stderr
    r = subprocess.run(["chfsctl", "remove"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
