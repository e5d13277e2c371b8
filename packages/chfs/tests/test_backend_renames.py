"""Renames and the backend's data (chfsd -b DIR): a file renamed several times before a sync,
and a file written through a descriptor opened before its rename reached the backend, end on
DIR under their final name only, with every byte — striped or of local placement."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import poolstatus
from chfsutil import get, io, owner, python_env

from holder import HOLDER
from test_backend_flush import backend_bytes, make_pool  # noqa: F401 (fixture)

PLACEMENTS = [("hash", 0), ("local", 0), ("local", 1)]   # (CHFS_PLACEMENT, CHFS_LOCAL_FASTPATH)


def placed(pool, placement, fastpath):
    return dict(pool.env, CHFS_PLACEMENT=placement, CHFS_LOCAL_FASTPATH=str(fastpath))


def backend_files(pool):
    out = []
    for dp, _, files in os.walk(pool.backend):
        out += [os.path.relpath(os.path.join(dp, f), pool.backend) for f in files]
    return sorted(out)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("placement,fastpath", PLACEMENTS)
def test_files_renamed_twice_before_a_sync_end_under_their_last_names_only(make_pool, placement,
                                                                           fastpath):
    pool = make_pool("-F", "0")
    env = placed(pool, placement, fastpath)
    want = {}
    for i in range(8):                  # names over 4 servers: both orders of the two renames
        data = random.Random(i).randbytes(150_000 + i)
        io(pool, "put", f"/a{i}", "0", "create", input=data, env=env)
        if i % 2:
            io(pool, "sync", env=env)   # half of them on the backend before the renames
        io(pool, "rename", f"/a{i}", f"/b{i}", env=env)
        io(pool, "rename", f"/b{i}", f"/c{i}", env=env)
        want[f"c{i}"] = data
    io(pool, "sync", env=env)
    assert backend_files(pool) == sorted(want)
    for name, data in want.items():
        assert backend_bytes(pool.backend, name) == data, name
        assert get(pool, "/" + name) == data


@pytest.mark.timeout(90)
@pytest.mark.parametrize("placement,fastpath", PLACEMENTS)
def test_a_descriptor_opened_before_a_rename_reached_the_backend_writes_to_the_new_name(
        make_pool, placement, fastpath):
    pool = make_pool("-F", "0")
    env = placed(pool, placement, fastpath)
    first = random.Random(5).randbytes(200_000)
    io(pool, "put", "/a", "0", "create", input=first, env=env)
    io(pool, "sync", env=env)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "/a", "70000", "+more"],
                              env=python_env(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        io(pool, "rename", "/a", "/b", env=env)
        io(pool, "sync", env=env)            # the rename is on the backend: b, no a
        assert backend_files(pool) == ["b"]
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "done"
        assert holder.wait(timeout=30) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    io(pool, "sync", env=env)
    want = first[:70000] + b"+more" + first[70005:]
    assert get(pool, "/b") == want
    assert backend_files(pool) == ["b"]
    assert backend_bytes(pool.backend, "b") == want


@pytest.mark.timeout(120)
@pytest.mark.parametrize("placement,fastpath", PLACEMENTS)
def test_a_new_file_under_a_renamed_files_old_name_keeps_both_before_a_sync(make_pool, placement,
                                                                             fastpath):
    """rename a -> b, then a new a, all before a sync (a log rotation, an editor's save): the
    backend ends with b holding the first bytes and a the new ones — whether or not the first a
    had reached the backend before the rename."""
    pool = make_pool("-F", "0")
    env = placed(pool, placement, fastpath)
    want = {}
    for i in range(6):                  # names over the servers; half flushed before the rename
        old = random.Random(100 + i).randbytes(200_000 + i)
        new = random.Random(200 + i).randbytes(120_000 + i)
        io(pool, "put", f"/log{i}", "0", "create", input=old, env=env)
        if i % 2:
            io(pool, "sync", env=env)
        io(pool, "rename", f"/log{i}", f"/log{i}.1", env=env)
        io(pool, "put", f"/log{i}", "0", "create", input=new, env=env)
        want[f"log{i}"], want[f"log{i}.1"] = new, old
    io(pool, "sync", env=env)
    got = {p: backend_bytes(pool.backend, p) for p in want}
    bad = sorted(p for p in want if got[p] != want[p])
    assert not bad, [(p, None if got[p] is None else len(got[p]), len(want[p])) for p in bad]
    assert backend_files(pool) == sorted(want)
    for p, data in want.items():                          # and CHFS serves the same
        assert io(pool, "get", "/" + p, env=env).stdout == data



@pytest.mark.timeout(180)
def test_a_server_down_when_a_rename_reached_the_backend_flushes_under_the_new_name(make_pool):
    """a -> b while a server holding dirty chunks of the file is killed; the server recording
    the rename stops (SIGTERM: it flushes its data, then applies the rename on the backend —
    the other server still down) and starts again; then the killed server restarts, b is
    written again, and a sync. The restarted server must flush neither the old chunks nor the
    new writes under the old name: the backend has b with every byte and no a."""
    pool = make_pool("-F", "0")
    a, b = "/old", "/new"
    q = pool.addrs.index(owner(pool, b))            # holds the rename's record
    x = next(j for j, addr in enumerate(pool.addrs) if j != q and addr != owner(pool, a))
    data = bytearray(random.Random(9).randbytes(2 << 20))   # 32 chunks: some on every server
    io(pool, "put", a, "0", "create", input=bytes(data))
    pool.kill(x, signal.SIGKILL)           # its chunks of a stay dirty in its map (-F 0)
    io(pool, "rename", a, b)
    xaddr, pool.addrs[x] = pool.addrs[x], None     # (q rejoins through a live server)
    pool.restart(q)                        # the rename reaches the backend, x down
    assert backend_files(pool) == [b[1:]]
    pool.addrs[x] = xaddr
    pool.restart(x)
    poolstatus.wait_settled(pool.env, pool.n)
    patch = b"written after the restart" * 4000       # 100 kB over chunks of several servers
    io(pool, "put", b, "300000", input=patch)
    data[300000:300000 + len(patch)] = patch
    io(pool, "sync")
    assert get(pool, b) == bytes(data)
    assert backend_files(pool) == [b[1:]]
    assert backend_bytes(pool.backend, b[1:]) == bytes(data)


def stopped_names(pool, placement, env):
    """(a, b, x, data): a written (synced when of local placement: its home keeps its entry, and
    so the backend name it had, for as long as it exists), and x a server holding a's data that
    owns neither name — the home of a local file, else any such server (2 MiB: chunks on every
    server, dirty on x as -U 2 holds them)."""
    for i in range(32):
        a, b = f"/old{i}", f"/new{i}"
        data = random.Random(i).randbytes(2 << 20)
        io(pool, "put", a, "0", "create", input=data, env=env)
        owners = {pool.addrs.index(owner(pool, a)), pool.addrs.index(owner(pool, b))}
        if placement == "local":
            io(pool, "sync", env=env)
            backing = io(pool, "localpath", a, env=env).stdout.decode().strip()
            x = next(j for j, d in enumerate(pool.dirs) if backing.startswith(d + "/"))
            if x in owners:
                io(pool, "unlink", a, env=env)
                continue
        else:
            x = next(j for j in range(pool.n) if j not in owners)
        return a, b, x, bytearray(data)
    raise AssertionError("no name pair owned by servers other than the file's home")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("placement", ["hash", "local"])
def test_a_server_stopped_when_a_rename_reached_the_backend_flushes_under_the_new_name(make_pool,
                                                                                       placement):
    """SIGSTOP (not a kill: the server never starts again, so it never asks for what it missed
    at a start-up) of a server holding a's data — dirty chunks, or the entry of a local file,
    which keeps its backend name — then a -> b, and the server recording the rename restarts
    (its shutdown applies the rename on the backend; the stopped server cannot be told). Then
    SIGCONT, a write to b, the flush threads (-U 2) and a sync. The resumed server must flush
    neither its old chunks nor the new write under the old name: it used to, at once (its flush
    threads) or in the sync's data phase, before the debtor's delivery reached it — a stale a on
    the backend, b missing those bytes."""
    pool = make_pool("-F", "1", "-U", "2")
    env = dict(pool.env, CHFS_PLACEMENT=placement)
    a, b, x, data = stopped_names(pool, placement, env)
    q = pool.addrs.index(owner(pool, b))            # holds the rename's record
    pid = pool.pids[x]
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(3)                      # found down by the others' failure detectors
        io(pool, "rename", a, b, env=env)
        xaddr, pool.addrs[x] = pool.addrs[x], None     # (q rejoins through a running server)
        pool.restart(q)                    # the rename reaches the backend, x stopped
        pool.addrs[x] = xaddr
        assert backend_files(pool) == [b[1:]]
    finally:
        os.kill(pid, signal.SIGCONT)
    poolstatus.wait_settled(pool.env, pool.n)
    poolstatus.wait_all_up(pool.env, pool.addrs)   # (a fast client asked one still saying x down)
    patch = random.Random(77).randbytes(1 << 20)    # over chunks of every server (or the home)
    io(pool, "put", b, "100000", input=patch, env=env)
    data[100000:100000 + len(patch)] = patch
    time.sleep(3)                          # the flush threads, 2 s after that write
    io(pool, "sync", env=env)
    assert get(pool, b) == bytes(data)
    assert backend_files(pool) == [b[1:]]
    assert backend_bytes(pool.backend, b[1:]) == bytes(data)
