"""holder — a libchfs client (ctypes) that opens a file, waits, then writes through that
descriptor: the writer whose descriptor was opened before a rename reached the backend, for
test_backend_renames.py and test_backend_join_relink.py. Run it as

    subprocess.Popen([sys.executable, "-c", HOLDER, PATH, OFFSET, DATA, COUNT], stdin=PIPE,
                     stdout=PIPE, text=True, env=python_env(env))

It opens PATH (O_RDWR) and prints "open"; on a line on stdin it writes DATA repeated COUNT times
(COUNT optional, default 1) at OFFSET, closes, ends without a sync and prints "done".
holding() and write_now() do that for a test."""
import contextlib
import subprocess
import sys

HOLDER = r"""
import ctypes, os, sys
lib = ctypes.CDLL("libchfs.so.3", use_errno=True)
lib.chfs_pwrite.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
lib.chfs_pwrite.restype = ctypes.c_ssize_t
assert lib.chfs_init(None) == 0
fd = lib.chfs_open(sys.argv[1].encode(), os.O_RDWR)
assert fd >= 0, ctypes.get_errno()
print("open", flush=True)
sys.stdin.readline()
data = sys.argv[3].encode() * (int(sys.argv[4]) if len(sys.argv) > 4 else 1)
assert lib.chfs_pwrite(fd, data, len(data), int(sys.argv[2])) == len(data), ctypes.get_errno()
assert lib.chfs_close(fd) == 0, ctypes.get_errno()
lib.chfs_term_without_sync()
print("done", flush=True)
"""


@contextlib.contextmanager
def holding(env, path, offset, data, count=1):
    """The HOLDER process with path open (env: the pool's client environment, python_env'd
    by the caller); killed at the end if still running."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, path, str(offset), data, str(count)],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "open"
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def write_now(p, timeout=60):
    """Let the holder write through its descriptor; it closes and ends."""
    p.stdin.write("go\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "done"
    assert p.wait(timeout=timeout) == 0
