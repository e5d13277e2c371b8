"""A server that joins after a rename reached the backend (chfsd -b): a descriptor opened before
the rename writes chunks that the join moved to the new server. Those must reach the file's new
backend name too — also when the joiner is a member that left and comes back with its storage,
whose table still holds a name from before it left (relink_join.c)."""
import os
import signal

import pytest

import poolstatus
from chfsutil import get, io, python_env
from ci.testlib.chfs_pool import wait_gone

from holder import holding, write_now
from test_backend_flush import backend_bytes, make_pool  # noqa: F401 (fixture)
from test_backend_renames import backend_files


def only_on_the_backend(pool, name, data):
    """name has data in CHFS and on the backend, which has no other file."""
    io(pool, "sync")
    assert get(pool, "/" + name) == data
    assert backend_files(pool) == [name]
    assert backend_bytes(pool.backend, name) == data


@pytest.mark.timeout(180)
def test_a_descriptor_opened_before_a_rename_writes_to_the_new_name_on_a_server_that_joined_since(
        make_pool):
    pool = make_pool("-F", "0", servers=2)
    size = 2 << 20                                   # 32 chunks: some move to each new server
    io(pool, "put", "/a", "0", "create", input=os.urandom(size))
    io(pool, "sync")
    with holding(python_env(pool.env), "/a", 0, "Z", size) as holder:
        io(pool, "rename", "/a", "/b")
        io(pool, "sync")                             # the rename is on the backend: b, no a
        assert backend_files(pool) == ["b"]
        pool.add()
        pool.add()
        poolstatus.wait_settled(pool.env, 4)
        write_now(holder)
    only_on_the_backend(pool, "b", b"Z" * size)


@pytest.mark.timeout(240)
def test_a_member_that_left_and_joins_again_writes_to_the_name_a_rename_gave_meanwhile(make_pool):
    """x (with the others) learns a→b; x leaves the pool (SIGUSR1); b→c reaches the backend while
    x is out (nobody owes x anything: it is no member); x starts again on its storage and joins.
    Its relink.log still says b: the members must hand it c, or the holder's chunks that x owns
    now are flushed to a new b."""
    pool = make_pool("-F", "0", servers=3)
    size = 2 << 20
    io(pool, "put", "/a", "0", "create", input=os.urandom(size))
    io(pool, "sync")
    with holding(python_env(pool.env), "/a", 0, "Z", size) as holder:
        io(pool, "rename", "/a", "/b")
        io(pool, "sync")
        assert backend_files(pool) == ["b"]
        x = pool.n - 1                               # (not the bootstrap of the restart)
        xpid = pool.pids[x]
        os.kill(xpid, signal.SIGUSR1)                # leave: hand everything over, exit
        assert wait_gone(xpid, 90), "the leaving server did not exit"
        pool.pids[x] = pool.addrs[x] = None
        pool.env["CHFS_SERVER"] = ",".join(a for a in pool.addrs if a)
        poolstatus.wait_settled(pool.env, pool.n - 1, timeout=60)
        io(pool, "rename", "/b", "/c")
        io(pool, "sync")
        assert backend_files(pool) == ["c"]
        pool._start(x)                               # the same storage: joins again
        pool.env["CHFS_SERVER"] = ",".join(a for a in pool.addrs if a)
        poolstatus.wait_settled(pool.env, pool.n, timeout=60)
        write_now(holder)
    only_on_the_backend(pool, "c", b"Z" * size)
