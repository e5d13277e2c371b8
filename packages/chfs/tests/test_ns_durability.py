"""The namespace journal under crashes: chfsd killed with SIGKILL in the middle of a create
storm comes back serving every create it acknowledged (and nothing half-made), also when the
journal's tail was then damaged; a restarted server keeps serving and journalling."""
import os
import re
import signal
import subprocess
import time

import pytest

from chfsutil import err_name, io


def _acked(stderr):
    """mkfiles creates f000000, f000001, ... and stops at the first error: its number is how
    many creates were acknowledged before it."""
    m = re.search(r"mkfiles /storm/f(\d{6})", stderr)
    assert m, stderr
    return int(m.group(1))


def _names(pool):
    return io(pool, "ls", "/storm").stdout.decode().split()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1, "rpc_timeout_ms": 2000}], indirect=True)
def test_server_killed_during_create_storm_serves_every_acknowledged_create(chfs_pool):
    io(chfs_pool, "mkdir", "/storm")
    storm = subprocess.Popen(["chfs-io", "mkfiles", "/storm", "10000000"], env=chfs_pool.env,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert storm.poll() is None, "the storm ended early: " + storm.stderr.read()
    chfs_pool.kill(0, signal.SIGKILL)
    storm.wait(timeout=30)
    acked = _acked(storm.stderr.read())
    assert acked > 100, "too few creates before the kill to prove anything"
    chfs_pool.restart(0)
    names = _names(chfs_pool)
    # Every acknowledged create is there; at most the one in flight at the kill besides.
    assert names[:acked] == [f"f{i:06d}" for i in range(acked)]
    assert len(names) in (acked, acked + 1)
    for n in (names[0], names[acked // 2], names[-1]):
        assert io(chfs_pool, "stat", f"/storm/{n}").returncode == 0
    # It goes on journalling after the replay.
    io(chfs_pool, "create", "/storm/after")
    chfs_pool.restart(0)
    assert len(_names(chfs_pool)) == len(names) + 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_garbage_journal_tail_is_dropped_and_the_rest_served(chfs_pool):
    io(chfs_pool, "mkdir", "/storm")
    io(chfs_pool, "mkfiles", "/storm", "300")
    io(chfs_pool, "rename", "/storm/f000007", "/storm/moved")
    chfs_pool.kill(0, signal.SIGKILL)
    journal = os.path.join(chfs_pool.dirs[0], "ns.journal")
    size = os.path.getsize(journal)
    with open(journal, "ab") as f:
        f.write(os.urandom(1000))  # a torn append, or garbage
    chfs_pool.restart(0)
    names = _names(chfs_pool)
    assert len(names) == 300 and "moved" in names and "f000007" not in names
    assert "dropped the last 1000 bytes" in chfs_pool.log(0)
    assert os.path.getsize(journal) <= size + 200  # cut back, then the restart's own frames
    # New frames follow the valid ones: they replay after another restart.
    io(chfs_pool, "unlink", "/storm/f000000")
    chfs_pool.restart(0)
    names = _names(chfs_pool)
    assert len(names) == 299 and "f000000" not in names
    assert err_name(io(chfs_pool, "stat", "/storm/f000000", check=False)) == "ENOENT"
