"""chfuse over FUSE-io_uring (-o io_uring, libfuse-io-uring.patch): with the fuse module's
enable_uring=Y the daemon's requests really come through its io_uring queues (libfuse's own
count, in the stats file as uring_requests), and namespace and data work through them; with
enable_uring=N, or kernel.io_uring_disabled=2, the daemon says so in one line and serves
/dev/fuse. The whole chfuse suite also
runs on io_uring: conftest.py's chfuse_mount takes -o io_uring when CHFUSE_IO_URING=1 (ci/test
runs test_chfuse_*.py a second time that way)."""
import hashlib
import os
import subprocess

import pytest

from chfuse_util import IO_URING_DISABLED, fuse_uring_param, kernel_setting, tool

FALLBACK_LINE = "fuse: io_uring: not offered by the kernel"


def workload(root, nfiles=200):
    """Creates, stats, writes, reads and removes files; returns the digest of what was read."""
    d = os.path.join(root, "w")
    os.mkdir(d)
    h = hashlib.sha256()
    for i in range(nfiles):
        p = os.path.join(d, f"f{i}")
        with open(p, "wb") as f:
            f.write(f"file {i}\n".encode() * (i + 1))
        assert os.stat(p).st_size == len(f"file {i}\n") * (i + 1)
    big = os.urandom(3 << 20)
    with open(os.path.join(d, "big"), "wb") as f:
        f.write(big)
    with open(os.path.join(d, "big"), "rb") as f:
        assert f.read() == big
    for i in range(nfiles):
        with open(os.path.join(d, f"f{i}"), "rb") as f:
            h.update(f.read())
    assert len(os.listdir(d)) == nfiles + 1
    for name in os.listdir(d):
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    return h.hexdigest()


def expected_digest(nfiles=200):
    h = hashlib.sha256()
    for i in range(nfiles):
        h.update(f"file {i}\n".encode() * (i + 1))
    return h.hexdigest()


@pytest.mark.parametrize("opts", [("uring_q_depth=4",), ("uring_q_depth=4", "uring_threads=4")],
                         ids=["1-thread-per-cpu", "4-threads-per-cpu"])
def test_io_uring_serves_requests(chfs_pool, chfuse_mount, opts):
    with fuse_uring_param("Y"):
        m = chfuse_mount(chfs_pool.env, "io_uring", "nopassthrough", *opts)
        assert workload(m.path) == expected_digest()
        stats = m.unmount()
    out = m.output()
    assert "io_uring" not in out, out
    # 200 creates + stats + reads, 3 MiB of daemon-served data: far more than the handful of
    # requests (INIT, FORGET) that always travel through /dev/fuse.
    assert stats["uring_requests"] > 1000, stats
    assert stats["write_requests"] > 0 and stats["read_requests"] > 0, stats


def test_io_uring_falls_back_when_module_disables_it(chfs_pool, chfuse_mount):
    with fuse_uring_param("N"):
        m = chfuse_mount(chfs_pool.env, "io_uring", "nopassthrough")
        m.expect_uring = False  # even when conftest runs the suite on io_uring
        assert workload(m.path, nfiles=50) == expected_digest(50)
        stats = m.unmount()
    out = m.output()
    assert out.count(FALLBACK_LINE) == 1, out
    assert len([line for line in out.splitlines() if "io_uring" in line]) == 1, out
    assert stats["uring_requests"] == 0, stats
    assert stats["write_requests"] > 0, stats


def test_io_uring_falls_back_when_the_kernel_disables_io_uring(chfs_pool, chfuse_mount):
    # kernel.io_uring_disabled=2: io_uring_setup fails with EPERM even for root. Kept to the
    # mount and a short workload: the setting is machine-wide.
    with fuse_uring_param("Y"), kernel_setting(IO_URING_DISABLED, "2"):
        m = chfuse_mount(chfs_pool.env, "io_uring", "nopassthrough")
        os.listdir(m.path)  # returns once the daemon has answered INIT (and set up io_uring)
    m.expect_uring = False
    assert workload(m.path, nfiles=50) == expected_digest(50)
    stats = m.unmount()
    out = m.output()
    assert out.count("fuse: io_uring: cannot set up the rings: Operation not permitted; "
                     "serving /dev/fuse") == 1, out
    assert len([line for line in out.splitlines() if "io_uring" in line]) == 1, out
    assert stats["uring_requests"] == 0, stats


def test_uring_options_out_of_range_are_refused(chfs_pool, tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    r = subprocess.run([tool("chfuse"), "-f", "-o", "io_uring,uring_q_depth=5000", str(mnt)],
                       env=chfs_pool.env, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "uring_q_depth=5000 is out of range" in r.stderr, r.stderr
    r = subprocess.run([tool("chfuse"), "-f", "-o", "io_uring,uring_threads=65", str(mnt)],
                       env=chfs_pool.env, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "uring_threads=65 is out of range" in r.stderr, r.stderr
