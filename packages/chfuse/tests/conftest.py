"""Fixtures of the chfuse tests: mounting chfuse (or the pt_loopback test file system) on a
live pool and guaranteeing that nothing stays mounted.

`chfuse_mount(pool_env, *opts)` starts `chfuse --foreground -o stats=FILE ... MOUNTPOINT` and
waits until the mount shows in /proc/self/mountinfo; `.unmount()` runs fusermount3 -u, waits for
the daemon to exit and returns its counters (the stats file it writes at unmount). The finalizer
unmounts whatever a failed test left: fusermount3 -u, then umount -l, then kills the daemon.

With CHFUSE_IO_URING=1 in the environment every chfuse mount takes -o io_uring, the fuse module's
enable_uring is Y for the test (restored after it), and each clean unmount checks that requests
really came through io_uring (ci/test runs the chfuse suite once this way). Under
`ci/test --no-io-uring` (CHFS_TEST_NO_IO_URING=1, io_uring refused to the whole run) each clean
unmount checks instead that the daemon said once that it serves /dev/fuse, and served it.
`start(env, *opts, launcher=[...])` prefixes the daemon's command (e.g. ci/no-io-uring).

`chfs_pool` here is one pool per test module, emptied between tests (the root conftest's
module_chfs_pool): these tests use the pool only through its namespace and environment, and the
suite runs twice in ci/test, so a pool per test was ~2 s of each test's set-up.
"""
import os

import pytest

from chfuse_util import Mount, fuse_uring_param, tool
from ci.testlib import no_io_uring
from ci.testlib.chfs_pool import lend_module_pool

IO_URING = os.environ.get("CHFUSE_IO_URING") == "1"


@pytest.fixture
def chfs_pool(request, module_chfs_pool):
    yield from lend_module_pool(request, module_chfs_pool)


@pytest.fixture
def chfuse_mount(tmp_path):
    mounts = []

    expect = ("refused" if no_io_uring.expected() else True) if IO_URING else False

    def start(env, *opts, name="mnt", launcher=()):
        path = str(tmp_path / name)
        stats = str(tmp_path / f"{name}.stats")
        argv = [tool("chfuse"), "--foreground", "-o", f"stats={stats}"]
        for o in opts + (("io_uring",) if IO_URING else ()):
            argv += ["-o", o]
        m = Mount(list(launcher) + argv + [path], path, stats, env, expect_uring=expect)
        mounts.append(m)
        return m

    if IO_URING:
        with fuse_uring_param("Y"):
            try:
                yield start
            finally:
                for m in mounts:
                    m.cleanup()
    else:
        yield start
        for m in mounts:
            m.cleanup()


@pytest.fixture
def loopback_mount(tmp_path):
    mounts = []

    def start(srcdir, *flags):
        path, stats = str(tmp_path / "lbmnt"), str(tmp_path / "lb.stats")
        m = Mount([tool("chfuse-pt-loopback"), *flags, srcdir, path, stats], path, stats,
                  dict(os.environ))
        mounts.append(m)
        return m

    yield start
    for m in mounts:
        m.cleanup()

