"""The directory fence (server/fence.c, lib/dir_fence.c): two clients of one pool (two
processes, chfs-test-shell, driven in lockstep). Client A makes a directory and creates in it
(so it trusts its lookup of the directory for the rest of that second, lib/namespace.c
check_parent); client B removes the directory or renames it away; A creates in it again at
once. That create must fail with ENOENT, as on a local file system — not succeed and leave an
entry under a name no listing shows (a "ghost": its data lost to every client).

Before the fence every such create in the same second succeeded: the entry was stored below a
directory that no longer existed. The other tests hold the fence to its promises: a directory
made again under the removed name takes entries at once (the fence keys on the directory's
file id), a removal that fails lifts its fence, and a fence left standing expires."""
import os
import subprocess
import time

import pytest

from ci.testlib.chfs_pool import stack_prefix

SHELL = os.path.join(stack_prefix(), "libexec", "chfs", "chfs-test-shell")
ROUNDS = 30


class Client:
    """One chfs-test-shell process: call(cmd, *args) -> (result, ms, names)."""

    def __init__(self, pool):
        self.p = subprocess.Popen([SHELL], env=pool.env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def call(self, *words):
        self.p.stdin.write(" ".join(words) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline().split()
        assert line, f"chfs-test-shell ended: {self.p.stderr.read()[-2000:]}"
        return line[0], float(line[1]), line[2:]

    def ok(self, *words):
        res, ms, names = self.call(*words)
        assert res == "ok", f"{' '.join(words)}: {res}"
        return ms, names

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


@pytest.fixture
def two(chfs_pool):
    a, b = Client(chfs_pool), Client(chfs_pool)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["rename", "rename-empty", "rmdir"])
def test_a_create_right_after_another_client_removed_its_directory_fails_and_loses_nothing(two, how):
    a, b = two
    a.ok("mkdir", f"/g-{how}")
    ghosts, created = [], []
    for i in range(ROUNDS):
        d, m = f"/g-{how}/d{i}", f"/g-{how}/m{i}"
        a.ok("mkdir", d)
        a.ok("create", f"{d}/w")  # A looked d up just now
        if how != "rename":
            a.ok("unlink", f"{d}/w")
        if how == "rmdir":
            b.ok("rmdir", d)
        else:
            b.ok("rename", d, m)
        res, _, _ = a.call("create", f"{d}/new")
        if res == "ok":
            created.append(i)
            listed = b.call("list", m)[2] if how != "rmdir" else []
            if "new" not in listed:
                ghosts.append(i)
        else:
            assert res == "ENOENT", f"round {i}: create in the removed directory: {res}"
        assert b.call("stat", d)[0] == "ENOENT", f"round {i}: {d} is back"
    assert not ghosts, (f"{len(ghosts)} of {ROUNDS} creates landed below a directory already "
                        f"removed ({how}): rounds {ghosts}")
    assert not created, f"creates in a removed directory succeeded: rounds {created}"


@pytest.mark.timeout(120)
def test_a_directory_made_again_under_a_removed_name_takes_entries_at_once(two):
    """rm -rf d; mkdir d; touch d/f — by another client and by the same one: the new d has
    another file id, so the removed one's fence does not touch it (no wait)."""
    a, b = two
    for i in range(5):
        d = f"/again{i}"
        a.ok("mkdir", d)
        a.ok("create", f"{d}/w")
        a.ok("unlink", f"{d}/w")
        b.ok("rmdir", d)
        b.ok("mkdir", d)
        ms, _ = a.ok("create", f"{d}/f")  # A's cached d is the removed one
        assert ms < 1000, f"the create below the new {d} waited {ms} ms"
        a.ok("unlink", f"{d}/f")
        a.ok("rmdir", d)
        a.ok("mkdir", d)
        ms, _ = a.ok("create", f"{d}/g")
        assert ms < 1000, f"the create below {d}, made again by its remover, waited {ms} ms"
        assert b.ok("list", d)[1] == ["g"]


@pytest.mark.timeout(120)
def test_a_removal_that_fails_lifts_its_fence(two):
    """rmdir of a non-empty directory (ENOTEMPTY) and a rename over one fence it on every
    server first; creates in it must not wait for the fence to expire afterwards."""
    a, b = two
    a.ok("mkdir", "/busy")
    a.ok("create", "/busy/a")
    a.ok("mkdir", "/other")
    for i in range(3):
        assert b.call("rmdir", "/busy")[0] == "ENOTEMPTY"
        ms, _ = a.ok("create", f"/busy/r{i}")
        assert ms < 1000, f"a create after a failed rmdir waited {ms} ms"
        assert b.call("rename", "/other", "/busy")[0] == "ENOTEMPTY"
        ms, _ = a.ok("create", f"/busy/n{i}")
        assert ms < 1000, f"a create after a failed rename over the directory waited {ms} ms"
    assert sorted(b.ok("list", "/busy")[1]) == sorted(
        ["a"] + [f"r{i}" for i in range(3)] + [f"n{i}" for i in range(3)])


@pytest.mark.timeout(120)
def test_a_fence_left_standing_expires(two):
    """A directory renamed away and straight back keeps its file id, so the fence of the
    first rename still matches it: a create in it waits for that fence to expire (about 2 s:
    server/fence.c FENCE_MS) and then succeeds — a fence never makes a name unusable. With
    entries, the rename back lifts the fence itself (its moves are refused once)."""
    a, b = two
    a.ok("mkdir", "/back")
    a.ok("create", "/back/w")
    a.ok("unlink", "/back/w")
    b.ok("rename", "/back", "/away")
    b.ok("rename", "/away", "/back")
    t0 = time.monotonic()
    ms, _ = a.ok("create", "/back/f")
    assert time.monotonic() - t0 < 4, f"the create waited {ms} ms"
    assert b.ok("list", "/back")[1] == ["f"]
    # non-empty: the walk moves /back/f into a name fenced for this directory
    b.ok("rename", "/back", "/away2")
    b.ok("rename", "/away2", "/back")
    assert b.ok("list", "/back")[1] == ["f"]
    assert b.call("stat", "/away2")[0] == "ENOENT"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["rename", "rmdir"])
def test_creates_racing_a_removal_are_all_listed_or_refused(two, how):
    """True concurrency: A sends a burst of creates into d without waiting for the answers
    while B renames d away (the walk moves what it finds) or removes it (rmdir: ENOTEMPTY once
    something is in it). Every create that succeeded must be listed afterwards; every other
    one must have failed with ENOENT. Run under ThreadSanitizer too (the servers' fence lock
    against their create workers). On the old code the rename gave EBUSY: the walk's passes
    never caught up with the creates (nothing stopped them)."""
    a, b = two
    rng = __import__("random").Random(16)
    a.ok("mkdir", f"/race-{how}")
    ghosts, refused, stored = [], 0, 0
    for i in range(15):
        d, m = f"/race-{how}/d{i}", f"/race-{how}/m{i}"
        a.ok("mkdir", d)
        burst = 40
        a.p.stdin.write("".join(f"create {d}/f{k}\n" for k in range(burst)))
        a.p.stdin.flush()
        time.sleep(rng.uniform(0, 0.03))
        res = b.call(*(("rename", d, m) if how == "rename" else ("rmdir", d)))[0]
        replies = [a.p.stdout.readline().split()[0] for _ in range(burst)]
        assert set(replies) <= {"ok", "ENOENT"}, replies
        created = {f"f{k}" for k, r in enumerate(replies) if r == "ok"}
        refused += burst - len(created)
        stored += len(created)
        if how == "rename":
            assert res == "ok", res
            listed = set(b.ok("list", m)[1])
        elif res == "ok":
            listed = set()  # removed while still empty: every create must have been refused
        else:
            assert res == "ENOTEMPTY", res
            listed = set(b.ok("list", d)[1])
        ghosts += sorted(created - listed)
    assert not ghosts, f"{len(ghosts)} created entries are listed nowhere: {ghosts[:10]}"
    assert stored > 0, "no create got in before a removal: the race was not run"


@pytest.mark.timeout(120)
def test_every_server_holds_the_fences_of_removals_and_lets_them_go(chfs_pool, two):
    """Each removal fences its directory on every server (`chlist -S` fences=); nothing
    removes them afterwards but expiry, and the heartbeat sweeps the expired ones: within a
    few seconds every server is back to none."""
    from poolstatus import status
    a, _ = two
    for i in range(10):
        a.ok("mkdir", f"/sweep{i}")
    for i in range(10):
        a.ok("rmdir", f"/sweep{i}")
    st = status(chfs_pool.env)
    assert len(st) == len(chfs_pool.addrs) and all(s.get("fences", 0) >= 1 for s in st.values()), st
    deadline = time.monotonic() + 10
    while any(s.get("fences") != 0 for s in status(chfs_pool.env).values()):
        assert time.monotonic() < deadline, f"fences still standing: {status(chfs_pool.env)}"
        time.sleep(0.2)
