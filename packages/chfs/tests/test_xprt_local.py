"""The node-local transport (transport/xprt_local.c) in a real pool: with CHFS_XPRT_LOCAL=1 a
client whose servers are all on its node talks to them over their Unix sockets and
process_vm_readv/writev and never loads libfabric; data written and read that way is intact,
and chfsd removes its socket when it exits (a starting one removes those killed servers left)."""
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import poolstatus
from chfsutil import get, io, put, rand, sha, stat

CHUNK = 65536


@pytest.fixture
def local_dir():
    d = tempfile.mkdtemp(prefix="chfs-local-t-")  # mode 0700, ours: what chfsd accepts
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def local_pool(request_dir, **kw):
    return {"extra_env": {"CHFS_XPRT_LOCAL": "1", "CHFS_LOCAL_DIR": request_dir}, **kw}


@pytest.fixture
def lpool(request, local_dir, tmp_path):
    from ci.testlib.chfs_pool import ChfsPool
    params = dict(getattr(request, "param", {}) or {})
    pool = ChfsPool(tmp=str(tmp_path / "pool"), **local_pool(local_dir, **params))
    pool.local_dir = local_dir
    try:
        yield pool
    finally:
        pool.stop()


def loaded_objects(pool, *args, env=None):
    """Shared objects chfs-io loads (LD_DEBUG=files) while running args."""
    e = dict(env or pool.env, LD_DEBUG="files")
    r = io(pool, *args, env=e)
    return r.stderr.decode()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lpool", [{}, {"proto": "shm"}], indirect=True, ids=["tcp", "shm"])
def test_local_transport_round_trips_data(lpool):
    assert len(os.listdir(lpool.local_dir)) == lpool.n, "every chfsd publishes one socket"
    sizes = [0, 1, CHUNK - 1, CHUNK + 1, 3 * CHUNK + 17, 5 * (1 << 20) + 3]
    for i, n in enumerate(sizes):
        data = rand(n, 40 + i)
        put(lpool, f"/l{i}", data)
        assert stat(lpool, f"/l{i}")[1] == n
        assert sha(get(lpool, f"/l{i}")) == sha(data)
    big = rand(5 * (1 << 20) + 3, 45)
    for off, ln in [(CHUNK - 10, 20), (CHUNK * 3 - 1, CHUNK * 2 + 2), (100, 1 << 20)]:
        assert get(lpool, "/l5", off, ln) == big[off:off + ln]
    # what went in over the local sockets reads back the same over libfabric, and back
    ofi = dict(lpool.env, CHFS_XPRT_LOCAL="0")
    assert sha(io(lpool, "get", "/l5", env=ofi).stdout) == sha(big)
    data = rand(2 * (1 << 20) + 5, 49)
    io(lpool, "put", "/ofi", 0, "create", input=data, env=ofi)
    assert sha(get(lpool, "/ofi")) == sha(data)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("lpool", [{"servers": 1}], indirect=True)
@pytest.mark.parametrize("xprt_local", ["1", "0"], ids=["local", "libfabric"])
def test_reads_racing_truncates_get_file_bytes_and_the_server_lives(lpool, xprt_local):
    """chfsd pushes a read from a mapping of the backing file (server/bulk_io.c). A truncate
    meanwhile would make a copy from it fault: in the local transport's process_vm_writev that
    is EFAULT (the rest is read the old way); over libfabric, where a provider may memcpy, it
    would be SIGBUS, so a truncate waits for the mapped reads. Either way chfsd lives and every
    byte read is the file's or a zero of the cut."""
    env = dict(lpool.env, CHFS_XPRT_LOCAL=xprt_local)
    n = 6 << 20
    blob = os.path.join(lpool.tmp, "blob")
    with open(blob, "wb") as f:
        f.write(b"\xab" * n)
    put(lpool, "/t", b"\xab" * n)
    cutter = subprocess.Popen(["bash", "-c", "while :; do chfs-io truncate /t 4096 || exit 1;"
                               f" chfs-io put /t 0 < {blob} || exit 1; done"], env=env,
                              start_new_session=True)
    try:
        for _ in range(60):
            r = io(lpool, "get", "/t", env=env)
            assert set(r.stdout) <= {0xab, 0}, "a read returned bytes the file never had"
            assert cutter.poll() is None, "the truncating client failed"
    finally:
        os.killpg(cutter.pid, signal.SIGKILL)  # bash and its chfs-io
        cutter.wait(timeout=30)
    os.kill(lpool.pids[0], 0)  # still there
    # (a truncate the killed client sent may still land on /t: check on another file)
    put(lpool, "/after", b"\xab" * n)
    assert io(lpool, "get", "/after", env=env).stdout == b"\xab" * n


@pytest.mark.timeout(180)
def test_local_transport_many_small_files(lpool):
    io(lpool, "mkdir", "/many")
    for i in range(150):
        put(lpool, f"/many/f{i}", rand(100 + i, i))
    for i in range(0, 150, 7):
        assert get(lpool, f"/many/f{i}") == rand(100 + i, i)
    names = io(lpool, "ls", "/many").stdout.decode().split()
    assert sorted(names) == sorted(f"f{i}" for i in range(150))


@pytest.mark.timeout(120)
def test_client_never_loads_libfabric_when_every_server_is_local(lpool):
    put(lpool, "/f", rand(300000, 1))
    local = loaded_objects(lpool, "get", "/f")
    assert "libchfs" in local, "LD_DEBUG output does not list the objects loaded"
    assert "libfabric" not in local, "a client of an all-local pool loaded libfabric"
    # the same command without the local transport does load it (the check can see it)
    ofi = loaded_objects(lpool, "get", "/f", env=dict(lpool.env, CHFS_XPRT_LOCAL="0"))
    assert "libfabric" in ofi


@pytest.mark.timeout(120)
def test_chfsd_removes_its_socket_at_exit(lpool):
    assert len(os.listdir(lpool.local_dir)) == lpool.n
    lpool.stop()
    assert os.listdir(lpool.local_dir) == []


def sock_name(addr):
    """The start of a server's socket name (xprt_local_dir.c): "<address, sanitized>@<netns>"."""
    return re.sub(r"[^A-Za-z0-9.]", "-", addr) + "@"


@pytest.mark.timeout(120)
def test_starting_chfsd_removes_the_socket_a_killed_one_left(lpool):
    d = lpool.local_dir
    # A member killed before the pool settled its join leaves the others' handover to it open,
    # and they refuse the next join until it is back (doc/design.md, Failures): settle first.
    poolstatus.wait_settled(lpool.env, lpool.n)
    lpool.kill(3)  # SIGKILL: no clean exit
    dead = [s for s in os.listdir(d) if s.startswith(sock_name(lpool.addrs[3]))]
    assert len(dead) == 1, "the killed server's socket is not left behind"
    # older than a server between bind and listen (a starting server leaves those alone)
    os.utime(os.path.join(d, dead[0]), (time.time() - 60,) * 2, follow_symlinks=False)
    open(os.path.join(d, "plain"), "w").close()
    os.symlink(dead[0], os.path.join(d, "link"))
    lpool.add()
    left = os.listdir(d)
    assert dead[0] not in left
    for i in (0, 1, 2, 4):
        assert any(s.startswith(sock_name(lpool.addrs[i])) for s in left), f"server {i}"
    assert {"plain", "link"} <= set(left) and len(left) == 6


@pytest.mark.timeout(120)
def test_no_socket_with_chfsd_local_socket_0(local_dir, tmp_path):
    from ci.testlib.chfs_pool import ChfsPool
    pool = ChfsPool(tmp=str(tmp_path / "pool"), servers=2,
                    extra_env={"CHFS_XPRT_LOCAL": "1", "CHFS_LOCAL_DIR": local_dir,
                               "CHFSD_LOCAL_SOCKET": "0"})
    try:
        assert os.listdir(local_dir) == []
        put(pool, "/x", b"over libfabric")  # the client falls back
        assert get(pool, "/x") == b"over libfabric"
    finally:
        pool.stop()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("netns_cluster", [{"nodes": 2}], indirect=True)
def test_same_address_in_two_network_namespaces_stays_apart(netns_cluster, local_dir):
    """Two servers on 127.0.0.1:PORT, one per network namespace (two nodes of ci/testlib/netns.py
    sharing this file system, so one socket directory): a local client in each namespace reaches
    its own namespace's server (its own pool secret, its own file), never the other's."""
    c = netns_cluster
    host = f"127.0.0.1:{random.randint(20000, 60000)}"  # fresh namespaces: any port is free
    env = {"CHFS_XPRT_LOCAL": "1", "CHFS_LOCAL_DIR": local_dir}
    pools = [c.start_chfs(servers=[n], host=host, extra_env=env) for n in (0, 1)]
    assert pools[0].addrs == pools[1].addrs == [f"tcp://{host}"]
    socks = sorted(os.listdir(local_dir))
    assert len(socks) == 2 and socks[0].split("@")[0] == socks[1].split("@")[0], socks

    def nio(n, *args, data=None, debug=False):
        e = dict(pools[n].env, LD_DEBUG="files") if debug else pools[n].env
        r = c.run(n, ["chfs-io", *map(str, args)], input=data, env=e, check=False, text=False)
        assert r.returncode == 0, r.stderr.decode()
        return r

    for n in (0, 1):
        nio(n, "put", "/who", 0, "create", data=f"node {n}".encode())
        nio(n, "put", f"/only{n}", 0, "create", data=rand(70000, n))
    for n in (0, 1):
        r = nio(n, "get", "/who", debug=True)
        assert r.stdout == f"node {n}".encode()
        assert "libfabric" not in r.stderr.decode(), "the client did not use the local socket"
        assert sorted(nio(n, "ls", "/").stdout.decode().split()) == sorted(["who", f"only{n}"])
        assert nio(n, "get", f"/only{n}").stdout == rand(70000, n)
