"""A FUSE daemon in the foreground and its mount, for tests and benchmarks of every component:
Mount starts one (chfuse or the pt_loopback test file system) and waits for its mount;
unmount() checks a clean fusermount3 -u and returns the daemon's counters; cleanup() removes a
mount a failed test left (fusermount3 -u, then umount -l, then kills the daemon). chfuse_mounted()
is a context manager around a chfuse mount of a pool."""
import contextlib
import os
import subprocess
import time

from ci.testlib.chfs_pool import stack_prefix

MOUNT_TIMEOUT = 15


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def force_unmount(path):
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", path], capture_output=True, timeout=30)
    if is_mounted(path):
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=30)


def thread_stacks(pid):
    """Backtraces of every thread of a hung process (gdb), for the failure message."""
    r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                       capture_output=True, text=True, timeout=60, check=False)
    return r.stdout[-6000:] or r.stderr[-2000:]


def read_stats(path):
    stats = {}
    with open(path) as f:
        for line in f:
            name, value = line.split()
            stats[name] = int(value)
    return stats


# libfuse-io-uring.patch's one line when io_uring_setup fails with EPERM (kernel.io_uring_disabled=2,
# or ci/no-io-uring's seccomp filter).
URING_REFUSED_LINE = "fuse: io_uring: cannot set up the rings: Operation not permitted; serving /dev/fuse"


class Mount:
    """One running FUSE daemon (chfuse or pt_loopback) and its mount point."""

    def __init__(self, argv, path, stats_path, env, expect_uring=False):
        self.path, self.stats_path = path, stats_path
        # unmount() checks requests came through FUSE-io_uring (True), or with "refused" (io_uring
        # refused to the daemon, ci/no-io-uring) that it said so once and served /dev/fuse.
        self.expect_uring = expect_uring
        os.makedirs(path, exist_ok=True)
        self.log_path = path + ".log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        end = time.time() + MOUNT_TIMEOUT
        while not is_mounted(path):
            if self.proc.poll() is not None:
                raise AssertionError(f"{argv[0]} exited with {self.proc.returncode}: {self.output()}")
            if time.time() > end:
                raise AssertionError(f"{argv[0]} did not mount {path} in {MOUNT_TIMEOUT} s")
            time.sleep(0.05)

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def unmount(self):
        """Unmounts cleanly and returns the daemon's counters."""
        r = subprocess.run(["fusermount3", "-u", self.path], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, f"fusermount3 -u {self.path}: {r.stderr.strip()}"
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"daemon still running 30 s after unmount; its threads:\n"
                                 f"{thread_stacks(self.proc.pid)}") from None
        assert rc == 0, self.output()
        assert not is_mounted(self.path)
        stats = read_stats(self.stats_path)
        if self.expect_uring == "refused":
            out = self.output()
            assert out.count(URING_REFUSED_LINE) == 1, out
            assert stats.get("uring_requests", 0) == 0, stats
        elif self.expect_uring:
            assert stats.get("uring_requests", 0) > 0, f"no request came through io_uring: {stats}"
        return stats

    def cleanup(self):
        force_unmount(self.path)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        assert not is_mounted(self.path), f"{self.path} still mounted"


@contextlib.contextmanager
def chfuse_mounted(env, path, *opts):
    """chfuse of the pool in env mounted at path (options -o each of opts) for the with-block;
    unmounted (and its daemon gone) afterwards, also when the block fails."""
    argv = [os.path.join(stack_prefix(), "bin", "chfuse"), "--foreground"]
    for o in opts:
        argv += ["-o", o]
    m = Mount(argv + [path], path, path + ".stats", env)
    try:
        yield m
    finally:
        m.cleanup()
