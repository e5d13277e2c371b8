"""chfuse over FUSE-io_uring (-o io_uring, libfuse-io-uring.patch): with the fuse module's
enable_uring=Y the daemon's requests really come through its io_uring queues (libfuse's own
count, in the stats file as uring_requests), and namespace and data work through them; with
enable_uring=N, or io_uring refused (the daemon started under ci/no-io-uring: EPERM from
io_uring_setup, as kernel.io_uring_disabled=2 gives machine-wide — which is never set here,
others test on the same machine), the daemon says so in one line and serves /dev/fuse. The
whole chfuse suite also runs on io_uring: conftest.py's chfuse_mount takes -o io_uring when
CHFUSE_IO_URING=1 (ci/test runs test_chfuse_*.py a second time that way), and under
`ci/test --no-io-uring` every mount must take the fallback."""
import hashlib
import os
import subprocess

import pytest

from chfuse_util import URING_REFUSED_LINE, fuse_uring_param, tool
from ci.testlib import no_io_uring

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
    if no_io_uring.expected():  # ci/test --no-io-uring: the same work over /dev/fuse
        assert out.count(URING_REFUSED_LINE) == 1 and stats["uring_requests"] == 0, (out, stats)
        return
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


def test_io_uring_falls_back_when_io_uring_is_refused(chfs_pool, chfuse_mount):
    # Under ci/no-io-uring io_uring_setup fails with EPERM, as with kernel.io_uring_disabled=2
    # (even for root), but only for the daemon's process tree.
    with fuse_uring_param("Y"):
        m = chfuse_mount(chfs_pool.env, "io_uring", "nopassthrough", launcher=no_io_uring.launcher())
        m.expect_uring = False
        assert workload(m.path, nfiles=50) == expected_digest(50)
        stats = m.unmount()
    out = m.output()
    assert out.count(URING_REFUSED_LINE) == 1, out
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
