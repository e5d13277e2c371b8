"""Helpers of the chfuse tests (imported by conftest.py and the test modules): tool() finds an
installed program; the mount helpers live in ci/testlib/fuse_mount.py (other components' tests use
them too) and are re-exported here."""
import os
import shutil

import pytest

from ci.testlib.chfs_pool import stack_prefix
from ci.testlib.fuse_mount import (URING_REFUSED_LINE, Mount, force_unmount,  # noqa: F401
                                   is_mounted, read_stats, thread_stacks)


def tool(name):
    p = stack_prefix()
    for d in ("bin", "sbin", "libexec/chfuse"):
        if os.path.exists(os.path.join(p, d, name)):
            return os.path.join(p, d, name)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed under {p} (run ci/build)")
    return found


URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


class kernel_setting:
    """Writes VALUE to a /sys or /proc/sys file for a with-block and restores the old value
    after (skips the test if the file does not exist: the kernel lacks the feature)."""

    def __init__(self, path, value):
        self.path, self.value = path, value

    def __enter__(self):
        if not os.path.exists(self.path):
            pytest.skip(f"{self.path} missing: this kernel lacks the feature")
        with open(self.path) as f:
            self.old = f.read().strip()
        with open(self.path, "w") as f:
            f.write(self.value)
        return self

    def __exit__(self, *exc):
        with open(self.path, "w") as f:
            f.write(self.old)
        return False


def fuse_uring_param(value):
    """The fuse module's enable_uring ("Y"/"N") for a with-block."""
    return kernel_setting(URING_PARAM, value)
