"""Write-back to the backend (chfsd -b DIR): data written in CHFS reach DIR/path — through the
flush threads after -U seconds of quiet, at chfs_sync, at shutdown, after a crash and restart —
and a backend that refuses them (full, read-only) gives a clear error while the data stay
readable in CHFS."""
import os
import random
import signal
import subprocess
import time

import pytest

import poolstatus
from chfsutil import get, io, put
from small_tmpfs import small_tmpfs  # noqa: F401 (fixture)

from test_backend import pool_with_backend


def wait_for(pred, timeout=15.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def backend_bytes(backend, rel):
    try:
        with open(os.path.join(backend, rel), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@pytest.fixture
def make_pool(tmp_path):
    pools = []

    def make(*args, **kw):
        pool, backend = pool_with_backend(tmp_path, args, **kw)
        pool.backend = backend
        pool.env["CHFS_IO_NOSYNC"] = "1"   # chfs-io ends without chfs_term's sync
        pools.append(pool)
        return pool
    yield make
    for p in pools:
        p.stop()


@pytest.mark.timeout(60)
def test_chfs_sync_puts_every_written_byte_on_the_backend(make_pool):
    pool = make_pool("-F", "0")              # no flush thread: only chfs_sync flushes
    data = random.Random(1).randbytes(1_000_000)
    io(pool, "mkdir", "/out")
    put(pool, "/out/a", data)
    put(pool, "/b", b"small")
    assert backend_bytes(pool.backend, "out/a") is None
    io(pool, "sync")
    assert backend_bytes(pool.backend, "out/a") == data
    assert backend_bytes(pool.backend, "b") == b"small"


@pytest.mark.timeout(60)
def test_flush_threads_write_back_after_the_io_aware_delay(make_pool):
    pool = make_pool("-F", "2", "-U", "1")
    data = random.Random(2).randbytes(300_000)
    put(pool, "/t", data)
    assert backend_bytes(pool.backend, "t") is None     # (not at once: -U 1)
    assert wait_for(lambda: backend_bytes(pool.backend, "t") == data, 15)


@pytest.mark.timeout(60)
def test_writes_to_a_backend_file_go_back_to_it(make_pool):
    pool = make_pool("-F", "0")
    data = bytearray(random.Random(3).randbytes(5 * 65536))
    with open(os.path.join(pool.backend, "in"), "wb") as f:
        f.write(data)
    put(pool, "/in", b"patched", off=70000, create=False)
    data[70000:70007] = b"patched"
    assert backend_bytes(pool.backend, "in") != bytes(data)
    io(pool, "sync")
    assert backend_bytes(pool.backend, "in") == bytes(data)


@pytest.mark.timeout(60)
def test_stopping_the_servers_flushes(make_pool):
    pool = make_pool("-F", "0")
    data = random.Random(4).randbytes(700_000)
    put(pool, "/s", data)
    assert backend_bytes(pool.backend, "s") is None
    pool.stop()                              # SIGTERM, as chfsctl stop
    assert backend_bytes(pool.backend, "s") == data


def kill_all(pool):
    for i in range(pool.n):
        pool.kill(i, signal.SIGKILL)


def restart_all(pool):
    """Start the killed servers again on their addresses, the first one alone."""
    saved = list(pool.addrs)
    pool.addrs = [saved[0]] + [None] * (pool.n - 1)
    pool.restart(0)                          # (no live member to join: back on its own list)
    for i in range(1, pool.n):
        pool.addrs[i] = saved[i]
        pool.restart(i)


@pytest.mark.timeout(90)
def test_dirty_data_of_a_killed_server_reach_the_backend_after_its_restart(make_pool):
    pool = make_pool("-F", "1", "-U", "3600")   # nothing flushes by itself for an hour
    data = random.Random(5).randbytes(40 * 65536)
    put(pool, "/k", data)
    kill_all(pool)
    assert backend_bytes(pool.backend, "k") is None
    restart_all(pool)
    # maps left by the killed servers are due at once after the restart, whatever -U says
    assert wait_for(lambda: backend_bytes(pool.backend, "k") == data, 30)


@pytest.mark.timeout(90)
def test_a_restart_flushes_at_once_even_with_a_delay_longer_than_the_uptime(make_pool):
    """The flush threads timed the delay on CLOCK_MONOTONIC and took 0 for "no local write",
    so a map found at start-up waited until the machine had been up for -U seconds: on a
    machine booted less than an hour before, the test above failed. -U 1e9 (31 years) is
    longer than any machine's uptime."""
    pool = make_pool("-F", "1", "-U", "1e9")
    data = random.Random(6).randbytes(12 * 65536)
    put(pool, "/u", data)
    kill_all(pool)
    assert backend_bytes(pool.backend, "u") is None
    restart_all(pool)
    assert wait_for(lambda: backend_bytes(pool.backend, "u") == data, 30)


@pytest.mark.timeout(60)
def test_a_local_file_last_written_before_the_boot_is_flushed_by_its_mtime(make_pool):
    """A local-placement file written through the node-local fast path tells the server
    nothing: the flush threads time it by its backing file's mtime (plus -U). Its entry, made
    at its create, took 0 for "no write noted" on CLOCK_MONOTONIC (seconds since boot), so a
    backing file last written before the boot (a storage directory kept across a reboot: here
    its mtime set to 2000-01-01) waited until the machine had been up for -U seconds. -U 1e8
    (3.2 years) has long passed since that mtime: due at once."""
    pool = make_pool("-F", "1", "-U", "1e8")
    env = dict(pool.env, CHFS_PLACEMENT="local", CHFS_LOCAL_FASTPATH="1")
    data = random.Random(16).randbytes(300_000)
    io(pool, "put", "/old", "0", "create", input=data, env=env)
    backing = io(pool, "localpath", "/old", env=env).stdout.decode().strip()
    os.utime(backing, (946684800, 946684800))
    assert wait_for(lambda: backend_bytes(pool.backend, "old") == data, 20)


def chfs_stat(pool, path):
    """(size, mtime in whole seconds) as CHFS shows them."""
    _, size, _, mtime = io(pool, "stat", path).stdout.split()
    return int(size), int(mtime)


@pytest.mark.timeout(90)
def test_a_write_during_a_flush_leaves_the_last_bytes_size_and_mtime_on_the_backend(make_pool):
    """A synced file rewritten: the flush thread (-U 1) starts copying, another write lands
    while it copies, the thread copies again a second later, then chfs_sync. The backend ends
    with the last bytes and CHFS's size and mtime — not the time of the last copy."""
    pool = make_pool("-F", "1", "-U", "1")
    path = os.path.join(pool.backend, "w")
    put(pool, "/w", random.Random(7).randbytes(16 << 20))
    io(pool, "sync")
    flushed = os.stat(path).st_mtime_ns
    time.sleep(1.1)
    data = bytearray(random.Random(8).randbytes(16 << 20))
    put(pool, "/w", data, create=False)
    assert wait_for(lambda: os.stat(path).st_mtime_ns != flushed, 15)   # the copy has begun
    put(pool, "/w", b"last write", off=len(data) - 5, create=False)      # (also grows the file)
    data[len(data) - 5:] = b"last write"
    time.sleep(2.5)                      # the thread copies it again, a second after that write
    io(pool, "sync")
    st = os.stat(path)
    assert backend_bytes(pool.backend, "w") == bytes(data)
    size, mtime = chfs_stat(pool, "/w")
    assert size == len(data)
    assert (st.st_size, int(st.st_mtime)) == (size, mtime)


@pytest.mark.timeout(90)
def test_a_full_backend_gives_a_clear_error_and_keeps_the_data_in_chfs(tmp_path, small_tmpfs):
    from ci.testlib.chfs_pool import ChfsPool
    pool = ChfsPool(tmp=str(tmp_path / "pool"), chfsd_args=["-b", small_tmpfs, "-F", "0"],
                    extra_env={"CHFS_IO_NOSYNC": "1"})
    try:
        put(pool, "/fits", b"ok")
        io(pool, "sync")
        data = random.Random(6).randbytes(3 << 20)   # 3 MiB into a 1 MiB backend
        put(pool, "/big", data)
        r = io(pool, "sync", check=False)
        assert r.returncode != 0
        err = r.stderr.decode()
        assert "big: No space left on device" in err and "EIO" in err, err
        assert get(pool, "/big") == data                          # still readable from CHFS
        status = pool.run(["chlist", "-S"]).stdout
        assert "flush_failed=1" in status, status
        assert backend_bytes(small_tmpfs, "fits") == b"ok"        # the rest was flushed
        subprocess.run(["mount", "-o", "remount,size=8m", small_tmpfs], check=True)  # room again
        io(pool, "sync")
        assert backend_bytes(small_tmpfs, "big") == data
        assert "flush_failed=1" not in pool.run(["chlist", "-S"]).stdout
    finally:
        pool.stop()


@pytest.mark.timeout(60)
def test_chfs_term_syncs_and_term_without_sync_does_not(make_pool):
    pool = make_pool("-F", "0")
    env = dict(pool.env)
    env.pop("CHFS_IO_NOSYNC")
    put(pool, "/nosync", b"x" * 1000)                             # chfs_term_without_sync
    assert backend_bytes(pool.backend, "nosync") is None
    io(pool, "put", "/synced", 0, "create", input=b"y" * 1000, env=env)   # chfs_term
    assert backend_bytes(pool.backend, "synced") == b"y" * 1000


@pytest.mark.timeout(120)
def test_chfsctl_b_reads_through_and_stop_flushes(tmp_path):
    import re
    from ci.testlib.chfs_pool import stack_env
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    backend = tmp_path / "backend"
    (backend / "in").mkdir(parents=True)
    (backend / "in" / "x").write_bytes(b"from the backend")
    ctl = ["chfsctl", "-N", "3", "-c", str(tmp_path / "pool"), "-b", str(backend), "-F", "0"]
    try:
        out = subprocess.run(ctl + ["start"], env=env, capture_output=True, text=True, timeout=60,
                             check=True).stdout
        m = re.fullmatch(r'CHFS_SERVER="([^"]+)"; export CHFS_SERVER;\n'
                         r'CHFS_BACKEND_PATH="([^"]+)"; export CHFS_BACKEND_PATH;\n', out)
        assert m and m.group(2) == str(backend), out
        env["CHFS_SERVER"] = m.group(1)
        # The servers join one by one, and a join's rebalance flushes a dirty chunk before
        # handing it over: /out written before the pool settled reached the backend before the
        # stop (seen once at load 17 on 2 cores, in `ci/test --no-io-uring`'s core run).
        poolstatus.wait_settled(env, 3)
        env["CHFS_IO_NOSYNC"] = "1"
        run = lambda *a, **kw: subprocess.run(list(a), env=env, capture_output=True, timeout=60,
                                              check=True, **kw).stdout
        assert run("chfs-io", "get", "/in/x") == b"from the backend"
        data = os.urandom(2 << 20)
        run("chfs-io", "put", "/out", "0", "create", input=data)
        assert not (backend / "out").exists()
        status = run("chlist", "-S").decode()
        assert "dirty_files=1" in status, status
        run(*ctl, "stop")
        assert (backend / "out").read_bytes() == data
    finally:
        subprocess.run(ctl + ["clean"], env=env, timeout=60)
