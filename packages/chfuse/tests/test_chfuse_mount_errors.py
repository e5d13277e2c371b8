"""Mount life cycle and errors: daemon mode, and one clear line, a non-zero exit and nothing left
mounted for a missing mount point, an unreachable pool, a bad option or a busy unmount."""
import os
import signal
import socket
import subprocess
import time

from chfuse_util import force_unmount, is_mounted, tool


def run_chfuse(env, *args, timeout=60):
    return subprocess.run([tool("chfuse"), "--foreground", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_help_and_bad_usage(chfs_pool):
    r = subprocess.run([tool("chfuse"), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "nopassthrough" in r.stdout and "MOUNTPOINT" in r.stdout
    r = run_chfuse(chfs_pool.env)
    assert r.returncode == 2 and "missing MOUNTPOINT" in r.stderr


def test_missing_mount_point(chfs_pool, tmp_path):
    missing = str(tmp_path / "nope")
    r = run_chfuse(chfs_pool.env, missing)
    assert r.returncode == 1
    assert r.stderr.strip() == f"chfuse: mount point {missing}: No such file or directory"
    assert not is_mounted(missing)


def test_mount_point_is_a_file(chfs_pool, tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    r = run_chfuse(chfs_pool.env, str(f))
    assert r.returncode == 1 and "Not a directory" in r.stderr


def test_unreachable_pool(chfs_pool, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = dict(chfs_pool.env, CHFS_SERVER=f"tcp://127.0.0.1:{free_tcp_port()}",
               CHFS_RPC_TIMEOUT_MSEC="2000")
    t0 = time.monotonic()
    r = run_chfuse(env, str(mnt))
    assert r.returncode == 1
    assert "chfuse: cannot join the CHFS pool at tcp://127.0.0.1:" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 30
    assert not is_mounted(str(mnt))
    env.pop("CHFS_SERVER")
    r = run_chfuse(env, str(mnt))
    assert r.returncode == 1 and "CHFS_SERVER is not set" in r.stderr


def test_unknown_fuse_option(chfs_pool, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_chfuse(chfs_pool.env, "-o", "no_such_option", str(mnt))
    assert r.returncode != 0 and "no_such_option" in r.stderr
    assert not is_mounted(str(mnt))


def test_busy_mount_is_refused_then_unmounts(chfs_pool, chfuse_mount):
    m = chfuse_mount(chfs_pool.env)
    os.mkdir(f"{m.path}/d")
    holder = subprocess.Popen(["sleep", "60"], cwd=f"{m.path}/d")
    try:
        r = subprocess.run(["fusermount3", "-u", m.path], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode != 0
        assert "Device or resource busy" in r.stderr, r.stderr
        assert is_mounted(m.path)
        assert os.listdir(m.path) == ["d"]  # still serving
    finally:
        holder.kill()
        holder.wait(timeout=10)
    m.unmount()


def test_daemon_mode_detaches_and_exits_at_unmount(chfs_pool, tmp_path):
    mnt, stats = tmp_path / "mnt", tmp_path / "stats"
    mnt.mkdir()
    try:
        r = subprocess.run([tool("chfuse"), "-o", f"stats={stats}", str(mnt)], env=chfs_pool.env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert is_mounted(str(mnt))  # mounted before the parent returns
        (mnt / "f").write_text("through a detached daemon\n")
        assert (mnt / "f").read_text() == "through a detached daemon\n"
        r = subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        end = time.time() + 30
        while not stats.exists() and time.time() < end:  # written as the daemon exits
            time.sleep(0.1)
        assert "open_requests" in stats.read_text()
    finally:
        force_unmount(str(mnt))
    assert not is_mounted(str(mnt))


def test_sigusr1_writes_stats_and_keeps_serving(chfs_pool, chfuse_mount):
    """SIGUSR1 dumps the counters (README); it used to kill the daemon, because libchfs's
    threads, started before chfuse blocked the signal, took its default action."""
    m = chfuse_mount(chfs_pool.env)
    with open(f"{m.path}/f", "w") as f:
        f.write("x")
    for _ in range(3):
        m.proc.send_signal(signal.SIGUSR1)
        end = time.time() + 10
        while not os.path.exists(m.stats_path) and time.time() < end and m.proc.poll() is None:
            time.sleep(0.05)
        assert m.proc.poll() is None, f"chfuse exited with {m.proc.returncode} on SIGUSR1"
        assert os.path.exists(m.stats_path)
        os.unlink(m.stats_path)
    assert open(f"{m.path}/f").read() == "x"
    stats = m.unmount()
    assert stats["open_requests"] >= 2, stats
