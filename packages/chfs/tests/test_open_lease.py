"""Files that outlive their name across processes (issue 16 item 2): process A has /f open (it
created it and wrote 8 MiB), process B unlinks /f or renames another file over it. As on a
local file system, A still reads what it wrote, writes more, fstat says nlink 0 and the size it
wrote, and once A closes the space comes back (chlist -S: orphans, stored_bytes); a killed A
leaks nothing after the lease. The owner of /f knows A holds it through A's open lease
(lib/open_lease.c, server/open_leases.c).

On the previous build B's unlink removed the data at once: A read back nothing ("bad 0 of ...")
and its fstat said nlink 1 (or the other file's size after a rename over it).
"""
import os
import time

import pytest

from chfsutil import io, put
from test_orphan_lease import LEASE, SHORT_LEASE, SIZE, Holder, near, totals, wait_for

MORE = 1 << 16


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
        took = wait_for(lambda: totals(pool.env)[1] == 0 and near(totals(pool.env)[0], before), 2 * LEASE)
        assert took is not None, f"not given back after the close: {totals(pool.env)}, want {before}"
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
        took = wait_for(lambda: totals(pool.env)[1] == 0 and near(totals(pool.env)[0], before), LEASE + 5)
        assert took is not None, f"still stored after the lease: {totals(pool.env)}, want {before}"
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
