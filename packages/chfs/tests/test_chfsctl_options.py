"""chfsctl's options HPC job scripts use (as upstream CHFS 3.x's chfsctl): -L a log directory
with one file per server, -x variables exported to every server, -C NUMA binding through
numactl (a clear error without it), -m/-M a chfuse mount on every host that stop unmounts.
Real servers on this host; -b/-F/-U are covered by test_backend_flush.py."""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess

import pytest

from ci.testlib.chfs_pool import stack_env, wait_gone


@pytest.fixture
def ctl(tmp_path):
    """run(options..., command) -> CompletedProcess; every pool it started is killed after."""
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    scratch = str(tmp_path / "pool")

    def run(*args, check=True, extra_env=None):
        argv = ["chfsctl", "-c", scratch] + list(args)
        r = subprocess.run(argv, env=dict(env, **(extra_env or {})), capture_output=True,
                           text=True, timeout=90, check=False)
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        if r.returncode == 0 and args[-1] == "start":
            env["CHFS_SERVER"] = re.search(r'CHFS_SERVER="([^"]+)"', r.stdout).group(1)
        return r
    run.env, run.scratch = env, scratch
    yield run
    # Every server any start left (by pid file: a start's options, e.g. -x of a variable set
    # only for that call, need not be valid for a clean), then the storage.
    for pidfile in glob.glob(f"{scratch}*/srv*/chfsd.pid"):
        try:
            os.kill(int(open(pidfile).read()), signal.SIGKILL)
        except (ValueError, OSError):
            pass
    for d in glob.glob(f"{scratch}*"):
        shutil.rmtree(d, ignore_errors=True)


def pid(scratch, i):
    with open(os.path.join(scratch, f"srv{i}", "chfsd.pid")) as f:
        return int(f.read())


@pytest.mark.timeout(120)
def test_L_gives_each_server_its_own_log_file_in_the_directory(ctl, tmp_path):
    logs = tmp_path / "logs" / "new"   # created by chfsctl
    ctl("-N", "2", "-L", str(logs), "start")
    host = socket.gethostname().split(".")[0]
    for i in range(2):
        with open(os.path.join(ctl.scratch, f"srv{i}", "info")) as f:
            addr = f.read().strip()
        text = (logs / f"chfsd-{host}-srv{i}.log").read_text()
        # its own start-up line, not the other server's (the old -L wrote both to one file)
        assert f"serving {ctl.scratch}/srv{i} on {addr}" in text, text
        assert f"srv{1 - i} on" not in text, text
    assert sorted(os.listdir(logs)) == [f"chfsd-{host}-srv0.log", f"chfsd-{host}-srv1.log"]


def environ(p):
    with open(f"/proc/{p}/environ", "rb") as f:
        return set(f.read().decode().split("\0"))


@pytest.mark.timeout(120)
def test_x_exports_variables_to_every_server(ctl):
    ctl("-N", "2", "-x", "CHFS_TEST_FROM_HERE", "-x", "CHFS_TEST_SET=a=b c", "start",
        extra_env={"CHFS_TEST_FROM_HERE": "value here"})
    for i in range(2):
        env = environ(pid(ctl.scratch, i))
        assert {"CHFS_TEST_FROM_HERE=value here", "CHFS_TEST_SET=a=b c"} <= env
    r = ctl("-x", "CHFS_TEST_UNSET_VARIABLE", "start", check=False)
    assert r.returncode == 1 and "-x CHFS_TEST_UNSET_VARIABLE: not set here" in r.stderr, r.stderr
    r = ctl("-x", "1BAD", "start", check=False)
    assert r.returncode == 1 and "expected NAME or NAME=VALUE" in r.stderr, r.stderr


@pytest.mark.timeout(120)
def test_C_binds_the_servers_to_a_numa_node_or_says_numactl_is_missing(ctl):
    if not shutil.which("numactl"):
        r = ctl("-C", "0", "start", check=False)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "-C 0: numactl is not installed on localhost" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(ctl.scratch, "srv0", "chfsd.pid"))
        return
    ctl("-N", "2", "-C", "0", "start")
    with open("/sys/devices/system/node/node0/cpulist") as f:
        cpus = f.read().strip()
    for i in range(2):
        p = pid(ctl.scratch, i)
        with open(f"/proc/{p}/status") as f:
            status = f.read()
        assert re.search(rf"^Cpus_allowed_list:\s+{re.escape(cpus)}$", status, re.M), status
        with open(f"/proc/{p}/numa_maps") as f:
            policies = {line.split()[1] for line in f}
        assert policies == {"bind:0"}, policies    # --membind=0 (the default policy otherwise)
    nodes = os.listdir("/sys/devices/system/node")
    missing = max(int(n[4:]) for n in nodes if re.fullmatch(r"node\d+", n)) + 1
    r = ctl("-c", ctl.scratch + "-missing", "-C", str(missing), "start", check=False)
    assert r.returncode == 1 and "failed to start" in r.stderr, r.stderr


def mounted(d):
    """From the mount table: a stat (mountpoint -q) of a mount whose daemon does not answer
    fails, and the clean-up below would leave it mounted."""
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == d for line in f)


@pytest.mark.timeout(120)
def test_m_mounts_the_pool_with_chfuse_and_stop_unmounts_it(ctl, tmp_path):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    mnt = str(tmp_path / "mnt")
    try:
        ctl("-N", "2", "-m", mnt, "-M", "start")          # -M: not yet
        assert not mounted(mnt)
        r = ctl("-N", "2", "-m", mnt, "-M", "status")
        assert "localhost mount " + mnt + " not mounted" in r.stdout, r.stdout
        ctl("-N", "2", "-m", mnt, "stop")
        ctl("-N", "2", "-m", mnt, "start")
        assert mounted(mnt)
        with open(os.path.join(mnt, "through-fuse"), "w") as f:
            f.write("written through the mount")
        got = subprocess.run(["chfs-io", "get", "/through-fuse"], env=ctl.env,
                             capture_output=True, timeout=30, check=True).stdout
        assert got == b"written through the mount"
        r = ctl("-N", "2", "-m", mnt, "status")
        assert "localhost mount " + mnt + " mounted" in r.stdout, r.stdout
        ctl("-N", "2", "-m", mnt, "stop")
        assert not mounted(mnt)
        r = ctl("-M", "start", check=False)
        assert r.returncode == 1 and "-M goes with -m" in r.stderr, r.stderr
    finally:
        if mounted(mnt):
            subprocess.run(["umount", "-l", mnt])


@pytest.mark.timeout(120)
def test_stop_with_fewer_servers_than_the_pool_names_those_left_running(ctl):
    """The pool was started with -N 3; a stop without -N stops DIR/srv0 only. It used to say
    nothing and exit 0, leaving two servers (and their dirty data) behind."""
    ctl("-N", "3", "start")
    pids = [pid(ctl.scratch, i) for i in range(3)]
    r = ctl("stop", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    left = [f"{ctl.scratch}/srv1", f"{ctl.scratch}/srv2"]
    assert all(d in r.stderr for d in left) and "-N/-h" in r.stderr, r.stderr
    os.kill(pids[1], 0)                      # still running, as the message says
    r = ctl("-N", "3", "stop", check=False)  # (the sync fails: srv0 is gone; says so, stops)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "still running" not in r.stderr, r.stderr
    for p in pids:
        assert wait_gone(p, 5), f"server {p} still running after stop -N 3"
