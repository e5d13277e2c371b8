"""findtree — one synthetic tree built twice, in CHFS and in a local directory, with the same
names, sizes and mtimes, so chfind's results can be compared with GNU find's (test_chfind.py)
and timed against it (bench/run-chfind-bench).

manifest(entries, seed, top) returns the lines chfs-mktree reads (tests/chfs_mktree.c):
directories in a tree of fan-out up to 6 and depth up to 5, files whose sizes sit on and
around find's unit boundaries (0, 1, 511/512/513, 1 KiB ± 1, 1 MiB ± 1, ...), mtimes spread
over a year with nanoseconds, some dot-files and a few symlinks. build_chfs()/build_local()
run chfs-mktree on them; find_set() turns find/chfind output into a set of paths relative to
the root they searched.
"""
import os
import random
import subprocess

from ci.testlib.chfs_pool import stack_prefix

MKTREE = os.path.join(stack_prefix(), "libexec", "chfs", "chfs-mktree")
SIZES = [0, 1, 2, 100, 511, 512, 513, 1023, 1024, 1025, 2047, 2048, 3000, 4096, 10000,
         (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 2 << 20, (3 << 20) + 5]
BASE_NS = 1_600_000_000 * 10**9
EXTS = [".txt", ".dat", ".c", ".h", ".bin", ""]


def manifest(entries, seed=1, top="t", name_pad=0):
    """Lines for about `entries` entries below `top` (top itself included)."""
    rnd = random.Random(seed)
    pad = "x" * name_pad
    lines = [f"d {top} {BASE_NS}"]
    dirs = [(top, 0)]
    made = 1
    while made < entries:
        parent, depth = dirs[rnd.randrange(len(dirs))]
        r = rnd.random()
        mtime = BASE_NS + rnd.randrange(365 * 86400) * 10**9 + rnd.randrange(10**9)
        if r < 0.12 and depth < 5:
            p = f"{parent}/d{made}{pad}"
            lines.append(f"d {p} {mtime}")
            dirs.append((p, depth + 1))
        elif r < 0.14:
            lines.append(f"l {parent}/link{made}{pad} target{made}")
        else:
            dot = "." if rnd.random() < 0.05 else ""
            p = f"{parent}/{dot}f{made}{pad}{rnd.choice(EXTS)}"
            lines.append(f"f {p} {rnd.choice(SIZES)} {mtime}")
        made += 1
    return lines


def _mktree(lines, args, env, runner=None, timeout=1800):
    argv = [MKTREE, *args]
    data = "\n".join(lines) + "\n"
    if runner:
        r = runner(argv, input=data, env=env, check=False, timeout=timeout)
    else:
        r = subprocess.run(argv, input=data, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r


def build_chfs(lines, env, runner=None):
    return _mktree(lines, [], env, runner)


def build_local(lines, directory, env=None):
    os.makedirs(directory, exist_ok=True)
    return _mktree(lines, ["--local", str(directory)], env or os.environ)


def find_set(output, root):
    """Paths printed by find/chfind below `root`, relative to it."""
    out = set()
    prefix = root.rstrip("/") + "/"
    for line in output.splitlines():
        assert line.startswith(prefix), line
        out.add(line[len(prefix):])
    return out
