"""Helpers for the CHFS core integration tests: run chfs-io against a pool, the hash
(FNV-1a 64 + splitmix64 finaliser, common/placement.c), and which server owns a path (asked of
`chlist -o`, which builds the pool's placement ring as libchfs does) — so failure tests can
assert exactly which files survive a dead server."""
import hashlib
import os
import signal
import subprocess
import time

MASK = (1 << 64) - 1


def chfs_hash(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & MASK
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & MASK
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & MASK
    h ^= h >> 31
    return h


def owner(pool, path: str):
    """Address of the server holding the namespace entry of path in the live pool."""
    r = subprocess.run(["chlist", "-o", path], env=pool.env, capture_output=True, text=True,
                       timeout=30, check=True)
    return r.stdout.strip()


def io(pool, *args, input=None, check=True, env=None, timeout=120):
    r = subprocess.run(["chfs-io", *map(str, args)], input=input, capture_output=True,
                       env=env or pool.env, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"chfs-io {' '.join(map(str, args))} failed: {r.stderr.decode()}")
    return r


def err_name(r):
    """ERRNAME from a failed chfs-io run ("chfs-io: OP PATH: ENOENT (...)")."""
    assert r.returncode != 0, "expected a failure"
    # chfs-io's own line: a library warning (a lease renewal thread's, say) may come after it
    lines = [x for x in r.stderr.decode().strip().splitlines() if x.startswith("chfs-io: ")]
    assert lines, r.stderr.decode()
    return lines[-1].split(": ")[-1].split(" ")[0]


def put(pool, path, data, off=0, create=True):
    return io(pool, "put", path, off, *(["create"] if create else []), input=data)


def get(pool, path, off=None, length=None):
    args = ["get", path] + ([off] if off is not None else []) + ([length] if length is not None else [])
    return io(pool, *args).stdout


def stat(pool, path):
    mode, size, nlink, mtime = io(pool, "stat", path).stdout.split()
    return int(mode, 8), int(size)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def rand(n, seed):
    import random
    return random.Random(seed).randbytes(n)


def python_env(env):
    """env for a python process that loads libchfs with ctypes: against a sanitizer build
    (ci/test --asan/--tsan point CHFS_STACK_PREFIX at it) the sanitizer runtime must be loaded
    first, and python itself is not instrumented, so it is preloaded."""
    import os
    import subprocess
    env = dict(env)
    prefix = os.environ.get("CHFS_STACK_PREFIX", "")
    for san, lib in (("tsan", "libtsan.so"), ("asan", "libasan.so")):
        if san in prefix:
            env["LD_PRELOAD"] = subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True,
                                               text=True).stdout.strip()
    return env


def stop_every_thread(pid, timeout=5.0):
    """SIGSTOP pid and wait (up to timeout s) until every one of its threads is stopped (state
    T): a thread still running may answer one more request."""
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if all(thread_state(pid, t) == "T" for t in os.listdir(f"/proc/{pid}/task")):
            return
        time.sleep(0.01)


def thread_state(pid, tid):
    """Scheduler state letter of one thread (T: stopped; ?: gone)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def wait_for(pred, timeout):
    """Poll pred every 0.1 s until true or timeout seconds passed; the seconds it took, or None."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return time.time() - t0
        time.sleep(0.1)
    return None
