"""Node-local (local-placement) files whose backing file other access paths use directly (FUSE
passthrough, the hook's fast path): metadata operations must keep that backing file exact —
an extending truncate extends it, and an explicit utimens is not overridden by the backing
file's own mtime (tar and cp -p set times right after writing)."""
import os

import pytest

from chfsutil import get, io, put, stat


def backing(pool, path):
    p = io(pool, "localpath", path).stdout.decode().strip()
    assert any(p.startswith(d) for d in pool.dirs), p
    return p


@pytest.mark.timeout(60)
def test_extending_truncate_extends_the_backing_file(chfs_pool):
    io(chfs_pool, "create", "/grow", 0, "local")
    put(chfs_pool, "/grow", b"q" * 1000, create=False)
    io(chfs_pool, "truncate", "/grow", 200000)
    path = backing(chfs_pool, "/grow")
    assert os.path.getsize(path) == 200000          # a direct reader sees the whole file
    with open(path, "rb") as f:
        assert f.read() == b"q" * 1000 + bytes(199000)
    assert stat(chfs_pool, "/grow")[1] == 200000
    io(chfs_pool, "truncate", "/grow", 10)
    assert os.path.getsize(path) == 10 and get(chfs_pool, "/grow") == b"q" * 10


@pytest.mark.timeout(60)
def test_utimens_sticks_on_a_local_file_until_its_data_changes(chfs_pool):
    io(chfs_pool, "create", "/times", 0, "local")
    put(chfs_pool, "/times", b"data", create=False)
    io(chfs_pool, "utime", "/times", 1000000000)     # what tar does after writing
    mtime = lambda: int(io(chfs_pool, "stat", "/times").stdout.split()[3])
    assert mtime() == 1000000000
    with open(backing(chfs_pool, "/times"), "r+b") as f:   # a later direct write
        f.write(b"DATA")
    assert mtime() > 1000000000
    assert get(chfs_pool, "/times") == b"DATA"
