"""io_uring refused for a process tree, for tests of the components' fallbacks.

`ci/no-io-uring` (built by ci/build into the build tree) runs a command under a seccomp filter
that makes io_uring_setup/enter/register fail with EPERM — what kernel.io_uring_disabled=2 does
for the whole machine, which tests must not set (others test on the same machine).

- launcher(): argv prefix that runs a command without io_uring (the built launcher's path).
- refused(): True when this process cannot set up an io_uring (io_uring_setup gives EPERM).
- expected(): True under `ci/test --no-io-uring` (CHFS_TEST_NO_IO_URING=1), where every
  component must take its fallback; it asserts that io_uring really is refused, so the
  variable alone cannot turn io_uring tests into fallback tests.
"""
import ctypes
import errno
import os

NR_IO_URING_SETUP = 425  # unified system-call table (x86-64, arm64, ...)


def launcher():
    cache = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
    build = os.environ.get("CHFS_STACK_BUILD", os.path.join(cache, "build"))
    path = os.path.join(build, "ci", "no-io-uring", "no-io-uring")
    assert os.access(path, os.X_OK), f"{path} missing: ci/build builds it"
    return [path]


def refused():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(NR_IO_URING_SETUP, 1, params)
    if fd >= 0:
        os.close(fd)
        return False
    return ctypes.get_errno() == errno.EPERM


def expected():
    if os.environ.get("CHFS_TEST_NO_IO_URING") != "1":
        return False
    assert refused(), "CHFS_TEST_NO_IO_URING=1 but io_uring_setup works here: run under ci/no-io-uring"
    return True
