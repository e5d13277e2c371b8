"""The writer's size report rides on its WRITE to the owner of the file's name (issue 18 item 2,
WOP_WRITE_REPORT, lib/io.c): a close, fsync or own stat of a file so written sends no SETATTR,
and size and mtime stay right on every path (libchfs, the hook, chfuse) — multi-chunk files
across servers, truncate then write, two writers, a look from another process before the close,
hard-linked files (whose attributes are not at the name: the report falls back to the close).

The RPC counts come from the servers' per-op counters (`chlist -S`: ops=NAME:N,...). On the
previous build every such close (and the writer's own stat) cost one SETATTR.
"""
import contextlib
import subprocess
import tempfile
import time

import pytest

from chfsutil import get, io, put, sha, stat
from poolstatus import ops, ops_delta as delta
from tri_path import on_chfuse, on_tmpfs, under_hook

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool

SMALL_CHUNK = 4096  # 1 MiB = 256 chunks: every server (the name's owner too) holds some
MIB = 1 << 20


def pattern(n):
    return bytes(k % 251 for k in range(n))


def put_in_one_write(pool, path, data):
    """chfs-io put of data into existing path as one write: its stdin is a file, read whole.
    Through a pipe the reads (hence the writes) come in pieces of whatever size the pipe
    delivers, sometimes more than the REPORT_EVERY that carry a report, and a last write
    without one leaves the close its SETATTR (by design, lib/io.c)."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        r = subprocess.run(["chfs-io", "put", path, "0"], stdin=f, capture_output=True, env=pool.env,
                           timeout=120)
    assert r.returncode == 0, r.stderr.decode()


@contextlib.contextmanager
def held_writer(pool, path, size):
    """chfs-io writehold: path written with size bytes, its descriptor held open while the body
    runs (after the writer's own stat saw size), then closed; the writer is killed on failure."""
    w = subprocess.Popen(["chfs-io", "writehold", path, str(size)], env=pool.env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert int(w.stdout.readline()) == size  # its own stat, descriptor still open
        yield
        w.stdin.write("close\n")
        w.stdin.flush()
        assert w.wait(timeout=60) == 0
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def mtime(pool, path):
    return int(io(pool, "stat", path).stdout.split()[3])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1}, {"servers": 4}], indirect=True)
def test_close_of_a_file_written_at_its_owner_sends_no_setattr(chfs_pool):
    data = pattern(MIB)
    for i in range(4):
        p = f"/f{i}"
        io(chfs_pool, "create", p, SMALL_CHUNK)
        before = ops(chfs_pool.env)
        put_in_one_write(chfs_pool, p, data)  # open + write + close
        d = delta(before, ops(chfs_pool.env))
        assert d.get("setattr", 0) == 0 and d.get("write-report", 0) >= 1, d
        assert stat(chfs_pool, p)[1] == MIB
        assert sha(get(chfs_pool, p)) == sha(data)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_a_long_stream_of_small_writes_reports_on_every_16th_and_at_close(chfs_pool):
    # Each report costs the owner a record update: the first 16 writes of a descriptor carry
    # one, then every 16th (n = 16, 32); the 40th did not, so the close reports.
    before = ops(chfs_pool.env)
    io(chfs_pool, "smallwrites", "/s", 40, 4096)
    d = delta(before, ops(chfs_pool.env))
    assert (d.get("write-report"), d.get("write"), d.get("setattr")) == (18, 22, 1), d
    assert stat(chfs_pool, "/s")[1] == 40 * 4096
    assert get(chfs_pool, "/s") == bytes(k % 251 for k in range(40 * 4096))


@pytest.mark.timeout(120)
def test_writers_own_stat_before_close_sends_no_setattr_and_others_see_the_size(chfs_pool):
    io(chfs_pool, "create", "/held", SMALL_CHUNK)
    before = ops(chfs_pool.env)
    with held_writer(chfs_pool, "/held", MIB):
        mid = ops(chfs_pool.env)
        # Another process, before the close: close-to-open promises nothing here; with the size
        # reported on the write it already sees all of it.
        assert stat(chfs_pool, "/held")[1] == MIB
    assert delta(before, mid).get("setattr", 0) == 0, delta(before, mid)
    assert delta(before, ops(chfs_pool.env)).get("setattr", 0) == 0
    assert stat(chfs_pool, "/held")[1] == MIB
    assert sha(get(chfs_pool, "/held")) == sha(pattern(MIB))


@pytest.mark.timeout(120)
def test_size_and_mtime_right_for_multi_chunk_files_across_servers(chfs_pool):
    # Default 64 KiB chunks on 4 servers: some writes miss the name's owner (their close
    # reports), others carry the report; sizes and contents must be the same either way.
    for i, (off, n) in enumerate([(0, 1), (0, 65537), (65535, 3 * 65536 + 7), (5 * MIB + 3, 200000)]):
        p = f"/m{i}"
        io(chfs_pool, "create", p)
        io(chfs_pool, "utime", p, 1000)
        data = pattern(n)
        t0 = time.time()
        put(chfs_pool, p, data, off, create=False)
        assert stat(chfs_pool, p)[1] == off + n
        assert get(chfs_pool, p, off, n) == data
        assert mtime(chfs_pool, p) >= int(t0) - 1, "the write did not set mtime"


@pytest.mark.timeout(120)
def test_truncate_then_write_and_a_truncate_by_another_process_before_the_close(chfs_pool):
    io(chfs_pool, "create", "/t", SMALL_CHUNK)
    put(chfs_pool, "/t", pattern(MIB), create=False)
    io(chfs_pool, "truncate", "/t", 10)
    put(chfs_pool, "/t", b"abcde", 0, create=False)
    assert stat(chfs_pool, "/t")[1] == 10
    put(chfs_pool, "/t", b"xyz", 100, create=False)
    assert stat(chfs_pool, "/t")[1] == 103
    assert get(chfs_pool, "/t") == b"abcde" + pattern(10)[5:] + bytes(90) + b"xyz"
    # A writer holds its descriptor while another process truncates: its size went with the
    # write, so its close does not bring the truncated bytes back.
    io(chfs_pool, "create", "/t2", SMALL_CHUNK)
    with held_writer(chfs_pool, "/t2", MIB):
        io(chfs_pool, "truncate", "/t2", 7)
    assert stat(chfs_pool, "/t2")[1] == 7
    assert get(chfs_pool, "/t2") == pattern(7)


@pytest.mark.timeout(120)
def test_two_writers_end_with_the_larger_size(chfs_pool):
    io(chfs_pool, "create", "/two", SMALL_CHUNK)
    hi, lo = pattern(MIB)[::-1], pattern(MIB)
    put(chfs_pool, "/two", hi, MIB, create=False)   # the far end first,
    put(chfs_pool, "/two", lo, 0, create=False)     # then a write below it: size stays 2 MiB
    assert stat(chfs_pool, "/two")[1] == 2 * MIB
    assert sha(get(chfs_pool, "/two")) == sha(lo + hi)


@pytest.mark.timeout(120)
def test_hard_linked_file_written_through_either_name_reports_at_close(chfs_pool):
    io(chfs_pool, "create", "/a", SMALL_CHUNK)
    io(chfs_pool, "link", "/a", "/b")
    put(chfs_pool, "/b", pattern(300000), create=False)
    assert stat(chfs_pool, "/a")[1] == stat(chfs_pool, "/b")[1] == 300000
    put(chfs_pool, "/a", b"z", 400000, create=False)
    assert stat(chfs_pool, "/b")[1] == 400001


SCRIPT = r"""
import os, sys, time
p = os.path.join(sys.argv[1], "sr")
fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, b"a" * 300000)
os.pwrite(fd, b"b" * 70000, 1000000)
st = os.fstat(fd)
out = ["open: size=%d" % st.st_size]
os.close(fd)
os.utime(p, (1000, 1000))
fd = os.open(p, os.O_WRONLY)
os.pwrite(fd, b"c" * 10, 2000000)
os.close(fd)
st = os.stat(p)
out.append("closed: size=%d mtime_advanced=%s" % (st.st_size, st.st_mtime > 1000))
os.truncate(p, 5)
fd = os.open(p, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"d" * 3)
os.close(fd)
with open(p, "rb") as f:
    out.append("after truncate+append: size=%d data=%r" % (os.stat(p).st_size, f.read()))
print("\n".join(out))
"""


@pytest.mark.hook
@pytest.mark.timeout(180)
def test_size_and_mtime_under_the_hook_and_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    want = on_tmpfs(SCRIPT)
    assert "closed: size=2000010 mtime_advanced=True" in want, want
    assert under_hook(SCRIPT, chfs_pool) == want
    assert on_chfuse(SCRIPT, chfs_pool, tmp_path) == want
