"""A removal that misses a server: a file removed while one of the servers holding its chunks is
down (killed) must not leave those chunks on that server's disk for good. The client tells a
server that got the removal (WOP_ORPHAN_DUE); that one lists the file as a due orphan and sends
DATA_REMOVE to every member until all removed it, at once when its failure detector sees the
missing one come back (server/orphans.c).

On the previous build the restarted server kept the removed file's chunks until the pool's
storage was removed (session 15's note: "chunks of a removed file stay on a data server that
was down at the removal, when the pool has no backend"; with a backend they stayed too, unnamed).
"""
import os

import pytest

import poolstatus
from chfsutil import get, io, owner, put, rand, wait_for

CHUNK = 64 << 10
LEASE = 2.0  # chfsd --orphan-lease: a member that did not answer is asked again a lease later


def chunk_files(pool, i):
    """The chunk files of server i (its storage's data directory)."""
    root = os.path.join(pool.dirs[i], "data")
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(root) for f in fs)


def name_not_owned_by(pool, addr):
    return next(p for p in (f"/gone{k}" for k in range(64)) if owner(pool, p) != addr)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("lease", [LEASE, None], ids=["short-lease", "default-lease"])
def test_chunks_on_a_server_down_at_the_removal_go_when_it_is_back(tmp_path, lease):
    """With the default lease (60 s) too: the retries back off from 1 s, so a server restarted
    faster than the failure detector sees it down still loses the chunks within seconds."""
    from ci.testlib.chfs_pool import ChfsPool
    args = [f"--orphan-lease={lease}"] if lease else []
    pool = ChfsPool(tmp=str(tmp_path / "pool"), servers=3, chfsd_args=args)
    try:
        poolstatus.wait_settled(pool.env, 3)
        victim = pool.addrs[2]
        path = name_not_owned_by(pool, victim)  # its entry stays reachable while 2 is down
        put(pool, "/kept", b"still here")
        kept = chunk_files(pool, 2)  # (server 2 may hold /kept's chunk: that one stays)
        put(pool, path, rand(64 * CHUNK, 11))  # 64 chunks: every server holds some
        assert set(chunk_files(pool, 2)) - set(kept), \
            "server 2 holds none of the file's chunks: the test proves nothing"
        pool.kill(2)  # SIGKILL: its chunk files stay on its disk
        io(pool, "unlink", path)  # succeeds: the name is gone whatever server 2 missed
        pool.restart(2)  # the same storage, the same address
        took = wait_for(lambda: chunk_files(pool, 2) == kept, 20)
        assert took is not None, (f"server 2 still holds the removed file's chunks: "
                                  f"{chunk_files(pool, 2)}\n{pool.log(0)[-1500:]}\n{pool.log(1)[-1500:]}")
        assert get(pool, "/kept") == b"still here"
        st = poolstatus.status(pool.env)
        assert sum(s.get("orphans", 0) for s in st.values()) == 0, st
        logs = pool.log(0) + pool.log(1)
        assert "a removal that had missed a member finished" in logs, logs[-2000:]
    finally:
        pool.stop()


@pytest.mark.timeout(120)
def test_a_removal_that_reaches_every_server_lists_nothing(tmp_path):
    """The normal case costs nothing more: no due orphan, no request beyond the DATA_REMOVEs."""
    from ci.testlib.chfs_pool import ChfsPool
    pool = ChfsPool(tmp=str(tmp_path / "pool"), servers=3, chfsd_args=[f"--orphan-lease={LEASE}"])
    try:
        poolstatus.wait_settled(pool.env, 3)
        put(pool, "/f", rand(16 * CHUNK, 12))
        put(pool, "/one", b"one chunk: the other servers hold none of it")
        before = poolstatus.ops(pool.env)
        io(pool, "unlink", "/f")
        io(pool, "unlink", "/one")
        after = poolstatus.ops(pool.env)
        assert after.get("orphan-due", 0) == before.get("orphan-due", 0) == 0, after
        assert all(chunk_files(pool, i) == [] for i in range(3))
        st = poolstatus.status(pool.env)
        assert sum(s.get("orphans", 0) for s in st.values()) == 0, st
    finally:
        pool.stop()
