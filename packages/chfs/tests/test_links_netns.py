"""Hard links and files that outlive their name across simulated nodes (issue 16, Tests): 4 chfsd
each in its own network namespace and the clients on a fifth (netns_cluster). Names of one file
in directories whose entries live on different nodes share the data, the count and the size;
a client on the fifth node unlinks every name of an 8 MiB file it holds open and keeps reading
it; killed with SIGKILL, its data are removed on every node once its lease ran out (the lease
is set short through CHFS_ORPHAN_LEASE, which the servers read)."""
import os
import signal
import subprocess
import sys
import time

import pytest

import poolstatus
from chfsutil import python_env, rand

HOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orphan_holder.py")
LEASE = 2.0
SIZE = 8 << 20
SLACK = 256 << 10  # stored_bytes counts allocated blocks (see test_orphan_lease.py)


@pytest.fixture
def pool4(netns_cluster, monkeypatch):
    monkeypatch.setenv("CHFS_ORPHAN_LEASE", str(LEASE))  # the servers' environment
    c = netns_cluster
    pool = c.start_chfs(servers=[0, 1, 2, 3])
    return c, pool


def client(c, pool):
    """chfs-io on node 4: (argv..., data=bytes) -> CompletedProcess (bytes)."""
    def io(*args, data=None, check=True):
        r = c.run(4, ["chfs-io", *map(str, args)], input=data, env=pool.env, check=False, text=False)
        if check:
            assert r.returncode == 0, f"chfs-io {args}: {r.stderr.decode()}"
        return r
    return io


def nstat(io, path):
    mode, size, nlink, _ = io("stat", path).stdout.split()
    return int(size), int(nlink)


def owner(c, pool, path):
    return c.run(4, ["chlist", "-o", path], env=pool.env).stdout.strip()


def totals(c, pool):
    """(stored bytes, orphans) over the pool, asked from node 4."""
    for _ in range(5):  # asked again while a loaded machine makes a member miss the timeout
        r = c.run(4, poolstatus.STATUS_ARGV + ["-t", "5000"], env=pool.env, check=False)
        st = poolstatus.parse(r.stdout)
        if len(st) == 4 and not any(s["down"] for s in st.values()):
            break
    assert len(st) == 4 and not any(s["down"] for s in st.values()), r.stdout + r.stderr
    return sum(s["stored_bytes"] for s in st.values()), sum(s.get("orphans", 0) for s in st.values())


def spread_dirs(c, pool, n):
    """n directory names whose file "f" lands on n different nodes."""
    out, seen = [], set()
    for i in range(64):
        d = f"/d{i}"
        o = owner(c, pool, f"{d}/f")
        if o not in seen:
            seen.add(o)
            out.append(d)
        if len(out) == n:
            return out
    pytest.fail(f"no {n} directories with names on different nodes: {seen}")


def start_holder(c, pool, path):
    """orphan_holder.py on node 4 holding path open (not unlinking it): (Popen, ask), where
    ask(cmd) sends one command and returns its one-line answer."""
    h = c.popen(4, [sys.executable, HOLDER, path, str(SIZE), "--no-unlink"], env=python_env(pool.env),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(cmd):
        h.stdin.write(cmd + "\n")
        h.stdin.flush()
        return h.stdout.readline().strip()
    return h, ask


def space_comes_back(c, pool, before):
    """Within a lease (and slack for the bridge), the stored bytes are back to before and
    nothing is held as an orphan."""
    t0 = time.time()
    while time.time() - t0 < LEASE + 8 and abs(totals(c, pool)[0] - before) > SLACK:
        time.sleep(0.2)
    now, orphans = totals(c, pool)
    assert abs(now - before) <= SLACK and orphans == 0, (now, before, orphans)


@pytest.mark.timeout(240)
def test_links_across_namespaced_nodes_share_data_count_and_size(pool4):
    c, pool = pool4
    io = client(c, pool)
    dirs = spread_dirs(c, pool, 4)
    names = [f"{d}/f" for d in dirs]
    assert len({owner(c, pool, n) for n in names}) == 4
    for d in dirs:
        io("mkdir", d)
    data = rand(3 * (1 << 20) + 777, 7)  # striped over the nodes
    io("put", names[0], 0, "create", data=data)
    for k, n in enumerate(names[1:], start=2):
        io("link", names[0], n)
        assert nstat(io, names[0]) == (len(data), k)
    assert {nstat(io, n) for n in names} == {(len(data), 4)}
    # written through the name on one node, read through the names on the others
    patch = rand(200000, 8)
    io("put", names[2], 1 << 20, data=patch)
    want = data[:1 << 20] + patch + data[(1 << 20) + len(patch):]
    for n in names:
        assert io("get", n).stdout == want
    # extended through another name: every name's size
    io("put", names[3], len(data), data=b"tail")
    assert {nstat(io, n) for n in names} == {(len(data) + 4, 4)}
    for k, n in enumerate(names[:-1]):
        io("unlink", n)
        assert nstat(io, names[-1]) == (len(data) + 4, 3 - k)
    assert io("get", names[-1]).stdout == want + b"tail"
    io("unlink", names[-1])
    assert all(not os.listdir(os.path.join(d, "data")) for d in pool.dirs)  # freed with the last name


@pytest.mark.timeout(240)
def test_unlinked_while_open_on_a_fifth_node_then_killed_the_space_comes_back(pool4):
    c, pool = pool4
    io = client(c, pool)
    a, b = spread_dirs(c, pool, 2)
    for d in (a, b):
        io("mkdir", d)
    before, orphans = totals(c, pool)
    assert orphans == 0
    h, ask = start_holder(c, pool, f"{a}/f")

    try:
        assert h.stdout.readline().strip() == "held"
        io("link", f"{a}/f", f"{b}/f")  # a second name, on another node, from another process
        assert nstat(io, f"{b}/f") == (SIZE, 2)
        assert ask(f"unlink {a}/f") == "unlinked"
        assert nstat(io, f"{b}/f") == (SIZE, 1)
        assert ask(f"unlink {b}/f") == "unlinked"  # the last name: the holder keeps the data
        assert io("stat", f"{b}/f", check=False).returncode != 0
        held, orphans = totals(c, pool)
        assert abs(held - (before + SIZE)) <= SLACK and orphans == 1
        time.sleep(2.5 * LEASE)  # renewed across the bridge: still all there
        assert ask("check") == f"ok {SIZE}"
        assert abs(totals(c, pool)[0] - held) <= SLACK
        h.send_signal(signal.SIGKILL)  # `ip netns exec` execs python: this is the holder itself
        h.wait(timeout=20)
        space_comes_back(c, pool, before)
    finally:
        if h.poll() is None:
            h.kill()
        h.wait(timeout=20)
    assert all(not os.listdir(os.path.join(d, "data")) for d in pool.dirs)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("end", ["close", "kill"])
def test_unlinked_from_another_node_while_open_stays_usable_until_closed_or_killed(pool4, end):
    """The holder on node 4 has /f open; a process on node 1 unlinks it (open leases,
    lib/open_lease.c): the holder still reads and extends it, fstat says nlink 0, and the space
    comes back at its close — or a lease after it was killed."""
    c, pool = pool4
    io = client(c, pool)
    before, orphans = totals(c, pool)
    assert orphans == 0
    h, ask = start_holder(c, pool, "/f")

    try:
        assert h.stdout.readline().strip() == "held"
        r = c.run(1, ["chfs-io", "unlink", "/f"], env=pool.env, check=False)
        assert r.returncode == 0, r.stderr
        assert io("stat", "/f", check=False).returncode != 0
        assert ask("check") == f"ok {SIZE}"
        assert ask("append 65536") == "appended"
        assert ask("stat") == f"stat 0 {SIZE + 65536}"
        time.sleep(2.5 * LEASE)  # renewed across the bridge: still all there
        assert ask("check") == f"ok {SIZE + 65536}"
        held, orphans = totals(c, pool)
        assert abs(held - (before + SIZE + 65536)) <= SLACK and orphans == 1
        if end == "close":
            assert ask("close") == "closed"
        else:
            h.send_signal(signal.SIGKILL)
            h.wait(timeout=20)
        space_comes_back(c, pool, before)
    finally:
        if h.poll() is None:
            h.kill()
        h.wait(timeout=20)
    assert all(not os.listdir(os.path.join(d, "data")) for d in pool.dirs)
