"""A server that joins after a rename reached the backend (chfsd -b): a descriptor opened before
the rename writes chunks that the join moved to the new server. Those must reach the file's new
backend name too."""
import os
import subprocess
import sys

import pytest

import poolstatus
from chfsutil import get, io, python_env

from test_backend_flush import backend_bytes, make_pool  # noqa: F401 (fixture)
from test_backend_renames import backend_files

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
data = b"Z" * int(sys.argv[2])
assert lib.chfs_pwrite(fd, data, len(data), 0) == len(data), ctypes.get_errno()
assert lib.chfs_close(fd) == 0, ctypes.get_errno()
lib.chfs_term_without_sync()
print("done", flush=True)
"""


@pytest.mark.timeout(180)
@pytest.mark.xfail(strict=True, reason="a joining server has no relink table entry of files "
                   "renamed on the backend before it joined (design.md, Not yet)")
def test_a_descriptor_opened_before_a_rename_writes_to_the_new_name_on_a_server_that_joined_since(
        make_pool):
    pool = make_pool("-F", "0", servers=2)
    size = 2 << 20                                   # 32 chunks: some move to each new server
    io(pool, "put", "/a", "0", "create", input=os.urandom(size))
    io(pool, "sync")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "/a", str(size)],
                              env=python_env(pool.env), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        io(pool, "rename", "/a", "/b")
        io(pool, "sync")                             # the rename is on the backend: b, no a
        assert backend_files(pool) == ["b"]
        pool.add()
        pool.add()
        poolstatus.wait_settled(pool.env, 4)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "done"
        assert holder.wait(timeout=60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    io(pool, "sync")
    assert get(pool, "/b") == b"Z" * size
    assert backend_files(pool) == ["b"]
    assert backend_bytes(pool.backend, "b") == b"Z" * size
