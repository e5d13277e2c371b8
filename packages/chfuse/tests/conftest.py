"""Fixtures of the chfuse tests: mounting chfuse (or the pt_loopback test file system) on a
live pool and guaranteeing that nothing stays mounted.

`chfuse_mount(pool_env, *opts)` starts `chfuse --foreground -o stats=FILE ... MOUNTPOINT` and
waits until the mount shows in /proc/self/mountinfo; `.unmount()` runs fusermount3 -u, waits for
the daemon to exit and returns its counters (the stats file it writes at unmount). The finalizer
unmounts whatever a failed test left: fusermount3 -u, then umount -l, then kills the daemon.
"""
import os

import pytest

from chfuse_util import Mount, tool


@pytest.fixture
def chfuse_mount(tmp_path):
    mounts = []

    def start(env, *opts, name="mnt"):
        path = str(tmp_path / name)
        stats = str(tmp_path / f"{name}.stats")
        argv = [tool("chfuse"), "--foreground", "-o", f"stats={stats}"]
        for o in opts:
            argv += ["-o", o]
        m = Mount(argv + [path], path, stats, env)
        mounts.append(m)
        return m

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

