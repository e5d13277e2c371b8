"""A truncate made while a server holding chunks of the file is down must not leave that
server's chunks past the new size: once it is back, an extension of the file (truncate up, a
write past the end) has to read zeros in the hole (POSIX), never the old bytes. The truncate
either cuts every server's chunks or fails (EIO) with the file as it was (lib/namespace.c
set_size: the data first, the size after). The client refuses before cutting only when its member
list says the server is down, so the test waits until every member found it down (with a list
from a member that had not found it down yet, the truncate cut the live servers' chunks and then
failed EIO: bytes lost, the file's size unchanged). The second test makes that case on purpose:
a server stopped (SIGSTOP, as a hung node) just before the truncate, before any member's failure
detector can have found it down; the client now asks every data server first (lib/data_bcast.c)."""
import os
import signal

import pytest

import poolstatus
from chfsutil import err_name, get, io, owner, put, rand, stat, stop_every_thread

CHUNK = 4096
SIZE = 64 * CHUNK  # 64 chunks over 3 servers: each holds some
CUT = 100


def extend(pool, how):
    if how == "truncate":
        io(pool, "truncate", "/f", SIZE)
    else:  # one byte at the old end: the hole is [CUT, SIZE - 1)
        put(pool, "/f", b"\xff", off=SIZE - 1, create=False)


def expect_cut_then_extended(pool, how):
    extend(pool, how)
    got = get(pool, "/f")
    assert len(got) == SIZE
    assert got[:CUT] == DATA[:CUT]
    hole = got[CUT:SIZE - 1]
    stale = sum(1 for b in hole if b)
    assert stale == 0, f"{stale} non-zero bytes in the hole (the old data of a server that was down)"


DATA = rand(SIZE, 11).replace(b"\0", b"\1")  # no zero byte: any stale byte shows


@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["truncate", "write"])
@pytest.mark.parametrize("chfs_pool", [{"servers": 3, "extra_env": {"CHFS_CHUNK_SIZE": str(CHUNK)}}],
                         indirect=True)
def test_truncate_while_a_server_is_down_never_exposes_its_old_bytes(chfs_pool, how):
    pool = chfs_pool
    put(pool, "/f", DATA)
    own = owner(pool, "/f")
    victim = next(i for i, a in enumerate(pool.addrs) if a != own)
    down = pool.addrs[victim]
    pool.kill(victim)
    try:
        for a in pool.addrs:      # every member: the client's list comes from any of them
            if a != down:
                poolstatus.wait_view(pool.env, a, {down})
        r = io(pool, "truncate", "/f", CUT, check=False, timeout=60)
        assert r.returncode == 0 or err_name(r) == "EIO", r.stderr
    finally:
        pool.restart(victim)
    poolstatus.wait_view(pool.env, own, set())
    if stat(pool, "/f")[1] == CUT:  # the truncate took effect (the old code: also when it failed)
        expect_cut_then_extended(pool, how)
    else:  # refused: the file must be as it was, and a truncate now cuts
        assert r.returncode != 0, "the truncate succeeded but the size did not change"
        assert get(pool, "/f") == DATA, "a failed truncate lost bytes"
        io(pool, "truncate", "/f", CUT)
        expect_cut_then_extended(pool, how)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("chfs_pool", [{"servers": 3, "rpc_timeout_ms": 1500,
                                        "extra_env": {"CHFS_CHUNK_SIZE": str(CHUNK)}}],
                         indirect=True)
def test_truncate_right_after_a_server_hangs_cuts_nothing(chfs_pool):
    pool = chfs_pool
    put(pool, "/f", DATA)
    own = owner(pool, "/f")
    victim = next(i for i, a in enumerate(pool.addrs) if a != own)
    hung = pool.addrs[victim]
    env = dict(pool.env, CHFS_SERVER=",".join([own] + [a for a in pool.addrs if a not in (own, hung)]))
    try:
        stop_every_thread(pool.pids[victim])
        r = io(pool, "truncate", "/f", CUT, check=False, timeout=60, env=env)
        assert r.returncode != 0 and err_name(r) == "EIO", r.stderr
    finally:
        os.kill(pool.pids[victim], signal.SIGCONT)
    poolstatus.wait_all_up(pool.env, pool.addrs)
    assert stat(pool, "/f")[1] == SIZE, "a failed truncate changed the size"
    assert get(pool, "/f") == DATA, "a failed truncate lost bytes"
    io(pool, "truncate", "/f", CUT)
    expect_cut_then_extended(pool, "write")
