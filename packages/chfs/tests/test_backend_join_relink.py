"""A server that joins after a rename reached the backend (chfsd -b): a descriptor opened before
the rename writes chunks that the join moved to the new server. Those must reach the file's new
backend name too."""
import os
import subprocess
import sys

import pytest

import poolstatus
from chfsutil import get, io, python_env

from holder import HOLDER
from test_backend_flush import backend_bytes, make_pool  # noqa: F401 (fixture)
from test_backend_renames import backend_files


@pytest.mark.timeout(180)
def test_a_descriptor_opened_before_a_rename_writes_to_the_new_name_on_a_server_that_joined_since(
        make_pool):
    pool = make_pool("-F", "0", servers=2)
    size = 2 << 20                                   # 32 chunks: some move to each new server
    io(pool, "put", "/a", "0", "create", input=os.urandom(size))
    io(pool, "sync")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "/a", "0", "Z", str(size)],
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
