"""Renames and the backend's data (chfsd -b DIR): a file renamed several times before a sync,
and a file written through a descriptor opened before its rename reached the backend, end on
DIR under their final name only, with every byte — striped or of local placement."""
import os
import random
import subprocess
import sys

import pytest

from chfsutil import get, io, python_env

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


HOLDER = r"""
import ctypes, os, sys
lib = ctypes.CDLL("libchfs.so.3", use_errno=True)
lib.chfs_pwrite.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
lib.chfs_pwrite.restype = ctypes.c_ssize_t
assert lib.chfs_init(None) == 0
fd = lib.chfs_open(sys.argv[1].encode(), os.O_RDWR)
assert fd >= 0, ctypes.get_errno()
print("open", flush=True)
sys.stdin.readline()
data = sys.argv[3].encode()
assert lib.chfs_pwrite(fd, data, len(data), int(sys.argv[2])) == len(data), ctypes.get_errno()
assert lib.chfs_close(fd) == 0, ctypes.get_errno()
lib.chfs_term_without_sync()
print("done", flush=True)
"""


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
