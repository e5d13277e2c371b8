"""An unlinked file stays unlinked on the backend (chfsd -b DIR): the data a process keeps of
a file removed while it was open (POSIX: readable and writable through the descriptor until
its last close) are never flushed back under the name the file no longer has — neither by
the flush threads after a write through the descriptor, nor by a sync, nor by a server that
restarts while the file is still held."""
import contextlib
import os
import random
import signal
import time

import pytest

import poolstatus
from chfsutil import get, io, owner, python_env
from holder import holding, write_now

from test_backend_flush import backend_bytes, make_pool, wait_for  # noqa: F401 (fixture)
from test_backend_renames import PLACEMENTS, backend_files, placed


@pytest.mark.timeout(90)
@pytest.mark.parametrize("placement,fastpath", PLACEMENTS)
def test_a_write_through_a_descriptor_of_an_unlinked_file_does_not_bring_it_back(
        make_pool, placement, fastpath):
    pool = make_pool("-F", "1", "-U", "1")
    env = placed(pool, placement, fastpath)
    io(pool, "put", "/f", "0", "create", input=random.Random(3).randbytes(200_000), env=env)
    io(pool, "sync", env=env)
    assert backend_files(pool) == ["f"]
    with holding(python_env(env), "/f", 70000, "+more") as holder:
        io(pool, "unlink", "/f", env=env)
        assert wait_for(lambda: backend_files(pool) == [], 10)   # the removal reached it
        write_now(holder)                             # a write, then its last close
    time.sleep(2.5)                                   # the flush threads, -U 1 after it
    io(pool, "sync", env=env)
    assert backend_files(pool) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("placement,fastpath", PLACEMENTS)
def test_a_server_restarted_while_an_unlinked_file_is_held_does_not_bring_it_back(
        make_pool, placement, fastpath):
    """The data of the held file are still on their servers when those restart; a restart
    used to flush what its write-back maps listed, under the old name."""
    pool = make_pool("-F", "1", "-U", "1")
    env = placed(pool, placement, fastpath)
    io(pool, "put", "/f", "0", "create", input=random.Random(4).randbytes(300_000), env=env)
    with holding(python_env(env), "/f", 1000, "+held") as holder:
        io(pool, "unlink", "/f", env=env)
        for i in range(pool.n):
            pool.restart(i)
        time.sleep(2.5)
        io(pool, "sync", env=env)
        assert backend_files(pool) == []
        write_now(holder)
    io(pool, "sync", env=env)
    assert backend_files(pool) == []


@pytest.mark.timeout(180)
def test_a_server_that_joined_while_an_unlinked_file_is_held_does_not_bring_it_back(make_pool):
    """WOP_DATA_UNNAMED reached the members of the unlink's time; servers that join later take
    chunks of the held file, and the holder's writes to them still carry the old backend name.
    Flushed at once (-U -1), they made the file again on the backend."""
    pool = make_pool("-F", "1", "-U", "-1", servers=2)
    size = 2 << 20                                    # 32 chunks: some move to each new server
    io(pool, "put", "/f", "0", "create", input=random.Random(5).randbytes(size))
    io(pool, "sync")
    assert backend_files(pool) == ["f"]
    with holding(python_env(pool.env), "/f", 0, "Z", size) as holder:
        io(pool, "unlink", "/f")
        assert wait_for(lambda: backend_files(pool) == [], 10)
        pool.add()
        pool.add()
        poolstatus.wait_settled(pool.env, 4)
        write_now(holder)                             # every chunk, then its last close
    time.sleep(1.5)
    io(pool, "sync")
    assert backend_files(pool) == []



@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["killed", "stopped", "killed-while-held"])
def test_a_server_down_when_a_file_was_removed_does_not_bring_it_back(make_pool, how):
    """A file is written (2 MiB: chunks on every server), one server holding some of them is
    killed (or stopped: SIGSTOP), the file is removed (while a process holds it open, for
    killed-while-held), and a new, shorter file is made under the same name; the server
    restarts (resumes), its flush threads run, a sync follows. The removal's DATA_REMOVE (or
    DATA_UNNAMED) could not reach it and nothing told it later, so its write-back map still
    listed the old file's chunks under that name: flushed, they came back on the backend over
    the new file (1.9 MB of old bytes around the new file's 32)."""
    pool = make_pool("-F", "1", "-U", "1")
    name = "/f"
    x = next(j for j, addr in enumerate(pool.addrs) if addr != owner(pool, name))
    io(pool, "put", name, "0", "create", input=random.Random(6).randbytes(2 << 20))
    new = b"the new file under the old name\n"
    with contextlib.ExitStack() as held:
        if how == "killed-while-held":
            holder = held.enter_context(holding(python_env(pool.env), name, 0, "+held"))
        if how == "stopped":
            os.kill(pool.pids[x], signal.SIGSTOP)
            held.callback(os.kill, pool.pids[x], signal.SIGCONT)
        else:
            pool.kill(x, signal.SIGKILL)
        io(pool, "unlink", name)
        io(pool, "put", name, "0", "create", input=new)
        if how == "stopped":
            held.close()                             # SIGCONT
        else:
            pool.restart(x)
        poolstatus.wait_settled(pool.env, pool.n)
        time.sleep(2.5)                              # the flush threads, -U 1 after the writes
        io(pool, "sync")
        assert get(pool, name) == new
        assert backend_files(pool) == ["f"]
        got = backend_bytes(pool.backend, "f")
        assert got == new, f"backend has {len(got)} bytes, want {len(new)}"
        if how == "killed-while-held":
            write_now(holder)                        # a write through it, then its last close
    io(pool, "unlink", name)
    io(pool, "sync")
    pool.restart(x)                                  # and no later start brings it back
    poolstatus.wait_settled(pool.env, pool.n)
    time.sleep(1.5)
    io(pool, "sync")
    assert backend_files(pool) == []
