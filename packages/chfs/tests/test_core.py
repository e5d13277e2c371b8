"""Integration tests of CHFS core against a real pool of 4 chfsd over tcp on 127.0.0.1
(chfs_pool fixture): data integrity across chunk boundaries, sparse files, truncate, rename,
unlink, large directories, concurrent writers, failures, the pool secret and path safety."""
import os
import signal
import stat as st
import subprocess
import time

import pytest

import chfsload
from chfsutil import err_name, get, io, owner, put, rand, sha, stat
from ci.testlib.chfs_pool import wait_gone

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py); a
# test that reads the servers' logs or plants files in their storage gets its own (OWN), and so
# do two whose leftovers take longer to wipe than a new pool takes to start: 10,000 entries, and
# the backing files of a hash-placed file that `chfs-io localpath` was asked about, which its
# unlink leaves behind (a leak; the wipe would wait for them, then start a new pool anyway).
pytestmark = pytest.mark.module_pool
OWN = pytest.mark.parametrize("chfs_pool", [{"servers": 4}], indirect=True, ids=["own-pool"])

CHUNK = 65536


@pytest.mark.timeout(120)
def test_data_round_trips_across_chunk_boundaries(chfs_pool):
    sizes = [1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17, 5 * (1 << 20) + 3]
    for i, n in enumerate(sizes):
        data = rand(n, i)
        put(chfs_pool, f"/rt{i}", data)
        assert stat(chfs_pool, f"/rt{i}")[1] == n
        assert sha(get(chfs_pool, f"/rt{i}")) == sha(data)
    big = rand(5 * (1 << 20) + 3, 5)
    for off, ln in [(CHUNK - 10, 20), (CHUNK * 3 - 1, CHUNK * 2 + 2), (100, 1 << 20), (0, 33000)]:
        assert get(chfs_pool, "/rt5", off, ln) == big[off:off + ln]
    # reads past the end are short, at the end empty
    assert get(chfs_pool, "/rt4", 3 * CHUNK, 100) == rand(3 * CHUNK + 17, 4)[3 * CHUNK:]
    assert get(chfs_pool, "/rt4", 10 * CHUNK, 100) == b""


@pytest.mark.timeout(120)
def test_small_chunk_size_file_spans_all_servers(chfs_pool):
    io(chfs_pool, "create", "/small-chunks", 4096)
    data = rand(1 << 20, 7)
    put(chfs_pool, "/small-chunks", data, create=False)
    assert sha(get(chfs_pool, "/small-chunks")) == sha(data)
    holders = [d for d in chfs_pool.dirs if os.listdir(os.path.join(d, "data"))]
    assert len(holders) == 4, "a 256-chunk file should have a backing file on every server"
    sizes = [os.path.getsize(os.path.join(d, "data", os.listdir(os.path.join(d, "data"))[0]))
             for d in holders]
    assert max(sizes) <= len(data) and sum(1 for s in sizes if s > 0) == 4


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"extra_env": {"CHFS_LOCAL_FASTPATH": "1"}}], indirect=True)
def test_local_fast_path_round_trips_and_mixes_with_rpc_clients(chfs_pool):
    """With the fast path, chunks on this node's servers move by pread/pwrite on the backing
    files; a client using RPCs must see exactly the same bytes and sizes."""
    rpc_env = dict(chfs_pool.env, CHFS_LOCAL_FASTPATH="0")
    for i, n in enumerate([1000, 3 * CHUNK + 5, 4 * (1 << 20) + 1]):
        data = rand(n, 300 + i)
        put(chfs_pool, f"/fp{i}", data)                        # fast path writes
        assert sha(io(chfs_pool, "get", f"/fp{i}", env=rpc_env).stdout) == sha(data)
        assert io(chfs_pool, "stat", f"/fp{i}", env=rpc_env).stdout.split()[1] == str(n).encode()
        io(chfs_pool, "put", f"/rp{i}", 0, "create", input=data, env=rpc_env)   # RPC writes
        assert sha(get(chfs_pool, f"/rp{i}")) == sha(data)     # fast path reads
    put(chfs_pool, "/fpsparse", b"end", off=5 * CHUNK + 3)
    assert get(chfs_pool, "/fpsparse") == bytes(5 * CHUNK + 3) + b"end"


@pytest.mark.timeout(60)
def test_sparse_file_reads_zeros_in_holes(chfs_pool):
    tail = rand(1000, 1)
    put(chfs_pool, "/sparse", tail, off=10 * (1 << 20))
    assert stat(chfs_pool, "/sparse")[1] == 10 * (1 << 20) + 1000
    whole = get(chfs_pool, "/sparse")
    assert len(whole) == 10 * (1 << 20) + 1000
    assert whole[:10 * (1 << 20)] == bytes(10 * (1 << 20)) and whole[-1000:] == tail


@pytest.mark.timeout(60)
def test_truncate_shrinks_and_extends(chfs_pool):
    data = rand(300000, 2)
    put(chfs_pool, "/t", data)
    io(chfs_pool, "truncate", "/t", 70000)
    assert stat(chfs_pool, "/t")[1] == 70000
    assert get(chfs_pool, "/t") == data[:70000]
    io(chfs_pool, "truncate", "/t", 200000)
    got = get(chfs_pool, "/t")
    assert len(got) == 200000 and got[:70000] == data[:70000] and got[70000:] == bytes(130000)
    io(chfs_pool, "truncate", "/t", 0)
    assert get(chfs_pool, "/t") == b""


@pytest.mark.timeout(60)
def test_rename_moves_name_not_data(chfs_pool):
    data = rand(500000, 3)
    put(chfs_pool, "/a/..", b"", check=False) if False else None
    io(chfs_pool, "mkdir", "/dir1")
    io(chfs_pool, "mkdir", "/dir2")
    put(chfs_pool, "/dir1/file", data)
    for i in range(8):  # several names so both same-owner and cross-owner renames happen
        io(chfs_pool, "rename", "/dir1/file" if i == 0 else f"/dir2/f{i - 1}", f"/dir2/f{i}")
    assert err_name(io(chfs_pool, "stat", "/dir1/file", check=False)) == "ENOENT"
    assert sha(get(chfs_pool, "/dir2/f7")) == sha(data)
    put(chfs_pool, "/dir2/other", b"old contents")
    io(chfs_pool, "rename", "/dir2/f7", "/dir2/other")  # replaces
    assert sha(get(chfs_pool, "/dir2/other")) == sha(data)
    io(chfs_pool, "rename", "/dir2", "/dir3")  # non-empty: its entries move (lib/dir_rename.c)
    assert sha(get(chfs_pool, "/dir3/other")) == sha(data)
    assert err_name(io(chfs_pool, "stat", "/dir2/other", check=False)) == "ENOENT"
    io(chfs_pool, "rename", "/dir1", "/dir1b")  # empty directory
    assert stat(chfs_pool, "/dir1b")[0] & st.S_IFDIR
    names = io(chfs_pool, "ls", "/").stdout.decode().split()
    assert "dir1b" in names and "dir1" not in names and "dir3" in names and "dir2" not in names


@pytest.mark.timeout(60)
def test_unlink_removes_entry_and_backing_files(chfs_pool):
    put(chfs_pool, "/u", rand(1 << 20, 4))
    assert any(os.listdir(os.path.join(d, "data")) for d in chfs_pool.dirs)
    io(chfs_pool, "unlink", "/u")
    assert err_name(io(chfs_pool, "stat", "/u", check=False)) == "ENOENT"
    assert not any(os.listdir(os.path.join(d, "data")) for d in chfs_pool.dirs)
    assert err_name(io(chfs_pool, "unlink", "/u", check=False)) == "ENOENT"


@pytest.mark.timeout(240)
@OWN
def test_directory_with_10000_entries(chfs_pool):
    io(chfs_pool, "mkdir", "/big")
    io(chfs_pool, "mkfiles", "/big", 10000, timeout=200)
    names = io(chfs_pool, "ls", "/big").stdout.decode().split()
    assert len(names) == 10000 and set(names) == {f"f{i:06d}" for i in range(10000)}
    assert err_name(io(chfs_pool, "rmdir", "/big", check=False)) == "ENOTEMPTY"
    io(chfs_pool, "mkdir", "/empty")
    io(chfs_pool, "rmdir", "/empty")
    assert err_name(io(chfs_pool, "stat", "/empty", check=False)) == "ENOENT"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1}, {"servers": 4}, {"servers": 4, "proto": "shm"}],
                         indirect=True)
def test_listing_20000_entries_names_each_once_while_others_change(chfs_pool, tmp_path):
    """All servers are asked in parallel, page by page: every entry is listed exactly once, also
    while another process creates and removes entries of the directory (those that exist
    throughout are all there, nothing twice)."""
    io(chfs_pool, "mkdir", "/big")
    io(chfs_pool, "mkfiles", "/big", 20000, timeout=240)
    want = {f"f{i:06d}" for i in range(20000)}
    names = io(chfs_pool, "ls", "/big").stdout.decode().split()
    assert len(names) == 20000 and set(names) == want
    with chfsload.Churn(chfs_pool.env, "/big", "x", str(tmp_path)) as churn:
        for _ in range(5):
            names = io(chfs_pool, "ls", "/big").stdout.decode().split()
            assert len(names) == len(set(names)), "an entry listed twice"
            assert want <= set(names), f"{len(want - set(names))} entries missing"
            assert all(n in want or n.startswith("x") for n in names)
        res = churn.stop()[0]
    assert res["ops"] > 32 and not res["errors"], res


@pytest.mark.timeout(120)
def test_concurrent_writers_of_disjoint_chunks_give_full_size(chfs_pool):
    nproc, per = 4, 8  # each process writes every 4th chunk, 8 chunks each
    io(chfs_pool, "create", "/shared")
    blocks = {k: rand(CHUNK, 100 + k) for k in range(nproc * per)}
    procs = []
    for p in range(nproc):
        # one writer process per rank, each with its own chunks (rank p owns chunks p, p+4, ...)
        script = "".join(
            f"chfs-io put /shared {k * CHUNK} < {{d}}/blk{k} && " for k in range(p, nproc * per, nproc))
        procs.append(script)
    d = chfs_pool.tmp
    for k, b in blocks.items():
        with open(f"{d}/blk{k}", "wb") as f:
            f.write(b)
    running = [subprocess.Popen(["bash", "-c", s.format(d=d) + "true"], env=chfs_pool.env)
               for s in procs]
    assert all(p.wait(timeout=100) == 0 for p in running)
    expect = b"".join(blocks[k] for k in range(nproc * per))
    assert stat(chfs_pool, "/shared")[1] == len(expect)
    assert sha(get(chfs_pool, "/shared")) == sha(expect)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"rpc_timeout_ms": 2000}], indirect=True)
def test_killed_server_gives_eio_within_timeout_and_others_keep_serving(chfs_pool):
    small = {f"/s{i}": rand(1000, 200 + i) for i in range(8)}
    for p, b in small.items():
        put(chfs_pool, p, b)
    w = subprocess.Popen(["chfs-io", "writeloop", "/loop", "60"], env=chfs_pool.env,
                         stderr=subprocess.PIPE)
    time.sleep(1.5)
    assert w.poll() is None, "writer ended early: " + w.stderr.read().decode()
    dead = chfs_pool.addrs[1]
    t0 = time.time()
    chfs_pool.kill(1, signal.SIGKILL)
    w.wait(timeout=30)
    err = w.stderr.read().decode()
    assert w.returncode != 0 and "EIO" in err, err
    assert time.time() - t0 < 2.0 + 5.0, "EIO must come within the RPC timeout (+ slack)"
    survivors = 0
    for p, b in small.items():
        r = io(chfs_pool, "get", p, check=False, timeout=30)
        if owner(chfs_pool, p) == dead:
            assert err_name(r) == "EIO"
        else:
            assert r.returncode == 0 and r.stdout == b
            survivors += 1
    assert survivors >= 1


@pytest.mark.timeout(60)
@OWN
def test_client_without_the_secret_is_refused(chfs_pool, tmp_path):
    # A request without the pool secret is dropped before the server creates any state for its
    # sender or sends anything to the address it claims (no reply reflected to a forged address,
    # no peer/AV entry per forged address): the client finds no server that answers.
    other = tmp_path / "wrong-secret"
    other.write_text(os.urandom(32).hex() + "\n")
    other.chmod(0o600)
    env = dict(chfs_pool.env, CHFS_SECRET_FILE=str(other), CHFS_RPC_TIMEOUT_MSEC="1500")
    r = io(chfs_pool, "ls", "/", env=env, check=False)
    assert err_name(r) == "ENOTCONN" and "secret" in r.stderr.decode(), r.stderr.decode()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "missing")
    assert err_name(io(chfs_pool, "ls", "/", env=env, check=False)) == "EACCES"
    assert any("refused" in chfs_pool.log(i) and "no reply" in chfs_pool.log(i) for i in range(4))
    # the pool still serves clients with the secret
    io(chfs_pool, "ls", "/")


@pytest.mark.timeout(60)
@OWN
def test_path_traversal_attempts_fail(chfs_pool):
    assert err_name(io(chfs_pool, "stat", "/../etc/passwd", check=False)) == "EINVAL"
    assert err_name(io(chfs_pool, "put", "../../escape", 0, "create", input=b"x", check=False)) == "EINVAL"
    assert err_name(io(chfs_pool, "create", "/" + "n" * 300, check=False)) == "ENAMETOOLONG"
    assert err_name(io(chfs_pool, "stat", "/a" * 8200, check=False)) == "ENAMETOOLONG"  # > 16,383
    # 1500 components, 2999 bytes: within CHFS_PATH_MAX (the old on-disk layout's '_' per
    # component made this ENAMETOOLONG; the in-memory namespace has no such second limit).
    assert err_name(io(chfs_pool, "stat", "/a/" * 1500, check=False)) == "ENOENT"
    assert not os.path.exists("/escape") and not os.path.exists(os.path.dirname(chfs_pool.tmp) + "/escape")
    # Paths are never resolved in the storage directory (the namespace is in memory): a
    # symlink planted there under the name the old one-file-per-entry layout used changes nothing.
    own = chfs_pool.addrs.index(owner(chfs_pool, "evil/passwd"))
    os.symlink("/etc", os.path.join(chfs_pool.dirs[own], "_evil"))
    assert err_name(io(chfs_pool, "stat", "/evil/passwd", check=False)) in ("ENOENT", "EIO")


@pytest.mark.timeout(90)
def test_restarted_servers_serve_their_old_data(chfs_pool):
    data = rand(2 << 20, 9)
    io(chfs_pool, "mkdir", "/keep")
    put(chfs_pool, "/keep/data", data)
    for i in range(4):
        chfs_pool.restart(i)
    assert sha(get(chfs_pool, "/keep/data")) == sha(data)
    assert io(chfs_pool, "ls", "/keep").stdout.decode().split() == ["data"]


@pytest.mark.timeout(60)
def test_symlinks_and_metadata(chfs_pool):
    put(chfs_pool, "/target", b"hello")
    io(chfs_pool, "symlink", "target", "/link")
    assert io(chfs_pool, "readlink", "/link").stdout.decode().strip() == "target"
    assert get(chfs_pool, "/link") == b"hello"
    assert st.S_ISLNK(int(io(chfs_pool, "lstat", "/link").stdout.split()[0], 8))
    io(chfs_pool, "chmod", "/target", "600")
    assert stat(chfs_pool, "/target")[0] & 0o777 == 0o600
    assert err_name(io(chfs_pool, "stat", "/nodir/x", check=False)) == "ENOENT"
    # chfs_create makes missing parents, as upstream (chfs_open_posix keeps ENOENT)
    io(chfs_pool, "create", "/nodir/x")
    assert st.S_ISDIR(stat(chfs_pool, "/nodir")[0])
    assert err_name(io(chfs_pool, "mkdir", "/target", check=False)) == "EEXIST"
    # no backend (chfsd -b): stage-in leaves a CHFS file as it is, and finds nothing else
    io(chfs_pool, "stagein", "/target")
    assert get(chfs_pool, "/target") == b"hello"
    assert err_name(io(chfs_pool, "stagein", "/nothing", check=False)) == "ENOENT"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bufsize", ["0", "65536"])
def test_small_sequential_writes_with_and_without_client_buffer(chfs_pool, bufsize):
    env = dict(chfs_pool.env, CHFS_BUF_SIZE=bufsize)
    io(chfs_pool, "smallwrites", "/sw", 3000, 100, env=env)
    expect = bytes(k % 251 for k in range(300000))
    assert stat(chfs_pool, "/sw")[1] == len(expect)
    assert sha(get(chfs_pool, "/sw")) == sha(expect)


@pytest.mark.timeout(60)
def test_forked_child_uses_its_own_transport(chfs_pool):
    io(chfs_pool, "forkcheck", "/forked")
    assert get(chfs_pool, "/forked") == b"parentchild"


@pytest.mark.timeout(60)
@OWN
def test_local_placement_backing_file_is_shared_with_direct_writers(chfs_pool):
    io(chfs_pool, "create", "/local", 0, "local")
    put(chfs_pool, "/local", b"abc" * 1000, create=False)
    path = io(chfs_pool, "localpath", "/local").stdout.decode().strip()
    assert any(path.startswith(d) for d in chfs_pool.dirs) and os.path.getsize(path) == 3000
    with open(path, "r+b") as f:  # what the FUSE passthrough / hook fast path do
        f.seek(5000)
        f.write(b"direct")
    assert stat(chfs_pool, "/local")[1] == 5006
    assert get(chfs_pool, "/local", 5000, 6) == b"direct"
    put(chfs_pool, "/hashed", b"x" * 300000)
    assert err_name(io(chfs_pool, "localpath", "/hashed", check=False)) == "ENXIO"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2, "proto": "shm"}], indirect=True)
def test_shm_pool_round_trips_inline_and_rma(chfs_pool):
    assert all(a.startswith("shm://") for a in chfs_pool.addrs)
    for i, n in enumerate([100, 40000, 3 * (1 << 20) + 7]):  # inline, RMA, many chunks
        data = rand(n, 500 + i)
        put(chfs_pool, f"/shm{i}", data)
        assert sha(get(chfs_pool, f"/shm{i}")) == sha(data)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2, "proto": "shm", "start_timeout": 20}],
                         indirect=True)
def test_shm_server_restart_serves_old_data(chfs_pool):
    # Each shm incarnation is a new libfabric peer ("<name>~<tag>"), so the surviving server
    # (which talked to the old one) and the restarted one reach each other; then the bootstrap
    # server itself restarts, and data written in between survives too.
    data = rand(3 * (1 << 20) + 7, 77)
    put(chfs_pool, "/shmr", data)
    chfs_pool.restart(1)
    assert sha(get(chfs_pool, "/shmr")) == sha(data)
    more = rand(2 * (1 << 20) + 3, 78)
    put(chfs_pool, "/shmr2", more)
    chfs_pool.restart(0)
    assert sha(get(chfs_pool, "/shmr")) == sha(data)
    assert sha(get(chfs_pool, "/shmr2")) == sha(more)
    for pid in chfs_pool.pids:
        os.kill(pid, 0)  # no server crashed along the way
    assert "SIGSEGV" not in chfs_pool.log(0) + chfs_pool.log(1)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2, "proto": "tcp"}, {"servers": 2, "proto": "shm"}],
                         indirect=True, ids=["tcp", "shm"])
def test_sigterm_stops_servers_promptly_and_cleanly(chfs_pool):
    # After traffic (connections, RMA, a client still running), SIGTERM ends chfsd quickly —
    # measured to process exit, not to the zombie's reaping by PID 1 — and an shm server
    # leaves nothing in /dev/shm.
    put(chfs_pool, "/busy", rand(1 << 20, 5))
    writer = subprocess.Popen(["chfs-io", "writeloop", "/loop", "20"], env=chfs_pool.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        names = [a.split("://", 1)[1] for a in chfs_pool.addrs]
        for i, pid in enumerate(list(chfs_pool.pids)):
            t0 = time.monotonic()
            os.kill(pid, signal.SIGTERM)
            assert wait_gone(pid, 10), f"server {i} still running 10 s after SIGTERM"
            took = time.monotonic() - t0
            chfs_pool.pids[i] = None
            # Target < 0.3 s (typically a few ms); the bound leaves room for a loaded machine.
            assert took < 1.5, f"server {i} took {took:.2f} s to stop"
            assert "shutting down" in chfs_pool.log(i)
    finally:
        writer.kill()
        writer.wait()
    if chfs_pool.proto == "shm":
        left = [f for f in os.listdir("/dev/shm") if any(n in f for n in names)]
        assert left == [], f"left in /dev/shm: {left}"

