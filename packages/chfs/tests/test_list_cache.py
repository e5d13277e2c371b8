"""The node-local cache of the pool's member list (lib/listcache.c).

A fresh client takes the member list from a private cache file instead of asking a bootstrap
server. The tests make the bootstrap server unable to answer (SIGSTOP) and ask for a file owned
by the other server: a client that trusts the cache entry succeeds without the bootstrap
server, a client that ignores it needs the bootstrap server and fails. So each "ignored" case
(a file owned by another user, a symlink, a damaged file, a directory open to others) is shown
by behaviour, not by a log line. A stale entry (older epoch, a member missing, a server that is
gone) must be corrected by the servers / the retry path, never give wrong answers; an entry
older than CHFS_LIST_CACHE_MSEC is not used (down servers are only known from a fresh list), and
a server a young entry calls down is asked before its requests fail (it may be back since)."""
import os
import shutil
import signal
import subprocess
import time

import pytest

import poolstatus
from chfsutil import io, owner

SECRET_LEN = 32


def fnv(data: bytes, h=0xcbf29ce484222325) -> int:
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & ((1 << 64) - 1)
    return h


def secret_bytes(pool):
    with open(pool.secret_file) as f:
        return bytes.fromhex(f.read().strip())


def cache_dir(tmp_path):
    d = tmp_path / "listcache"
    d.mkdir(mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    return d


def entry(d):
    files = [f for f in os.listdir(d) if f.startswith("list-") and not f.endswith(".tmp")]
    assert len(files) == 1, files
    return os.path.join(d, files[0])


def parse(path):
    fields = {}
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0] == "chfs-list 1"
    for ln in lines[1:]:
        k, _, v = ln.partition(" ")
        fields[k] = v
    return fields


def write_entry(path, secret, fields):
    """An entry with a valid checksum (as libchfs writes it), from fields."""
    body = "chfs-list 1\n" + "".join(
        f"{k} {fields[k]}\n" for k in ("server", "fetched_ms", "epoch", "vnodes", "ring_epoch", "list", "down", "prev"))
    data = body.encode()
    s = fnv(data, fnv(secret))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data + f"sum {s:016x}\n".encode())


@pytest.fixture
def two(chfs_pool, tmp_path):
    """Two servers; CHFS_SERVER names only server 0 (the bootstrap); /f1 is owned by server 1;
    the cache has been filled by one client run."""
    pool = chfs_pool
    # Settled first: a member stopped while a join's keys still move makes the other answer
    # EIO for keys it must take from it (doc/design.md, Failures) until it is back.
    poolstatus.wait_settled(pool.env, 2)
    d = cache_dir(tmp_path)
    # Entries are used for 60 s here (default 500 ms), so a loaded machine cannot make them
    # expire between the steps of a test.
    env = dict(pool.env, CHFS_SERVER=pool.addrs[0], CHFS_LIST_CACHE=str(d),
               CHFS_RPC_TIMEOUT_MSEC="1500", CHFS_LIST_CACHE_MSEC="60000")
    name = next(f"/f{i}" for i in range(200) if owner(pool, f"/f{i}") == pool.addrs[1])
    io(pool, "put", name, 0, "create", input=b"hello", env=env)
    assert os.path.exists(entry(d)), "the first client wrote no cache entry"
    return pool, env, d, name


def stat_with_bootstrap_stopped(pool, env, name):
    os.kill(pool.pids[0], signal.SIGSTOP)
    try:
        t = time.monotonic()
        r = subprocess.run(["chfs-io", "stat", name], env=env, capture_output=True, timeout=60)
        return r, time.monotonic() - t
    finally:
        os.kill(pool.pids[0], signal.SIGCONT)


pytestmark = pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)


def test_cache_entry_is_private_and_used_without_the_bootstrap_server(two):
    pool, env, d, name = two
    st = os.stat(entry(d))
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.geteuid()
    # A long RPC timeout here: a client that asked the stopped bootstrap server first and fell
    # back to the cache would take >= 6 s; one that trusts the cache takes process start-up
    # only (0.3 s idle, up to ~2 s on a loaded 2-core machine).
    r, took = stat_with_bootstrap_stopped(pool, dict(env, CHFS_RPC_TIMEOUT_MSEC="6000"), name)
    assert r.returncode == 0, r.stderr.decode()
    assert took < 5, f"{took:.2f} s: the client waited for the bootstrap server"
    # Control: without the cache the same client needs the stopped bootstrap server.
    r, _ = stat_with_bootstrap_stopped(pool, dict(env, CHFS_LIST_CACHE="0"), name)
    assert r.returncode != 0


@pytest.mark.parametrize("how", ["other-owner", "symlink", "corrupt", "truncated", "open-dir",
                                 "other-pool"])
def test_untrustworthy_cache_entry_is_ignored(two, how, tmp_path):
    pool, env, d, name = two
    path = entry(d)
    if how == "other-owner":
        os.chown(path, 65534, 65534)
    elif how == "symlink":
        elsewhere = tmp_path / "private-copy"
        shutil.move(path, elsewhere)
        os.symlink(elsewhere, path)
    elif how == "corrupt":
        data = bytearray(open(path, "rb").read())
        i = data.index(b"list ") + 10
        data[i] ^= 1
        open(path, "wb").write(bytes(data))
    elif how == "truncated":
        data = open(path, "rb").read()
        open(path, "wb").write(data[: len(data) // 2])
    elif how == "open-dir":
        os.chmod(d, 0o755)
    elif how == "other-pool":
        # The entry filed under the name another bootstrap list of the same pool would look
        # up: its content says which list it belongs to, and that is checked.
        server = f"{pool.addrs[0]},{pool.addrs[0]}"
        key = fnv(server.encode(), fnv(secret_bytes(pool)))
        os.rename(path, os.path.join(d, f"list-{key:016x}"))
        env = dict(env, CHFS_SERVER=server)
    target = open(elsewhere, "rb").read() if how == "symlink" else None
    r, _ = stat_with_bootstrap_stopped(pool, env, name)
    assert r.returncode != 0, f"{how}: the cache entry was trusted"
    if how == "symlink":
        assert open(elsewhere, "rb").read() == target, "the symlink's target was changed"
    # Once the bootstrap server answers again the client works (and replaces a bad entry):
    # within a few failure-detector rounds (0.5 s each) of its resumption.
    os.chmod(d, 0o700)
    for _ in range(20):
        r = subprocess.run(["chfs-io", "stat", name], env=env, capture_output=True, timeout=60)
        if r.returncode == 0:
            break
        time.sleep(0.25)
    assert r.returncode == 0, r.stderr.decode()


def test_stale_epoch_in_cache_is_corrected(two):
    """An entry from an older epoch listing only server 0: the servers refuse requests placed
    with it, the client fetches the current list, and every file is found where it belongs."""
    pool, env, d, name = two
    path = entry(d)
    f = parse(path)
    cur_epoch = int(f["epoch"])
    f["epoch"] = str(cur_epoch - 1)
    f["list"] = f["list"].split(",")[0]
    f["fetched_ms"] = str(int(time.time() * 1000))
    write_entry(path, secret_bytes(pool), f)
    r = pool.run(["chfs-io", "stat", name], env=env)
    assert r.returncode == 0
    names = [f"/g{i}" for i in range(12)]
    for n in names:  # created through the stale entry: each must land at its real owner
        io(pool, "put", n, 0, "create", input=n.encode(), env=env)
    for n in names:  # read back by a client that asks the pool (no cache)
        assert io(pool, "get", n, env=dict(env, CHFS_LIST_CACHE="0")).stdout == n.encode()
    assert int(parse(entry(d))["epoch"]) == cur_epoch, "the corrected list was not cached"


def test_cache_naming_a_gone_server_is_dropped_and_refetched(two):
    """An entry (current epoch, valid checksum) whose only member is an address nobody listens
    at: the client drops it, fetches the pool's list and succeeds, quickly."""
    pool, env, d, name = two
    path = entry(d)
    f = parse(path)
    ident = f["list"].split(",")[0].split("=")[0]
    f["list"] = f"{ident}=tcp://127.0.0.1:1"
    f["fetched_ms"] = str(int(time.time() * 1000))
    write_entry(path, secret_bytes(pool), f)
    t = time.monotonic()
    r = pool.run(["chfs-io", "get", name], env=env)
    assert r.stdout == "hello"
    assert time.monotonic() - t < 4
    assert "127.0.0.1:1" not in open(entry(d)).read()


def test_entry_older_than_the_age_limit_is_not_used(two):
    """Which servers are down is only in a fresh list: past CHFS_LIST_CACHE_MSEC the entry is
    not used (the client needs the stopped bootstrap server and fails)."""
    pool, env, d, name = two
    time.sleep(0.3)
    r, _ = stat_with_bootstrap_stopped(pool, dict(env, CHFS_LIST_CACHE_MSEC="200"), name)
    assert r.returncode != 0, "an entry older than CHFS_LIST_CACHE_MSEC was used"


def cache_server_down(pool, env, d, stop):
    """Stop server 1 (stop(): SIGSTOP or SIGTERM), wait until the bootstrap server finds it down,
    and have one client fill the cache with that list; returns server 1's id."""
    stop()
    poolstatus.wait_view(pool.env, pool.addrs[0], {pool.addrs[1]})
    os.unlink(entry(d))
    subprocess.run(["chfs-io", "stat", "/none"], env=env, capture_output=True, timeout=60)
    f = parse(entry(d))
    sid = next(m.split("=")[0] for m in f["list"].split(",") if m.endswith("=" + pool.addrs[1]))
    assert sid in f["down"].split(","), f
    return sid


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["continued", "restarted"])
def test_server_back_within_the_cache_age_serves_its_files(two, how):
    """Server 1 hung (SIGSTOP) or stopped, the cache got a list saying it is down, then it came
    back (SIGCONT, or restarted on its directory) and the pool finds it up: a process starting
    from that entry (60 s here for a deterministic window; 500 ms by default) checks with a live
    member and reads the file, where it got EIO "server ... is down" before."""
    pool, env, d, name = two
    if how == "continued":
        os.kill(pool.pids[1], signal.SIGSTOP)
        try:
            cache_server_down(pool, env, d, lambda: None)
        finally:
            os.kill(pool.pids[1], signal.SIGCONT)
    else:
        cache_server_down(pool, env, d, lambda: pool.kill(1, signal.SIGTERM))
        pool.restart(1)
    poolstatus.wait_view(pool.env, pool.addrs[0], set())
    r = subprocess.run(["chfs-io", "get", name], env=env, capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == b"hello", r.stderr.decode()
    # The fresh list replaced the entry: later processes start with server 1 up.
    assert parse(entry(d))["down"] == ""


@pytest.mark.timeout(120)
def test_server_still_hung_fails_within_the_rpc_timeout(two):
    """The same entry while server 1 still hangs: its files fail with EIO after one list fetch
    from a live member (which finds it down too), not after the RPC timeout."""
    pool, env, d, name = two
    env = dict(env, CHFS_RPC_TIMEOUT_MSEC="4000")
    name0 = next(f"/h{i}" for i in range(200) if owner(pool, f"/h{i}") == pool.addrs[0])
    io(pool, "put", name0, 0, "create", input=b"up", env=env)
    os.kill(pool.pids[1], signal.SIGSTOP)
    try:
        cache_server_down(pool, env, d, lambda: None)
        t = time.monotonic()
        ok = subprocess.run(["chfs-io", "stat", name0], env=env, capture_output=True, timeout=60)
        base = time.monotonic() - t
        t = time.monotonic()
        r = subprocess.run(["chfs-io", "get", name], env=env, capture_output=True, timeout=60)
        took = time.monotonic() - t
    finally:
        os.kill(pool.pids[1], signal.SIGCONT)
    assert ok.returncode == 0, ok.stderr.decode()
    assert r.returncode != 0 and "down" in r.stderr.decode(), r.stderr.decode()
    assert took - base < 2, f"{took:.2f} s against {base:.2f} s for a process that succeeds"
