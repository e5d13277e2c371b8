"""The shared pool of `pytest.mark.module_pool` modules (conftest.py, ci/testlib/chfs_pool.py):
what the next test gets is as fresh as a new pool — an empty namespace and empty storage — and a
pool that a test left with a server down is not lent again."""
import os
import signal
import subprocess

import pytest

from ci.testlib.chfs_pool import ChfsPool


def io(pool, *args, data=None):
    subprocess.run(["chfs-io", *map(str, args)], input=data, env=pool.env, check=True,
                   capture_output=True, timeout=60)


@pytest.fixture
def pool(tmp_path):
    p = ChfsPool(tmp=str(tmp_path / "pool"))
    try:
        yield p
    finally:
        p.stop()


@pytest.mark.timeout(120)
def test_wipe_leaves_an_empty_namespace_and_empty_storage(pool):
    io(pool, "mkdir", "/d")
    io(pool, "mkdir", "/d/e")
    io(pool, "put", "/d/e/f", 0, "create", data=os.urandom(300000))  # chunks on every server
    io(pool, "symlink", "/nowhere", "/d/s")
    io(pool, "link", "/d/e/f", "/g")
    io(pool, "create", "/l", 0, "local")
    io(pool, "put", "/l", 0, data=b"local")
    io(pool, "mkfiles", "/d/many", 200)
    assert pool._data_files()
    assert pool.wipe(), pool.wipe_error
    assert pool.run(["chfind", "/"]).stdout == "/\n"
    assert pool._data_files() == []
    io(pool, "put", "/d/e/f", 0, "create", data=b"again")  # the names are free again
    assert pool.wipe(), pool.wipe_error


@pytest.mark.timeout(120)
def test_a_pool_with_a_server_down_or_added_is_not_wiped_for_reuse(pool):
    i = pool.add()
    assert not pool.wipe() and "5 servers, started with 4" in pool.wipe_error
    pool.kill(i)
    pool.kill(1, signal.SIGKILL)
    assert not pool.wipe() and pool.wipe_error == "server 1 is not running"
