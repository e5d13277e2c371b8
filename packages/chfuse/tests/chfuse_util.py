"""Helpers of the chfuse tests (imported by conftest.py and the test modules): tool() finds an
installed program; the mount helpers live in ci/testlib/fuse_mount.py (other components' tests use
them too) and are re-exported here."""
import os
import shutil

import pytest

from ci.testlib.chfs_pool import stack_prefix
from ci.testlib.fuse_mount import (Mount, force_unmount, is_mounted, read_stats,  # noqa: F401
                                   thread_stacks)


def tool(name):
    p = stack_prefix()
    for d in ("bin", "sbin", "libexec/chfuse"):
        if os.path.exists(os.path.join(p, d, name)):
            return os.path.join(p, d, name)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed under {p} (run ci/build)")
    return found
