"""Backend names owed to members (server/relink_owed.c): a rename that reached the backend while
a member could not be told is owed to it until it has it — and no longer once it left the pool:
the debt is dropped with a log line instead of staying in STORAGE/bdirty/relink.owed and being
retried at every sync for ever."""
import os
import random
import re
import signal
import time

import pytest

import poolstatus
from chfsutil import get, io, owner
from ci.testlib.chfs_pool import wait_gone

from test_backend_flush import backend_bytes, make_pool, wait_for  # noqa: F401 (fixture)
from test_backend_renames import backend_files


def owed(pool, i):
    try:
        with open(os.path.join(pool.dirs[i], "bdirty", "relink.owed")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


@pytest.mark.timeout(240)
def test_a_debt_to_a_member_that_left_the_pool_is_dropped(make_pool):
    """x is stopped when the rename of a file reaches the backend (q, which records the
    rename, restarts: its shutdown applies it): q owes x the new name. Then q is stopped while x
    resumes and leaves the pool (SIGUSR1; its own asks for debts find q down), and q resumes.
    x is gone: q's next sync drops the debt, says so in its log, and relink.owed is empty —
    and the backend has b with every byte."""
    pool = make_pool("-F", "0")
    a, b = "/old", "/new"
    q = pool.addrs.index(owner(pool, b))
    x = next(j for j in range(pool.n) if j != q and pool.addrs[j] != owner(pool, a))
    data = random.Random(31).randbytes(1 << 20)
    io(pool, "put", a, "0", "create", input=data)
    io(pool, "sync")
    xpid = pool.pids[x]
    os.kill(xpid, signal.SIGSTOP)
    try:
        time.sleep(3)                                   # found down by the others
        io(pool, "rename", a, b)
        xaddr, pool.addrs[x] = pool.addrs[x], None
        pool.restart(q)                                 # rename on the backend, x not told
        assert backend_files(pool) == [b[1:]]
        assert xaddr in owed(pool, q), owed(pool, q)
        qpid = pool.pids[q]
        os.kill(qpid, signal.SIGSTOP)                   # the debtor cannot be asked
        try:
            time.sleep(3)
            os.kill(xpid, signal.SIGUSR1)               # (acted on once continued)
            os.kill(xpid, signal.SIGCONT)
            assert wait_for(lambda: "leave: left the member list" in pool.log(x), 60), pool.log(x)
        finally:
            os.kill(qpid, signal.SIGCONT)
    finally:
        os.kill(xpid, signal.SIGCONT)
    assert wait_gone(xpid, 90), "the leaving server did not exit"
    pool.pids[x] = None
    pool.env["CHFS_SERVER"] = ",".join(a for a in pool.addrs if a)
    poolstatus.wait_settled(pool.env, pool.n - 1, timeout=60)   # q has the list without x
    io(pool, "sync")
    # Told while x was still handing its keys over (q's heartbeat found it up again), or
    # dropped once it had left: either way nothing is owed to it any more.
    assert owed(pool, q) == ""
    assert ("which left the pool: dropped" in pool.log(q)
            or f"told {xaddr}, which missed it" in pool.log(q)), pool.log(q)
    assert get(pool, b) == data
    assert backend_files(pool) == [b[1:]]
    assert backend_bytes(pool.backend, b[1:]) == data
    # A debt to x found in relink.owed at a start-up (written as an earlier build did: no id) —
    # x is no member: dropped at the next sync, with a log line, not retried for ever.
    fileid = re.search(r"backend rename \(file ([0-9a-f]{16})\)", pool.log(q)).group(1)
    pool.kill(q, signal.SIGTERM)
    with open(os.path.join(pool.dirs[q], "bdirty", "relink.owed"), "a") as f:
        f.write(f"{fileid} {xaddr}\n")
    was = pool.log(q).count("which left the pool: dropped")
    pool.restart(q)
    io(pool, "sync")
    assert owed(pool, q) == ""
    assert pool.log(q).count("which left the pool: dropped") == was + 1, pool.log(q)
    io(pool, "sync")                                    # (and not again)
    assert pool.log(q).count("which left the pool: dropped") == was + 1
