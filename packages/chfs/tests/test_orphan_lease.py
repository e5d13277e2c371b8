"""Files that outlive their name when their holder dies (issue 16 item 2): a client that keeps an
unlinked file open leases it at a server (lib/orphan_lease.c, server/orphans.c); a server whose
lease is not renewed removes the file's data on every server, so a client killed with SIGKILL
while it holds an unlinked 8 MiB file leaks nothing once the lease (set short here) has run
out. A live holder renews in the background and keeps its data however long it holds them; a
normal close ends the lease at once; the list survives a restart of the server that keeps it.

On the previous build the killed client's 8 MiB stayed on the servers until the pool's storage
was removed (README: "a client killed while holding one leaves its data files on the servers").
"""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import poolstatus
from chfsutil import put, python_env, wait_for

HOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orphan_holder.py")
LEASE = 2.0  # seconds, chfsd --orphan-lease
SIZE = 8 << 20
SHORT_LEASE = {"chfsd_args": [f"--orphan-lease={LEASE}"]}
SHORT_LEASE_ENV = {"extra_env": {"CHFS_ORPHAN_LEASE": str(LEASE)}}  # the same, by the variable
# stored_bytes counts allocated blocks, which the local file system trims or grows by a few KiB
# behind our back (speculative preallocation): sizes are compared within this much.
SLACK = 256 << 10


def near(a, b):
    return abs(a - b) <= SLACK


def totals(env, status=poolstatus.status):
    """(stored bytes, orphans) summed over the pool's members (asked again, a few times, while
    a loaded machine makes a member miss the status timeout)."""
    for _ in range(5):
        st = status(env, timeout_ms=5000)
        if st and not any(s["down"] for s in st.values()):
            break
    assert st and not any(s["down"] for s in st.values()), st
    return (sum(s["stored_bytes"] for s in st.values()), sum(s.get("orphans", 0) for s in st.values()))


class Holder:
    """orphan_holder.py in its own process (optionally through a runner's popen)."""

    def __init__(self, env, path, size=SIZE, popen=subprocess.Popen, unlink=True):
        argv = [sys.executable, HOLDER, path, str(size)] + ([] if unlink else ["--no-unlink"])
        self.p = popen(argv, env=python_env(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       text=True)
        assert self.p.stdout.readline().strip() == "held"

    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=20)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=20)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE_ENV], indirect=True)
def test_killed_holders_unlinked_file_is_collected_a_live_holders_is_not(chfs_pool):
    pool = chfs_pool
    put(pool, "/keep", os.urandom(1 << 20))  # what must stay
    before, orphans = totals(pool.env)
    assert orphans == 0
    h = Holder(pool.env, "/big")
    try:
        held, orphans = totals(pool.env)
        assert near(held, before + SIZE), (held, before)
        # the holder renews: past two and a half leases its data are all still there
        time.sleep(2.5 * LEASE)
        assert h.ask("check") == f"ok {SIZE}"
        assert near(totals(pool.env)[0], held)
        h.kill()
        took = wait_for(lambda: near(totals(pool.env)[0], before), LEASE + 5)
        assert took is not None, f"still stored after the lease: {totals(pool.env)}, want {before}"
        assert orphans == 1 and totals(pool.env)[1] == 0  # chlist -S showed it held, now not
    finally:
        h.close()
    assert "holder's lease expired, data removed" in "".join(pool.log(i) for i in range(pool.n))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_normal_close_ends_the_lease_at_once(chfs_pool):
    pool = chfs_pool
    before, _ = totals(pool.env)
    h = Holder(pool.env, "/f")
    try:
        held, orphans = totals(pool.env)
        assert near(held, before + SIZE) and orphans == 1
        assert h.ask("quit") == "done"
        assert h.p.wait(timeout=20) == 0
        now, orphans = totals(pool.env)
        assert near(now, before) and orphans == 0  # removed by the holder, no lease left
    finally:
        h.close()
    assert "lease expired" not in "".join(pool.log(i) for i in range(pool.n))


@pytest.mark.timeout(90)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_the_orphan_list_survives_a_restart_of_its_server(chfs_pool):
    pool = chfs_pool
    before, _ = totals(pool.env)
    h = Holder(pool.env, "/g")
    try:
        st = poolstatus.status(pool.env)
        keeper = [a for a, s in st.items() if s["orphans"] == 1]
        assert len(keeper) == 1, st
        i = pool.addrs.index(keeper[0])
        h.kill()
        pool.restart(i)  # at once, within the lease: the list comes back from DIR/orphans
        with open(os.path.join(pool.dirs[i], "orphans")) as f:
            assert len(f.read().splitlines()) == 2  # header + the file
        took = wait_for(lambda: near(totals(pool.env)[0], before) and totals(pool.env)[1] == 0,
                        2 * LEASE + 5)
        assert took is not None, totals(pool.env)
    finally:
        h.close()


def test_orphan_lease_option_and_variable_are_validated(tmp_path):
    from ci.testlib.chfs_pool import stack_env
    env = stack_env()
    for argv, extra, msg in ((["--orphan-lease=0"], {}, "--orphan-lease=0: expected seconds"),
                             (["--orphan-lease=x"], {}, "--orphan-lease=x: expected seconds"),
                             ([], {"CHFS_ORPHAN_LEASE": "-1"}, "CHFS_ORPHAN_LEASE=-1: expected seconds")):
        r = subprocess.run(["chfsd", "-f", "-c", str(tmp_path / "d")] + argv, env=dict(env, **extra),
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and msg in r.stderr, r.stderr
    r = subprocess.run(["chfsd", "--help"], env=env, capture_output=True, text=True, timeout=20)
    assert "--orphan-lease=SEC" in r.stdout and "$CHFS_ORPHAN_LEASE" in r.stdout


@pytest.mark.timeout(120)
def test_chfsctl_status_shows_the_orphans_held(tmp_path):
    """chfsctl -O passes --orphan-lease on; status names the server keeping the lease."""
    from ci.testlib.chfs_pool import stack_env
    from test_chfsctl_status import server_lines
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    ctl = ["chfsctl", "-N", "2", "-c", str(tmp_path / "pool"), "-O", f"--orphan-lease={LEASE}"]

    def run(*argv, check=True):
        return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60,
                              check=check)
    try:
        out = run(*ctl, "start").stdout
        env["CHFS_SERVER"] = re.search(r'CHFS_SERVER="([^"]+)"', out).group(1)
        h = Holder(env, "/o", size=1 << 20)
        try:
            lines = server_lines(run(*ctl, "status").stdout)
            assert sorted(kv["orphans"] for kv in lines.values()) == ["0", "1"], lines
            assert sum(int(kv["orphan_bytes"]) for kv in lines.values()) == 1 << 20
            h.kill()
            took = wait_for(lambda: all(kv["orphans"] == "0" for kv in
                                        server_lines(run(*ctl, "status").stdout).values()), LEASE + 5)
            assert took is not None
        finally:
            h.close()
    finally:
        run(*ctl, "kill", check=False)
        run(*ctl, "clean", check=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_a_server_down_at_collection_loses_its_share_when_it_is_back(chfs_pool):
    """The collector removes what it can and asks the missing member again later."""
    from tri_path import data_files
    pool = chfs_pool
    h = Holder(pool.env, "/h")
    try:
        st = poolstatus.status(pool.env)
        keeper = pool.addrs.index(next(a for a, s in st.items() if s["orphans"] == 1))
        other = (keeper + 1) % pool.n
        fileid = data_files(pool)[0]
        assert os.listdir(os.path.join(pool.dirs[other], "data")), "every server holds a part"
        h.kill()
        pool.kill(other)
        gone_elsewhere = lambda: all(fileid not in os.listdir(os.path.join(d, "data"))
                                     for i, d in enumerate(pool.dirs) if i != other)
        assert wait_for(gone_elsewhere, LEASE + 5) is not None
        assert fileid in os.listdir(os.path.join(pool.dirs[other], "data"))  # it was down
        pool.restart(other)
        assert wait_for(lambda: fileid not in data_files(pool), 2 * LEASE + 10) is not None
    finally:
        h.close()
    assert "asked again later" in pool.log(keeper)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_the_renewal_thread_lives_only_while_a_file_is_open_or_an_orphan_is_held(chfs_pool):
    """One thread renews the open leases (lib/open_lease.c) and the orphans' leases; it ends
    once the process holds neither (the close reported with its last round)."""
    pool = chfs_pool
    h = Holder(pool.env, "/t", size=1 << 16, unlink=False)

    def renewers():   # by name: the transport's threads come and go (a node-local connection
        return h.ask("tasks").split()[1].split(",").count("chfs-lease")   # has a reader)
    try:
        assert renewers() == 1  # with /t open: the renewal thread runs
        assert h.ask("unlink /t") == "unlinked"
        assert renewers() == 1  # the same thread renews the orphan
        assert h.ask("close") == "closed"  # the last descriptor: data and lease go
        assert wait_for(lambda: renewers() == 0, 5) is not None
        assert totals(pool.env)[1] == 0
    finally:
        h.close()


@pytest.mark.timeout(60)
def test_term_without_sync_ends_the_renewal_thread(chfs_pool):
    """chfs_term_without_sync (chstagein's end, `CHFS_IO_NOSYNC=1`) with a file still open: the
    renewal thread must be gone when it returns. The old build left it running on the freed
    server list and the closed transport (ThreadSanitizer: a race on chfs_client in
    client_begin against chfs_term_without_sync, in every CHFS_IO_NOSYNC test)."""
    h = Holder(chfs_pool.env, "/t", size=1 << 16, unlink=False)
    try:
        # with /t open the renewal thread runs (named chfs-lease; a sanitizer may add its own)
        assert "chfs-lease" in h.ask("tasks").split()[1].split(",")
        assert "chfs-lease" not in h.ask("term_nosync").split()[1].split(",")
    finally:
        h.close()


@pytest.mark.timeout(60)
@pytest.mark.skipif("tsan" in os.environ.get("CHFS_STACK_PREFIX", ""),
                    reason="ThreadSanitizer stops a forked child that starts threads (\"dup thread "
                           "with used id\"), as ci/test --tsan says of the transport's fork tests")
@pytest.mark.parametrize("chfs_pool", [SHORT_LEASE], indirect=True)
def test_a_forked_child_ending_leaves_the_parents_lease_alone(chfs_pool):
    pool = chfs_pool
    before, _ = totals(pool.env)
    h = Holder(pool.env, "/k")
    try:
        assert h.ask("fork") == "forked 0"
        time.sleep(2.5 * LEASE)  # the parent still renews; the child dropped nothing
        assert h.ask("check") == f"ok {SIZE}"
        held, orphans = totals(pool.env)
        assert near(held, before + SIZE) and orphans == 1
        assert h.ask("quit") == "done"
        assert h.p.wait(timeout=20) == 0
        assert totals(pool.env)[1] == 0
    finally:
        h.close()
