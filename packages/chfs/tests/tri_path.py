"""Run one Python script on tmpfs (the reference), on a chfuse mount and under the hook.

The POSIX-semantics tests (test_open_unlinked.py, test_dir_times.py, test_special_files.py)
compare transcripts: the script prints what it observed, each path must print what tmpfs
printed. `base` is the directory the script works in (argv[1]).
"""
import os
import subprocess
import tempfile
import time

from ci.testlib.chfs_pool import stack_prefix


def run_script(script, argv_prefix, base, env, timeout=120):
    r = subprocess.run(argv_prefix + ["/usr/bin/python3", "-c", script, base], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def on_tmpfs(script):
    base = tempfile.mkdtemp(prefix="posix-ref-", dir="/dev/shm")
    try:
        return run_script(script, [], base, dict(os.environ))
    finally:
        subprocess.run(["rm", "-rf", base], check=True)


def under_hook(script, pool):
    return run_script(script, ["chfs-run", "--"], "/chfs", dict(pool.env, CHFS_HOOK_LOCAL="0"))


def _mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def on_chfuse(script, pool, tmp_path, args=(), while_mounted=None):
    """The script's output on a fresh chfuse mount; while_mounted() runs after it, before the
    unmount (which ends every open file)."""
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt, exist_ok=True)
    log = open(tmp_path / "chfuse.log", "w")
    daemon = subprocess.Popen([os.path.join(stack_prefix(), "bin", "chfuse"), "--foreground",
                               *args, mnt], env=pool.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.time() + 20
        while not _mounted(mnt):
            assert daemon.poll() is None and time.time() < end, open(log.name).read()
            time.sleep(0.05)
        out = run_script(script, [], mnt, pool.env)
        if while_mounted:
            while_mounted()
        return out
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=30)
        if _mounted(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=30)
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()


def data_files(pool):
    """The backing files on every server of the pool (DIR/data/<file id>)."""
    out = []
    for d in pool.dirs:
        dd = os.path.join(d, "data")
        if os.path.isdir(dd):
            out += [n for n in os.listdir(dd) if not n.endswith(".t")]
    return sorted(out)
