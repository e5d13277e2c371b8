"""Elastic membership (issue 19): servers join and leave a pool holding data while two clients
keep writing, rewriting and verifying files; afterwards every byte of every file is checked
(0 lost, 0 stale) and the clients must have seen no error. Also: keys really move (the new
server received bytes, the old servers' storage shrank), a server restarted on a new port
keeps serving, and a server killed during a rebalance gives clear EIO (never wrong data) until
it is back, when the rebalance completes.

Each test writes 500 files (0 bytes to a few 64 KiB chunks, every 20th over 1 MiB: ~73 MB)
with one chfsload.py process and verifies with another; the clients are chfsload.py workers."""
import hashlib
import json
import os
import signal
import socket
import time

import pytest

import chfsload
import poolstatus
from chfsutil import io, owner, put, python_env, rand

FILES = 500


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def allocated(d):
    """Bytes of storage allocated under directory d (the backing files are sparse)."""
    total = 0
    for root, _, names in os.walk(d):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def assert_all_bytes(pool, manifests, expect):
    r = chfsload.verify(pool.env, *manifests)
    assert not r["failed"] and not r["wrong"], (
        f"{len(r['failed'])} unreadable {r['failed'][:5]}, {len(r['wrong'])} wrong {r['wrong'][:5]}")
    assert r["ok"] == expect
    return r


def worker_manifests(pool, results):
    """Manifests of the files the workers wrote (latest version of each), for verify."""
    paths = []
    for i, res in enumerate(results):
        p = os.path.join(pool.tmp, f"worker{i}-files.json")
        with open(p, "w") as f:
            json.dump(res["files"], f)
        paths.append(p)
    return paths, sum(len(r["files"]) for r in results)


def members(pool):
    return sum(1 for p in pool.pids if p)


@pytest.fixture
def loaded_pool(chfs_pool):
    """The pool with 500 files written; .manifest is their manifest."""
    chfs_pool.manifest = os.path.join(chfs_pool.tmp, "files.json")
    chfsload.write(chfs_pool.env, chfs_pool.manifest, FILES, seed=19)
    return chfs_pool


def clients(pool):
    return chfsload.Workers(pool.env, pool.manifest, pool.tmp, k=2, ops=40)


def assert_clients_clean(results, eio_window=None):
    """No client error; with eio_window=(t0, t1), EIO (a server down: restarted) is allowed
    between those times, nothing else."""
    errors = [e for r in results for e in r["errors"]
              if not (eio_window and e[3] in ("EIO", "failed: EIO") and eio_window[0] <= e[0] <= eio_window[1])]
    assert not errors, f"{len(errors)} client errors, first {errors[:5]}"
    assert all(r["ops"] > 0 for r in results)



@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [
    {"servers": 2},
    pytest.param({"servers": 2, "extra_env": {"CHFS_LOCAL_FASTPATH": "1"}}, id="fastpath")],
    indirect=True)
def test_third_and_fourth_server_join_under_load_nothing_lost(loaded_pool):
    pool = loaded_pool
    before = [allocated(os.path.join(d, "data")) for d in pool.dirs]
    e0 = poolstatus.epoch(pool.env)
    with clients(pool) as w:
        pool.add()
        st, _ = poolstatus.wait_settled(pool.env, 3, after_epoch=e0)
        e1 = next(iter(st.values()))["epoch"]
        assert st[pool.addrs[2]]["bytes_in"] > 0 and st[pool.addrs[2]]["entries_in"] > 0, st
        pool.add()
        st, _ = poolstatus.wait_settled(pool.env, 4, after_epoch=e1)
        results = w.stop()
    assert_clients_clean(results)
    wm, nw = worker_manifests(pool, results)
    assert_all_bytes(pool, [pool.manifest] + wm, FILES + nw)
    # The keys moved with their data: the newcomers received bytes the old servers sent, and
    # the old servers hold less than before, although the clients kept writing.
    assert st[pool.addrs[3]]["bytes_in"] > 0, st
    sent = sum(st[a]["bytes_out"] for a in pool.addrs[:2])
    got = sum(st[a]["bytes_in"] for a in pool.addrs[2:])
    assert sent > 0 and got > 0, st
    after = [allocated(os.path.join(d, "data")) for d in pool.dirs[:2]]
    assert all(a < b for a, b in zip(after, before)), f"old servers' data: {before} -> {after}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [{"servers": 3}], indirect=True)
def test_graceful_leave_under_load_nothing_lost(loaded_pool):
    pool = loaded_pool
    leaving = pool.addrs[1]
    e0 = poolstatus.epoch(pool.env)
    with clients(pool) as w:
        r = pool.run(["chfsctl", "-c", pool.tmp, "-w", "40", "remove", leaving], check=False,
                     timeout=50)
        assert r.returncode == 0, r.stderr
        assert "leaving" in r.stderr and f"left the pool: {leaving}" in r.stderr, r.stderr
        assert leaving not in r.stdout and r.stdout.startswith("CHFS_SERVER="), r.stdout
        assert "left the pool" in pool.log(1)
        pool.pids[1] = None
        pool.addrs[1] = None
        pool.env["CHFS_SERVER"] = ",".join(a for a in pool.addrs if a)
        st, _ = poolstatus.wait_settled(pool.env, 2, after_epoch=e0)
        results = w.stop()
    assert_clients_clean(results)
    assert sum(s["bytes_in"] for s in st.values()) > 0, st
    wm, nw = worker_manifests(pool, results)
    assert_all_bytes(pool, [pool.manifest] + wm, FILES + nw)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_server_restarted_on_a_new_port_after_a_join_serves_every_byte(loaded_pool):
    pool = loaded_pool
    e0 = poolstatus.epoch(pool.env)
    with clients(pool) as w:
        pool.add()
        st, _ = poolstatus.wait_settled(pool.env, 3, after_epoch=e0)
        e1 = next(iter(st.values()))["epoch"]
        old = pool.addrs[2]
        t_down = time.time()
        pool.restart(2, host=f"127.0.0.1:{free_port()}")  # same storage dir, same identity
        assert pool.addrs[2] != old
        poolstatus.wait_settled(pool.env, 3, after_epoch=e1)
        t_up = time.time()
        time.sleep(1)
        results = w.stop()
    # While the server restarts, its keys are unavailable: clear EIO, then everything again
    # once the clients have the new address (the list is re-fetched every 2 s while a
    # member is down, at once on a stale-epoch answer).
    assert_clients_clean(results, eio_window=(t_down, t_up + 3))
    wm, nw = worker_manifests(pool, results)
    assert_all_bytes(pool, [pool.manifest] + wm, FILES + nw)


# 12 pools in turn: ~50 s on an idle machine, 2-3x that in the sanitizer builds.
@pytest.mark.timeout(240)
def test_join_right_after_writes_loses_nothing(tmp_path):
    """A third server joins a fresh 2-server pool right after 100 files were written (the
    second server's own join rebalance may still be finishing), in 12 rounds: every file reads
    back. On the first rebalance core about 1 round in 5 lost ~30 of the 100 files for good
    (ENOENT or other bytes, every server idle): the joiner reported 'took over every key'
    without the keys one previous owner had handed over."""
    from ci.testlib.chfs_pool import ChfsPool
    for rnd in range(12):
        pool = ChfsPool(servers=2, tmp=str(tmp_path / f"pool{rnd}"))
        try:
            manifest = os.path.join(pool.tmp, "files.json")
            chfsload.write(pool.env, manifest, 100, seed=rnd)
            e0 = poolstatus.epoch(pool.env)
            pool.add()
            poolstatus.wait_settled(pool.env, 3, after_epoch=e0)
            r = chfsload.verify(pool.env, manifest)
            assert r["ok"] == 100, f"round {rnd}: {r['failed'][:3]} {r['wrong'][:3]}"
        finally:
            pool.stop()


def wait_for(cond, what, timeout=15):
    end = time.time() + timeout
    while not cond():
        assert time.time() < end, what
        time.sleep(0.2)



# ~57 s on an idle machine: verify reads 500 files while a server is dead, and each of the
# ~250 reads that need it fails after the transport's reachability probe (~0.1 s each; the
# issue's bound is 2 s per read, checked below); then a restart and a settled rebalance.
@pytest.mark.timeout(180)
@pytest.mark.parametrize("victim", ["joiner", "sender"])
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_server_killed_during_rebalance_gives_eio_then_recovers(loaded_pool, victim):
    """SIGKILL the joining server, or a server whose keys it is taking over, in the middle of
    the rebalance: every file then reads correctly or fails with EIO (the files whose entry
    the dead server holds: EIO), never ENOENT or other bytes; restarted on its storage
    directory, the rebalance finishes and every byte verifies. To be sure the rebalance is in
    progress, server 1 is stopped (SIGSTOP) before the join: the joiner can take over server
    0's keys but not server 1's until it continues. The pool must have settled first: if the
    second server's own join is still rebalancing, the new joiner waits for it — for server 1,
    stopped — and never starts (seen on a fast VM: "the pool is still rebalancing after an
    earlier change ... waiting" until the 60 s start timeout)."""
    pool = loaded_pool
    poolstatus.wait_settled(pool.env, 2)
    e0 = poolstatus.epoch(pool.env)
    os.kill(pool.pids[1], signal.SIGSTOP)
    try:
        new = pool.add()
        wait_for(lambda: poolstatus.status(pool.env, via=pool.addrs[new]).get(pool.addrs[new], {})
                 .get("rebalance") == "active", "the joiner never reported rebalance=active")
        i = new if victim == "joiner" else 1
        dead = pool.addrs[i]
        os.kill(pool.pids[i], signal.SIGKILL)
    finally:
        try:
            os.kill(pool.pids[1], signal.SIGCONT)
        except ProcessLookupError:
            pass
    pool.pids[i] = None
    via = pool.addrs[0]
    wait_for(lambda: poolstatus.status(pool.env, via=via).get(dead, {}).get("down"),
             "the killed server is not reported down")
    live = next(a for j, a in enumerate(pool.addrs) if j != i and a != via)
    wait_for(lambda: not poolstatus.status(pool.env, via=via).get(live, {"down": True})["down"],
             f"{live} is not up again after SIGCONT")
    r = chfsload.verify(pool.env, pool.manifest)
    assert not r["wrong"], f"readable but wrong while {dead} is dead: {r['wrong'][:5]}"
    assert all(e == "EIO" for _, e in r["failed"]), r["failed"][:5]
    assert r["failed"], f"no file needed the dead server {dead}"
    # Known dead: a read that needs it fails at once (issue 19: within 2 s), not after a timeout.
    assert r["slowest_failure_s"] < 2.5, f"a failing read took {r['slowest_failure_s']:.1f} s"
    failed = {p for p, _ in r["failed"]}
    on_dead = [p for p in list(json.load(open(pool.manifest)))[:20] if owner(pool, p) == dead]
    assert on_dead and all(p in failed for p in on_dead), (on_dead, sorted(failed)[:10])
    # Back on the same storage directory and address: the rebalance completes.
    pool._start(i)
    poolstatus.wait_settled(pool.env, 3, after_epoch=e0)
    assert_all_bytes(pool, [pool.manifest], FILES)


CHUNK = 64 << 10
CHUNKS_READER = r"""
import ctypes, hashlib, os, sys
lib = ctypes.CDLL("libchfs.so.3", use_errno=True)
lib.chfs_pread.restype = ctypes.c_ssize_t
lib.chfs_pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
assert lib.chfs_init(None) == 0
fd = lib.chfs_open(sys.argv[1].encode(), os.O_RDONLY)
assert fd >= 0, os.strerror(ctypes.get_errno())
size = int(sys.argv[2])
buf = ctypes.create_string_buffer(size)
for off in range(0, int(sys.argv[3]), size):
    n = lib.chfs_pread(fd, buf, size, off)
    print(hashlib.sha256(buf.raw[:n]).hexdigest() if n >= 0 else "E" + str(ctypes.get_errno()))
"""


def read_chunks(pool, path, length):
    """sha256 of each chunk of path read on its own ("E<errno>" for a chunk that failed)."""
    r = pool.run(["python3", "-c", CHUNKS_READER, path, str(CHUNK), str(length)],
                 env=python_env(pool.env), timeout=90)
    return r.stdout.split()


def join_while_server1_is_stopped(pool):
    """The set-up of the restarted-while-open tests: a file of server 0 with 64 chunks written
    and settled, server 1 stopped (SIGSTOP: the caller continues it), server 2 (id f…f: sorts
    last) joined and seen down by servers 0 and 2. Server 2's rebalance window stays open
    while server 1 cannot say DONE. Returns (path, data, index of server 2, seen_down)."""
    path = next(f"/r{i}" for i in range(200) if owner(pool, f"/r{i}") == pool.addrs[0])
    data = rand(64 * CHUNK, 31)
    put(pool, path, data)
    poolstatus.wait_settled(pool.env, 2)
    srv2 = os.path.join(pool.tmp, "srv2")
    os.makedirs(srv2)
    fd = os.open(os.path.join(srv2, "server.id"), os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"f" * 32 + b"\n")
    os.close(fd)
    stopped = pool.addrs[1]
    os.kill(pool.pids[1], signal.SIGSTOP)
    new = pool.add()

    def seen_down():
        return all(poolstatus.status(pool.env, via=pool.addrs[v]).get(stopped, {}).get("down")
                   for v in (0, new))
    wait_for(seen_down, "server 1 is not seen down")
    return path, data, new, seen_down


@pytest.mark.timeout(180)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2, "chfsd_args": ["-t", "90000"]}],
                         indirect=True)
def test_server_restarted_while_its_rebalance_is_open_keeps_what_it_took(chfs_pool):
    """A new owner remembers the chunks it took only in memory: restarted while its rebalance
    is open (a previous member has not said DONE), it takes each chunk it touches once more.
    The previous owner punched the chunk when it was taken and sends the hole as zeros; they
    must not overwrite the data the new owner holds (the CI run of test_core's
    test_shm_server_restart_serves_old_data read 1.1 MiB of zeros after such a restart).

    The window is held open deterministically: server 1 is stopped before server 2 joins,
    and server 2's id sorts after server 1's, so server 0 — having handed its keys to server
    2 — sends DONE to server 1 first and waits there for its 90 s RPC timeout."""
    pool = chfs_pool
    try:
        path, data, new, all_see_down = join_while_server1_is_stopped(pool)
        want = [hashlib.sha256(data[o:o + CHUNK]).hexdigest() for o in range(0, len(data), CHUNK)]
        first = read_chunks(pool, path, len(data))  # server 2 takes its chunks from server 0
        assert len(first) == len(want) and all(g == w or g == "E5" for g, w in zip(first, want))
        st = poolstatus.status(pool.env, via=pool.addrs[new])[pool.addrs[new]]
        assert st["chunks_in"] > 0 and st["rebalance"] == "active", st
        pool.restart(new)
        wait_for(all_see_down, "server 1 is not seen down after the restart")
        again = read_chunks(pool, path, len(data))
        # Server 0 had not said DONE to server 2 (DIR/rebalance: ring epoch, previous list,
        # the previous members that said DONE): the second read took the chunks again.
        done = open(os.path.join(pool.dirs[new], "rebalance")).read().splitlines()[2]
        assert open(os.path.join(pool.dirs[0], "server.id")).read().strip() not in done
    finally:
        os.kill(pool.pids[1], signal.SIGCONT)
    wrong = [i for i, (g, w) in enumerate(zip(again, want)) if g != w and g != "E5"]
    assert not wrong, f"chunks {wrong} of {len(want)} read wrong after the restart"
    assert [g for g in again if g != "E5"] and len(again) == len(want), again
    poolstatus.wait_settled(pool.env, 3)
    # A process may start from the node's member list cache for CHFS_LIST_CACHE_MSEC (500 ms),
    # and the last one, written by the read above while server 1 was stopped, says it is down:
    # the client asks server 1 before failing (EIO for its chunks before: CI failed so once).
    assert read_chunks(pool, path, len(data)) == want


@pytest.mark.timeout(180)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2, "chfsd_args": ["-t", "90000"]}],
                         indirect=True)
@pytest.mark.parametrize("op", ["truncate", "unlink"])
def test_server_restarted_while_its_rebalance_is_open_keeps_its_cuts(chfs_pool, op):
    """An unlink while server 1 is stopped: server 1 keeps its chunks of the file, server 2 —
    their new owner — records the cut for its open window. Restarted before server 1 is back,
    server 2 must still apply it when server 1 hands the chunks over: it kept the cut only in
    memory, took them whole and the data came back (server 2 held 0.4-0.9 MiB). A truncate to
    0 then is refused (EIO) and cuts nothing (lib/namespace.c set_size: it used to cut the live
    servers and leave server 1's chunks past the new size): the file must come back whole."""
    pool = chfs_pool
    try:
        path, data, new, seen_down = join_while_server1_is_stopped(pool)
        # Server 1 is down: an unlink removes the others' chunks and reports EIO for it.
        r = io(pool, *(["truncate", path, 0] if op == "truncate" else ["unlink", path]), check=False)
        pool.restart(new)
        wait_for(seen_down, "server 1 is not seen down after the restart")
    finally:
        os.kill(pool.pids[1], signal.SIGCONT)
    poolstatus.wait_settled(pool.env, 3)
    # Settled is not yet up everywhere: a member's failure detector sees server 1 again a few
    # rounds later, and a client with that member's list gets EIO for it meanwhile (ASan run).
    wait_for(lambda: not any(poolstatus.status(pool.env, via=pool.addrs[v])
                             .get(pool.addrs[1], {}).get("down") for v in (0, 1, new)),
             "server 1 is not seen up again")
    if op == "truncate":
        assert r.returncode != 0 and b"EIO" in r.stderr, r.stderr
        assert io(pool, "get", path).stdout == data, "a refused truncate lost bytes"
        return
    held = allocated(os.path.join(pool.dirs[new], "data"))
    assert held == 0, f"server 2 holds {held} bytes of a file cut to nothing"
