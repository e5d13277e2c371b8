"""Files of node-local placement (CHFS_PLACEMENT=local, chcp -l) reach the backend like striped
ones: whether written through chfsd or directly in their backing file (the local fast path,
FUSE passthrough and the hook write there, and no request tells the server), their bytes, size
and mode are on DIR after chfs_sync, after the flush threads' delay and after chfsctl stop. And
chown/chgrp reach the backend too."""
import os
import random
import re
import subprocess
import time

import pytest

from chfsutil import get, io, put

from test_backend_flush import backend_bytes, make_pool, wait_for  # noqa: F401 (fixture)


def local(pool, fastpath):
    env = dict(pool.env, CHFS_PLACEMENT="local", CHFS_LOCAL_FASTPATH="1" if fastpath else "0")
    return env


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fastpath", [0, 1])
def test_chfs_sync_puts_a_local_placement_file_on_the_backend(make_pool, fastpath):
    pool = make_pool("-F", "0")
    env = local(pool, fastpath)
    data = random.Random(21).randbytes(700_000)
    io(pool, "mkdir", "/out")
    io(pool, "put", "/out/l", "0", "create", input=data, env=env)
    io(pool, "put", "/empty", "0", "create", input=b"", env=env)
    io(pool, "chmod", "/out/l", "640")
    assert backend_bytes(pool.backend, "out/l") is None
    io(pool, "sync", env=env)
    assert backend_bytes(pool.backend, "out/l") == data
    assert backend_bytes(pool.backend, "empty") == b""
    assert os.stat(os.path.join(pool.backend, "out/l")).st_mode & 0o7777 == 0o640
    # Rewritten shorter in place (a cut and a write): the backend follows, size included.
    io(pool, "truncate", "/out/l", "1000", env=env)
    io(pool, "put", "/out/l", "10", input=b"changed", env=env)
    io(pool, "sync", env=env)
    assert backend_bytes(pool.backend, "out/l") == data[:10] + b"changed" + data[17:1000]
    io(pool, "unlink", "/out/l", env=env)                 # removed, and not flushed again
    io(pool, "sync", env=env)
    assert backend_bytes(pool.backend, "out/l") is None


@pytest.mark.timeout(60)
def test_direct_writes_to_a_local_files_backing_file_reach_the_backend(make_pool):
    """What FUSE passthrough and the hook do: write the backing file chfs_local_backing_path
    names, with no request to chfsd; the flush threads find the change (-U 1: after a second of
    quiet) and chfs_sync too."""
    pool = make_pool("-F", "1", "-U", "1")
    env = local(pool, 1)
    io(pool, "put", "/d", "0", "create", input=b"", env=env)
    backing = io(pool, "localpath", "/d", env=env).stdout.decode().strip()
    data = random.Random(22).randbytes(300_000)
    with open(backing, "r+b") as f:
        f.write(data)
    assert wait_for(lambda: backend_bytes(pool.backend, "d") == data, 20)
    with open(backing, "r+b") as f:                       # again, then at once by chfs_sync
        f.seek(5)
        f.write(b"again")
    io(pool, "sync", env=env)
    assert backend_bytes(pool.backend, "d") == data[:5] + b"again" + data[10:]
    assert get(pool, "/d") == data[:5] + b"again" + data[10:]


@pytest.mark.timeout(120)
def test_chfsctl_stop_puts_local_placement_files_on_the_backend(tmp_path):
    from ci.testlib.chfs_pool import stack_env
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    backend = tmp_path / "backend"
    backend.mkdir()
    ctl = ["chfsctl", "-N", "2", "-c", str(tmp_path / "pool"), "-b", str(backend), "-F", "0"]
    try:
        out = subprocess.run(ctl + ["start"], env=env, capture_output=True, text=True, timeout=60,
                             check=True).stdout
        env["CHFS_SERVER"] = re.match(r'CHFS_SERVER="([^"]+)"', out).group(1)
        env.update(CHFS_IO_NOSYNC="1", CHFS_PLACEMENT="local")
        files = {f"f{i}": os.urandom(50_000 + i) for i in range(6)}
        for name, data in files.items():
            subprocess.run(["chfs-io", "put", "/" + name, "0", "create"], input=data, env=env,
                           capture_output=True, timeout=60, check=True)
        assert os.listdir(backend) == []
        subprocess.run(ctl + ["stop"], env=env, capture_output=True, timeout=60, check=True)
        assert sorted(os.listdir(backend)) == sorted(files)
        for name, data in files.items():
            assert (backend / name).read_bytes() == data
    finally:
        subprocess.run(ctl + ["clean"], env=env, capture_output=True, timeout=60)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("placement", ["hash", "local"])
def test_chown_and_chgrp_reach_the_backend(make_pool, placement):
    pool = make_pool("-F", "0")
    env = dict(pool.env, CHFS_PLACEMENT=placement)
    io(pool, "put", "/o", "0", "create", input=b"owned", env=env)
    io(pool, "mkdir", "/dir")
    io(pool, "sync")
    io(pool, "chown", "/o", "1234", "5678")
    io(pool, "chown", "/dir", "4321", "8765")
    io(pool, "sync")
    st = os.stat(os.path.join(pool.backend, "o"))
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    st = os.stat(os.path.join(pool.backend, "dir"))
    assert (st.st_uid, st.st_gid) == (4321, 8765)
    assert backend_bytes(pool.backend, "o") == b"owned"


@pytest.mark.timeout(60)
def test_a_chown_the_backend_refuses_is_counted_and_holds_back_nothing(make_pool, tmp_path):
    """A chfsd that may not give files away (not root: here root without CAP_CHOWN) gets EPERM:
    the mode still reaches the backend, chfs_sync names the path and chlist -S counts it, and
    a later rename of the file is not held back behind the refused owner."""
    import shutil
    from ci.testlib.chfs_pool import stack_env
    path = stack_env()["PATH"]
    wrap = tmp_path / "wrap"
    wrap.mkdir()
    (wrap / "chfsd").write_text("#!/bin/sh\nexec setpriv --inh-caps=-chown --bounding-set=-chown "
                                f"{shutil.which('chfsd', path=path)} \"$@\"\n")
    (wrap / "chfsd").chmod(0o755)
    pool = make_pool("-F", "0", extra_env={"PATH": f"{wrap}:{path}"})
    io(pool, "put", "/o", "0", "create", input=b"owned")
    io(pool, "chown", "/o", "1234", "5678")
    io(pool, "chmod", "/o", "640")
    r = io(pool, "sync", check=False)
    assert r.returncode != 0 and "o (chown)" in r.stderr.decode(), r.stderr
    st = os.stat(os.path.join(pool.backend, "o"))
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o640)
    assert backend_bytes(pool.backend, "o") == b"owned"
    status = subprocess.run(["chlist", "-S"], env=pool.env, capture_output=True, text=True,
                            timeout=30, check=True).stdout
    assert sum(int(n) for n in re.findall(r"flush_failed=(\d+)", status)) >= 1, status
    io(pool, "rename", "/o", "/p")
    r = io(pool, "sync", check=False)
    assert "p (chown)" in r.stderr.decode(), r.stderr
    assert backend_bytes(pool.backend, "p") == b"owned"
    assert not os.path.lexists(os.path.join(pool.backend, "o"))


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fastpath", [0, 1])
def test_explicit_times_of_a_local_placement_file_reach_the_backend(make_pool, fastpath):
    """utimensat on a node-local file (tar -x, cp -p, rsync -t set a file's mtime after writing
    it): the backend copy must carry that mtime, not its backing file's (the moment of the last
    write) — whether set before the first flush, after it, or with no data change since."""
    pool = make_pool("-F", "0")
    env = local(pool, fastpath)
    io(pool, "put", "/t", "0", "create", input=b"x" * 5000, env=env)
    io(pool, "utime", "/t", "1000000000", env=env)
    io(pool, "sync", env=env)
    assert backend_bytes(pool.backend, "t") == b"x" * 5000
    assert os.stat(os.path.join(pool.backend, "t")).st_mtime == 1000000000
    io(pool, "utime", "/t", "1200000000", env=env)       # times only, after the flush
    io(pool, "sync", env=env)
    assert os.stat(os.path.join(pool.backend, "t")).st_mtime == 1200000000
    io(pool, "put", "/t", "0", input=b"y", env=env)        # written again, then times set
    io(pool, "utime", "/t", "1300000000", env=env)
    io(pool, "sync", env=env)
    assert backend_bytes(pool.backend, "t") == b"y" + b"x" * 4999
    assert os.stat(os.path.join(pool.backend, "t")).st_mtime == 1300000000


def copy_began(path, prev):
    """Has a flush thread's copy to the backend file begun? (It writes the bytes first and
    sets the times last: a first copy makes the file grow, a later one moves its mtime.)"""
    if prev is None:
        return os.path.getsize(path) > 0
    return os.stat(path).st_mtime_ns != prev


@pytest.mark.timeout(120)
def test_a_direct_write_during_a_local_files_flush_leaves_its_mtime_on_the_backend(make_pool):
    """A local file written directly in its backing file (no request: no attribute record
    reaches the entry's owner), flushed by a thread (-U 1) while another direct write lands in
    the middle of the copy. The copy sets the mtime it saw before that write; the next flush
    (the thread's, then chfs_sync) must set the new one — it used to take the backend's own
    change of times, made by the first flush after the write, for an explicit utimens and keep
    the older mtime. After the sync the backend's mtime is the backing file's, which is what
    CHFS's stat shows."""
    pool = make_pool("-F", "1", "-U", "1")
    env = local(pool, 1)
    io(pool, "put", "/w", "0", "create", input=b"", env=env)
    io(pool, "sync", env=env)                            # (its create's record: applied)
    backing = io(pool, "localpath", "/w", env=env).stdout.decode().strip()
    path = os.path.join(pool.backend, "w")
    prev = None                         # the backend's mtime after a try that came too late
    for attempt in range(4):            # (on a loaded machine the copy may end first: again)
        data = bytearray(random.Random(23 + attempt).randbytes(96 << 20))
        with open(backing, "r+b") as f:
            f.write(data)
        first = os.stat(backing).st_mtime_ns             # what the thread's copy will set
        end = time.time() + 20
        while not copy_began(path, prev) and time.time() < end:
            time.sleep(0.002)
        with open(backing, "r+b") as f:                          # lands while it copies
            f.seek(len(data) - 4)
            f.write(b"last")
        data[-4:] = b"last"
        landed = os.stat(backing).st_mtime_ns
        # (the copy had not set its times yet: the write landed before the end of the flush)
        if os.path.getsize(path) > 0 and os.stat(path).st_mtime_ns != first:
            break
        time.sleep(2.5)
        io(pool, "sync", env=env)
        prev = os.stat(path).st_mtime_ns
    else:
        pytest.fail("in 4 tries the flush ended before the second write each time: nothing tested")
    time.sleep(2.5)                                  # the thread copies it again after -U 1
    io(pool, "sync", env=env)
    assert backend_bytes(pool.backend, "w") == bytes(data)
    assert os.stat(backing).st_mtime_ns == landed                # (nothing wrote it since)
    assert os.stat(path).st_mtime_ns == landed
    _, _, _, mtime = io(pool, "stat", "/w", env=env).stdout.split()
    assert int(mtime) == landed // 1_000_000_000
