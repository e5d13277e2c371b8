"""The hook leaves the program's signal dispositions alone.

Loading the hook library loads libfabric, whose PSM providers' libraries (libinfinipath,
libpsm2) install handlers for SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM from their
constructors. In a hooked process those handlers replaced the program's: a program that
aborted, crashed or was sent SIGTERM printed "... terminated with signal N", wrote a backtrace
file "<prog>.80s-<pid>,<host>.btr" into its real working directory on the local disk and exited
with status 1 instead of dying by the signal (no core dump; its parent saw an ordinary failure).
Found investigating a Montage step "aborted (SIGABRT)" under the hook in CI: the .btr files
were left in the test's working directory. The loader now restores every disposition the hook
library's loading changed (loader/loader.c).
"""
import os
import signal
import subprocess

import pytest

from ci.testlib.chfs_pool import ChfsPool

CAUGHT = r"""
import os, sys
os.listdir("/chfs")   # the hook library is loaded and joins the pool
for line in open("/proc/self/status"):
    if line.startswith(("SigCgt", "SigIgn")):
        print(line.strip())
"""


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with ChfsPool(servers=1, tmp=str(tmp_path_factory.mktemp("sigpool"))) as p:
        yield p


def hooked(pool, argv, cwd, eager):
    env = dict(pool.env, CHFS_HOOK_LOCAL="0", CHFS_HOOK_EAGER="1" if eager else "0")
    return subprocess.run(["chfs-run", "--"] + argv, env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("eager", [False, True], ids=["lazy", "eager"])
def test_hooked_program_keeps_its_signal_dispositions(pool, tmp_path, eager):
    plain = subprocess.run(["python3", "-c", CAUGHT.replace('os.listdir("/chfs")', "")],
                           capture_output=True, text=True, timeout=60, env=pool.env)
    assert plain.returncode == 0, plain.stderr
    r = hooked(pool, ["python3", "-c", CAUGHT], str(tmp_path), eager)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout


@pytest.mark.parametrize("eager", [False, True], ids=["lazy", "eager"])
def test_hooked_program_dies_by_its_own_signals_and_writes_nothing(pool, tmp_path, eager):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = hooked(pool, ["python3", "-c", 'import os; os.listdir("/chfs"); os.abort()'], str(cwd),
               eager)
    assert r.returncode == -signal.SIGABRT, (r.returncode, r.stderr)
    assert "terminated with signal" not in r.stderr
    env = dict(pool.env, CHFS_HOOK_LOCAL="0", CHFS_HOOK_EAGER="1" if eager else "0")
    p = subprocess.Popen(["chfs-run", "--", "python3", "-c",
                          'import os, sys, time; os.listdir("/chfs"); print("ready", flush=True); '
                          'time.sleep(60)'], env=env, cwd=str(cwd), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == -signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert os.listdir(cwd) == []  # no backtrace file on the local disk


THREADS = r"""
import os
os.listdir("/chfs")
# A file held open: libchfs's lease-renewal thread runs (the node-local transport has no
# thread of its own; over libfabric, its progress thread runs too).
fd = os.open("/chfs/threads-probe", os.O_CREAT | os.O_RDWR, 0o644)
main = str(os.getpid())
for t in sorted(os.listdir("/proc/self/task")):
    if t == main:
        continue
    status = open("/proc/self/task/%s/status" % t).read()
    blocked = int(next(l.split()[1] for l in status.splitlines() if l.startswith("SigBlk")), 16)
    print(t, all(blocked & (1 << (s - 1)) for s in range(1, 65) if s not in (9, 19, 32, 33)))
"""


@pytest.mark.parametrize("eager", [False, True], ids=["lazy", "eager"])
def test_client_threads_block_every_signal(pool, tmp_path, eager):
    """A process-directed signal must reach the program's own threads: run on a thread of the
    hook's namespace, the program's handler would use the other libc's thread pointer."""
    r = hooked(pool, ["python3", "-c", THREADS], str(tmp_path), eager)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines, "no client thread found"  # the lease-renewal thread at least
    assert lines[1::2] == ["True"] * (len(lines) // 2), r.stdout


SINGLE = r"""
import ctypes, os
flag = ctypes.c_char.in_dll(ctypes.CDLL(None), "__libc_single_threaded")
# The hook library is loaded, and a file held open starts libchfs's lease-renewal thread.
fd = os.open("/chfs/single-probe", os.O_CREAT | os.O_RDWR, 0o644)
print("parent", flag.value, len(os.listdir("/proc/self/task")))
pid = os.fork()
if pid == 0:
    # the child's client, re-initialised, with its own renewal thread for its own open file
    fd2 = os.open("/chfs/single-probe-child", os.O_CREAT | os.O_RDWR, 0o644)
    print("child", flag.value, len(os.listdir("/proc/self/task")), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("eager", [False, True], ids=["lazy", "eager"])
def test_program_libc_knows_the_process_is_multithreaded(pool, tmp_path, eager):
    """The program's libc must not take its single-thread shortcuts while the hook's threads
    exist: the shared dynamic linker allocates their TLS with the program's malloc (heap
    corruption, aborts of Montage tools and bash under the hook) and its mutexes, released
    without a futex wake in single-thread mode, lost the wake-up of a rank's progress thread
    (an RPC "no reply within 5000 ms" in the IOR-shaped hook test, ~1 in 15 runs under load).
    The loader starts one thread through the program's libc, which clears both its public flag
    read here and the hidden copy its shortcuts read."""
    r = hooked(pool, ["python3", "-c", SINGLE], str(tmp_path), eager)
    assert r.returncode == 0, r.stderr
    got = dict((w[0], (w[1], int(w[2]))) for w in (l.split() for l in r.stdout.splitlines()))
    assert got["parent"][1] > 1 and got["child"][1] > 1, r.stdout  # the hook's thread exists
    assert got["parent"][0] == "b'\\x00'" and got["child"][0] == "b'\\x00'", r.stdout
