"""Files that outlive their name across processes (issue 16 item 2): process A has /f open (it
created it and wrote 8 MiB), process B unlinks /f or renames another file over it. As on a
local file system, A still reads what it wrote, writes more, fstat says nlink 0 and the size it
wrote, and once A closes the space comes back (chlist -S: orphans, stored_bytes); a killed A
leaks nothing after the lease. The owner of /f knows A holds it through A's open lease
(lib/open_lease.c, server/open_leases.c). Played with the native API (orphan_holder.py against
chfs-io), with two hooked programs (rm, mv under chfs-run) and with two chfuse mounts (two
clients; test_links_netns.py does it across 4 servers in network namespaces).

On the previous build B's unlink removed the data at once: A read back nothing ("bad 0 of ...")
and its fstat said nlink 1 (or the other file's size after a rename over it).
"""
import os
import signal
import subprocess
import time
from itertools import islice

import pytest

import poolstatus
from chfsutil import io, owner, put
from test_orphan_lease import LEASE, SHORT_LEASE, SHORT_LEASE_ENV, SIZE, Holder, near, totals, wait_for
from ci.testlib.chfs_pool import stack_prefix
from test_orphan_lease_paths import _mounted, kill_group

MORE = 1 << 16


def given_back(pool, before, timeout, what):
    """Wait until nothing is held as an orphan and the stored bytes are back to before."""
    took = wait_for(lambda: totals(pool.env)[1] == 0 and near(totals(pool.env)[0], before), timeout)
    assert took is not None, f"{what}: {totals(pool.env)}, want {before}"


def remove_name(pool, how):
    """B, another process (chfs-io: the native API), takes /f's name away."""
    if how == "unlink":
        io(pool, "unlink", "/f")
    else:
        put(pool, "/g", b"other file")
        io(pool, "rename", "/g", "/f")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["unlink", "rename-over"])
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_a_file_another_process_unlinks_stays_usable_until_the_last_close(chfs_pool, how):
    pool = chfs_pool
    before, _ = totals(pool.env)
    h = Holder(pool.env, "/f", unlink=False)
    try:
        remove_name(pool, how)
        assert h.ask("check") == f"ok {SIZE}"
        assert h.ask(f"append {MORE}") == "appended"
        assert h.ask("check") == f"ok {SIZE + MORE}"
        assert h.ask("stat") == f"stat 0 {SIZE + MORE}"
        time.sleep(2.5 * LEASE)  # renewed: still there past the lease
        assert h.ask("check") == f"ok {SIZE + MORE}"
        held, orphans = totals(pool.env)
        assert near(held, before + SIZE + MORE) and orphans == 1, (held, before, orphans)
        assert h.ask("close") == "closed"
        given_back(pool, before, 2 * LEASE, "not given back after the close")
        logs = "".join(pool.log(i) for i in range(pool.n))
        assert "no open lease holds it any more" in logs and "stopped renewing" not in logs
    finally:
        h.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_a_killed_holder_of_a_file_another_process_unlinked_leaks_nothing(chfs_pool):
    pool = chfs_pool
    before, _ = totals(pool.env)
    h = Holder(pool.env, "/f", unlink=False)
    try:
        io(pool, "unlink", "/f")
        assert h.ask("check") == f"ok {SIZE}"
        assert totals(pool.env)[1] == 1
        h.kill()
        given_back(pool, before, LEASE + 5, "still stored after the lease")
    finally:
        h.close()
    assert "stopped renewing" in "".join(pool.log(i) for i in range(pool.n))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_a_file_nobody_holds_open_goes_at_its_unlink(chfs_pool):
    """The open lease of a closed descriptor is gone: the unlink removes the data at once."""
    pool = chfs_pool
    before, _ = totals(pool.env)
    h = Holder(pool.env, "/f", unlink=False)
    try:
        assert h.ask("close") == "closed"
        time.sleep(LEASE)  # the close reached the owner with the next renewal
        io(pool, "unlink", "/f")
        now, orphans = totals(pool.env)
        assert near(now, before) and orphans == 0, (now, before, orphans)
    finally:
        h.close()


# A hooked program that creates PATH, writes SIZE bytes, and then, a line of stdin at a time:
# reads it all back, appends MORE bytes and reports fstat; closes it; ends.
HOOKED = r"""
import errno, os, sys
size, more = %d, %d
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
block = bytes(range(256)) * 4096
for _ in range(size // len(block)):
    os.write(fd, block)
os.fsync(fd)
print("held", flush=True)
sys.stdin.readline()
try:  # a mount's kernel kept the pages it wrote: read what the servers have
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
except OSError:
    pass
os.lseek(fd, 0, os.SEEK_SET)
got = bytearray()
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    got += b
ok = bytes(got) == block * (size // len(block))
def attempt(what, fn):
    try:
        return f"{what} {fn()}"
    except OSError as e:
        return f"{what} {errno.errorcode[e.errno]}"
def fstat():
    st = os.fstat(fd)
    return f"nlink {st.st_nlink} size {st.st_size}"
def write():
    os.write(fd, b"x" * more)
    return "ok" if os.pread(fd, more, size) == b"x" * more else "bad"
steps = [attempt("fstat", fstat), attempt("write", write), attempt("fstat", fstat)]
print(f"{'ok' if ok else 'bad'} {len(got)} " + " ".join(steps), flush=True)
sys.stdin.readline()
os.close(fd)
print("closed", flush=True)
sys.stdin.readline()
""" % (SIZE, MORE)


@pytest.mark.hook
@pytest.mark.timeout(120)
@pytest.mark.parametrize("end", ["close", "kill"])
@pytest.mark.parametrize("how", ["rm", "mv"])
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE_ENV], indirect=True)
def test_hooked_programs_one_unlinks_the_file_another_has_open(chfs_pool, how, end):
    pool = chfs_pool
    env = dict(pool.env, CHFS_HOOK_LOCAL="0")
    before, _ = totals(pool.env)
    h = subprocess.Popen(["chfs-run", "--", "/usr/bin/python3", "-c", HOOKED, "/chfs/f"], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert h.stdout.readline().strip() == "held"
        if how == "rm":
            b = ["rm", "/chfs/f"]
        else:
            put(pool, "/g", b"other file")
            b = ["mv", "/chfs/g", "/chfs/f"]
        subprocess.run(["chfs-run", "--"] + b, env=env, check=True, timeout=60)
        h.stdin.write("\n")
        h.stdin.flush()
        assert h.stdout.readline().strip() == (f"ok {SIZE} fstat nlink 0 size {SIZE} write ok "
                                               f"fstat nlink 0 size {SIZE + MORE}")
        time.sleep(2 * LEASE)  # renewed from inside the hooked process
        assert totals(pool.env)[1] == 1
        if end == "close":
            h.stdin.write("\n")
            h.stdin.flush()
            assert h.stdout.readline().strip() == "closed"
        else:
            kill_group(h)
        given_back(pool, before, LEASE + 5, "not given back")
    finally:
        kill_group(h)


def _mount(tmp_path, name, env):
    """A chfuse daemon of its own (a client of its own) at tmp_path/name: (mountpoint, Popen)."""
    mnt = str(tmp_path / name)
    os.makedirs(mnt)
    log = open(tmp_path / f"{name}.log", "w")
    d = subprocess.Popen([os.path.join(stack_prefix(), "bin", "chfuse"), "--foreground", mnt], env=env,
                         stdout=log, stderr=subprocess.STDOUT)
    log.close()
    assert wait_for(lambda: _mounted(mnt) or d.poll() is not None, 20) is not None
    assert _mounted(mnt), open(tmp_path / f"{name}.log").read()
    return mnt, d


def _unmount(mnt, d):
    subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=30)
    if _mounted(mnt):
        subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=30)
    if d.poll() is None:
        d.kill()
    d.wait(timeout=20)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE_ENV], indirect=True)
def test_two_chfuse_mounts_one_unlinks_a_file_a_program_on_the_other_has_open(chfs_pool, tmp_path):
    """Two chfuse daemons are two clients: the kernel of one mount knows nothing of the other's
    unlink; the open lease of the first daemon keeps the data for its program."""
    pool = chfs_pool
    before, _ = totals(pool.env)
    m1 = m2 = None
    h = None
    try:
        m1 = _mount(tmp_path, "m1", pool.env)
        m2 = _mount(tmp_path, "m2", pool.env)
        h = subprocess.Popen(["/usr/bin/python3", "-c", HOOKED, os.path.join(m1[0], "f")], env=pool.env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
        assert h.stdout.readline().strip() == "held"
        os.unlink(os.path.join(m2[0], "f"))
        h.stdin.write("\n")
        h.stdin.flush()
        got = h.stdout.readline().strip()
        # Read back whole from the servers (the kernel's pages dropped), written and read
        # back. fstat: nlink 0 when the kernel passes the file handle; ENOENT when it asks for
        # stale attributes without it and high-level libfuse passes the name, gone (README: a
        # limit). The old build read zeros and said nlink 1.
        assert got.startswith(f"ok {SIZE} fstat ") and " write ok " in got, got
        fstats = [part.split(" write ")[0] for part in got.split(" fstat ")[1:]]
        assert all(f.startswith("nlink 0 ") or f == "ENOENT" for f in fstats), got
        h.stdin.write("\n")
        h.stdin.flush()
        assert h.stdout.readline().strip() == "closed"
        given_back(pool, before, LEASE + 5, "not given back")
    finally:
        if h:
            kill_group(h)
        for m in (m2, m1):
            if m:
                _unmount(*m)


# Opens the files named (creates them, or opens them read-only), says so, waits for a line,
# exits without closing them (os._exit: exit_group with the descriptors open).
EXITS_HOLDING = """
import os, sys
mode, names = sys.argv[1], sys.argv[2:]
flags = os.O_CREAT | os.O_WRONLY if mode == 'create' else os.O_RDONLY
fds = [os.open('/chfs' + p, flags, 0o644) for p in names]
print('held', flush=True)
sys.stdin.readline()
os._exit(0)
"""


def open_leases(env, skip=None):
    """Open leases held over the pool (but at server `skip`)."""
    return sum(int(st.get("open_leases", 0)) for a, st in poolstatus.status(env, timeout_ms=2000).items()
               if a != skip and not st.get("down"))


def hooked_holder(pool, mode, names):
    h = subprocess.Popen(["chfs-run", "--", "/usr/bin/python3", "-c", EXITS_HOLDING, mode, *names],
                         env=dict(pool.env, CHFS_HOOK_LOCAL="0"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert h.stdout.readline().strip() == "held"
    return h


def exit_now(h):
    """Let h exit; seconds until it did."""
    t = time.monotonic()
    h.stdin.write("\n")
    h.stdin.flush()
    assert h.wait(timeout=60) == 0
    return time.monotonic() - t


@pytest.mark.hook
@pytest.mark.timeout(120)
def test_a_hooked_process_exiting_with_files_open_ends_its_leases(chfs_pool):
    """The hook ends the leases at exit_group (chfs_end_leases): before, the servers kept them a
    lease long (60 s), and a file another process unlinked meanwhile stayed an orphan."""
    pool, n = chfs_pool, 16
    h = hooked_holder(pool, "create", [f"/x{i}" for i in range(n)])
    try:
        assert open_leases(pool.env) == n
        exit_now(h)
    finally:
        kill_group(h)
    left = open_leases(pool.env)
    assert left == 0, f"{left} of {n} open leases still held after the holder exited"
    for i in range(n):
        io(pool, "unlink", f"/x{i}")
    assert totals(pool.env)[1] == 0, "unlinked files kept as orphans of a process that exited"


@pytest.mark.hook
@pytest.mark.timeout(120)
@pytest.mark.parametrize("hung_holds", [False, True])
def test_a_hooked_process_exits_within_the_rpc_timeout_when_a_server_is_hung(chfs_pool, hung_holds):
    """The leases end at the servers that took one (the owners of the names opened), all asked
    at once: a hung server that holds none costs nothing, one that holds some at most the RPC
    timeout (5 s in the pool), and the others' leases end either way."""
    pool, n, hung = chfs_pool, 8, 3
    names = list(islice((p for p in (f"/x{k}" for k in range(64)) if owner(pool, p) != pool.addrs[hung]), n))
    if hung_holds:
        names[0] = next(p for p in (f"/y{k}" for k in range(64)) if owner(pool, p) == pool.addrs[hung])
    for p in names:
        put(pool, p, b"z")
    h = hooked_holder(pool, "read", names)
    assert open_leases(pool.env) == n
    os.kill(pool.pids[hung], signal.SIGSTOP)
    try:
        took = exit_now(h)
        left = open_leases(pool.env, skip=pool.addrs[hung])
    finally:
        os.kill(pool.pids[hung], signal.SIGCONT)
        kill_group(h)
    print(f"exit with a server hung (holding leases: {hung_holds}): {took:.2f} s")
    assert took < (5.0 + 1.5 if hung_holds else 1.5), f"exit took {took:.1f} s (RPC timeout 5 s)"
    assert left == 0, f"{left} open leases still held at the live servers after the holder exited"
