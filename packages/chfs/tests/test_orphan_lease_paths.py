"""Files that outlive their name when their holder dies, on the other access paths: a hooked
program (chfs-run) and a chfuse daemon killed with SIGKILL while an unlinked 8 MiB file is open
on them leak nothing once the lease ran out (lib/orphan_lease.c, server/orphans.c). On the
previous build both left the 8 MiB on the servers."""
import os
import signal
import subprocess
import time

import pytest

from ci.testlib.chfs_pool import stack_prefix
from test_orphan_lease import LEASE, SHORT_LEASE_ENV, SIZE, near, totals, wait_for

HOLD = r"""
import os, sys, time
p = os.path.join(sys.argv[1], "held")
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
block = bytes(range(256)) * 4096
for _ in range(%d // len(block)):
    os.write(fd, block)
os.fsync(fd)
os.unlink(p)
print("held", flush=True)
time.sleep(600)
""" % SIZE


def start(prefix, base, env):
    """A holder working in base, in its own session (a SIGKILL of its group reaches exactly it)."""
    return subprocess.Popen(prefix + ["/usr/bin/python3", "-c", HOLD, base], env=env,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)


def kill_group(h):
    try:
        os.killpg(h.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    h.wait(timeout=20)


def space_comes_back(pool, before):
    took = wait_for(lambda: near(totals(pool.env)[0], before), LEASE + 5)
    assert took is not None, f"still stored after the lease: {totals(pool.env)}, want {before}"
    assert totals(pool.env)[1] == 0


@pytest.mark.hook
@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE_ENV], indirect=True)
def test_hooked_program_killed_while_holding_an_unlinked_file(chfs_pool):
    pool = chfs_pool
    before, _ = totals(pool.env)
    h = start(["chfs-run", "--"], "/chfs", dict(pool.env, CHFS_HOOK_LOCAL="0"))
    try:
        assert h.stdout.readline().strip() == "held"
        assert near(totals(pool.env)[0], before + SIZE)
        time.sleep(2 * LEASE)  # renewed from inside the hooked process
        assert near(totals(pool.env)[0], before + SIZE)
        kill_group(h)
        space_comes_back(pool, before)
    finally:
        kill_group(h)


def _mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE_ENV], indirect=True)
def test_chfuse_killed_while_a_program_holds_an_unlinked_file(chfs_pool, tmp_path):
    pool = chfs_pool
    before, _ = totals(pool.env)
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    log = open(tmp_path / "chfuse.log", "w")
    daemon = subprocess.Popen([os.path.join(stack_prefix(), "bin", "chfuse"), "--foreground", mnt],
                              env=pool.env, stdout=log, stderr=subprocess.STDOUT)
    h = None
    try:
        assert wait_for(lambda: _mounted(mnt) or daemon.poll() is not None, 20) is not None
        assert _mounted(mnt), open(log.name).read()
        h = start([], mnt, pool.env)
        assert h.stdout.readline().strip() == "held"
        assert near(totals(pool.env)[0], before + SIZE)
        time.sleep(2 * LEASE)  # chfuse renews for the program
        assert near(totals(pool.env)[0], before + SIZE)
        daemon.kill()
        daemon.wait(timeout=20)
        space_comes_back(pool, before)
    finally:
        if h:
            kill_group(h)
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=30)
        if _mounted(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=30)
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait(timeout=20)
        log.close()
