"""The persistent backend (chfsd -b DIR): a path CHFS does not have is read through from
DIR/path — lookups, reads chunk by chunk on the servers owning the chunks, readdir merged with
CHFS's entries — confined beneath DIR."""
import glob
import os
import random
import signal
import subprocess
import time

import pytest

import poolstatus

from chfsutil import err_name, get, io, put, sha, stat

CHUNK = 65536


def make_tree(root, nfiles=200, seed=7):
    """nfiles files of 0..300 KB over a few nested directories; returns {relpath: sha256}."""
    rnd = random.Random(seed)
    want = {}
    for i in range(nfiles):
        d = "/".join(f"d{rnd.randrange(4)}" for _ in range(rnd.randrange(3)))
        rel = os.path.join(d, f"f{i:04d}.bin") if d else f"f{i:04d}.bin"
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        data = rnd.randbytes(rnd.choice([0, 1, 100, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 300_000]))
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        want[rel] = sha(data)
    return want


def tree_shas(root):
    out = {}
    for dp, _, files in os.walk(root):
        for fn in files:
            p = os.path.join(dp, fn)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = sha(f.read())
    return out


def pool_with_backend(tmp_path, args=(), **kw):
    """A pool caching tmp_path/backend (chfsd -b, plus args), settled: its servers joined one
    by one, and a join's rebalance flushes a dirty chunk before handing it over — a test that
    wrote while the pool still settled found its data on the backend before any sync."""
    from ci.testlib.chfs_pool import ChfsPool
    backend = tmp_path / "backend"
    backend.mkdir(exist_ok=True)
    pool = ChfsPool(tmp=str(tmp_path / "pool"), chfsd_args=["-b", str(backend), *args], **kw)
    try:
        poolstatus.wait_settled(pool.env, pool.n)
    except BaseException:
        pool.stop()
        raise
    return pool, str(backend)


@pytest.fixture
def bk_pool(tmp_path):
    pool, backend = pool_with_backend(tmp_path)
    pool.backend = backend
    try:
        yield pool
    finally:
        pool.stop()


@pytest.mark.timeout(420)
def test_a_1000_file_tree_read_through_chfs_equals_the_backend(bk_pool, tmp_path):
    """Issue 12's read-through test: 1,000 files (0 B to 300 KB, about 63 MB, in nested
    directories) read through the 4-server pool, every file's SHA-256 compared; the copy is
    bounded (chcp killed after 360 s)."""
    assert bk_pool.n >= 2
    want = make_tree(bk_pool.backend, nfiles=1000)
    out = tmp_path / "copy"
    bk_pool.run(["chcp", "-r", "chfs:/", str(out)], timeout=360)
    assert len(want) == 1000 and tree_shas(out) == want
    # A second read is served from CHFS: the same bytes, no second fetch needed.
    some = sorted(want)[:20]
    for rel in some:
        assert sha(get(bk_pool, "/" + rel)) == want[rel]


@pytest.mark.timeout(60)
def test_stat_of_a_backend_file_and_directory(bk_pool):
    os.makedirs(f"{bk_pool.backend}/dir/sub")
    with open(f"{bk_pool.backend}/dir/sub/x", "wb") as f:
        f.write(b"y" * 12345)
    mode, size = stat(bk_pool, "/dir/sub/x")
    assert (mode & 0o170000) == 0o100000 and size == 12345
    mode, _ = stat(bk_pool, "/dir/sub")
    assert (mode & 0o170000) == 0o040000
    assert err_name(io(bk_pool, "stat", "/dir/nothing", check=False)) == "ENOENT"


@pytest.mark.timeout(60)
def test_each_server_fetches_only_the_chunks_it_owns(bk_pool):
    data = random.Random(1).randbytes(64 * CHUNK)  # 64 chunks over 4 servers
    with open(f"{bk_pool.backend}/big", "wb") as f:
        f.write(data)
    assert get(bk_pool, "/big") == data
    held = []
    for d in bk_pool.dirs:
        n = 0
        for p in glob.glob(f"{d}/data/*"):
            if p.endswith(".t"):
                continue
            n += os.stat(p).st_blocks * 512
        held.append(n)
    assert sum(held) >= len(data) and sum(held) <= len(data) + 4 * 4096 * 4, held
    # A member's share of the ring spreads ~1/sqrt(64 vnodes) (max/mean ~1.5, placement.h) and
    # 64 chunks add binomial noise: half the file on one of 4 servers happens (CI 13c: 2052 of
    # 4096 KiB). Each chunk fetched once (the sum) on 3 or more servers is the property.
    assert max(held) < len(data) * 3 // 4, f"one server fetched most of the file: {held}"
    assert sum(1 for h in held if h) >= 3, held


@pytest.mark.timeout(60)
def test_readdir_merges_backend_and_chfs_entries_once(bk_pool):
    os.makedirs(f"{bk_pool.backend}/m")
    names = {f"b{i:03d}" for i in range(150)}
    for n in names:
        open(f"{bk_pool.backend}/m/{n}", "wb").close()
    os.makedirs(f"{bk_pool.backend}/m/subdir")
    io(bk_pool, "stat", "/m/b007")                  # made a CHFS entry by the lookup
    put(bk_pool, "/m/b010", b"new")                 # overwritten in CHFS
    put(bk_pool, "/m/chfs-only", b"c")              # exists only in CHFS
    listed = io(bk_pool, "ls", "/m").stdout.decode().split()
    assert sorted(listed) == sorted(names | {"subdir", "chfs-only"})
    assert len(listed) == len(set(listed))


@pytest.mark.timeout(60)
def test_writes_and_truncates_of_a_backend_file_keep_the_unfetched_bytes_right(bk_pool):
    data = random.Random(2).randbytes(5 * CHUNK + 100)
    with open(f"{bk_pool.backend}/w", "wb") as f:
        f.write(data)
    put(bk_pool, "/w", b"XYZ", off=CHUNK + 10, create=False)   # inside an unfetched chunk
    want = bytearray(data)
    want[CHUNK + 10:CHUNK + 13] = b"XYZ"
    assert get(bk_pool, "/w") == bytes(want)
    io(bk_pool, "truncate", "/w", 2 * CHUNK + 5)                   # cut inside chunk 2
    io(bk_pool, "truncate", "/w", 5 * CHUNK)                       # extend again: zeros
    want = bytes(want[:2 * CHUNK + 5]) + bytes(5 * CHUNK - (2 * CHUNK + 5))
    assert get(bk_pool, "/w") == want


@pytest.mark.timeout(60)
def test_create_with_o_trunc_of_a_backend_file_truncates_the_chfs_copy(bk_pool):
    with open(f"{bk_pool.backend}/keep", "wb") as f:
        f.write(b"backend bytes" * 10000)
    put(bk_pool, "/keep", b"B", off=0, create=True)   # chfs_create(O_TRUNC): the backend file
    assert get(bk_pool, "/keep") == b"B"              # is found (EEXIST), opened, truncated
    assert stat(bk_pool, "/keep")[1] == 1
    put(bk_pool, "/keep", b"C", off=0, create=False)  # an open without O_CREAT opens it too
    assert get(bk_pool, "/keep") == b"C"


@pytest.mark.timeout(60)
def test_nothing_outside_the_backend_directory_is_reachable(bk_pool, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"do not read")
    os.symlink(str(outside), f"{bk_pool.backend}/abs")        # absolute: leaves the backend
    os.symlink("../outside", f"{bk_pool.backend}/rel")        # relative: leaves it too
    os.makedirs(f"{bk_pool.backend}/in")
    (tmp_path / "backend" / "in" / "ok").write_bytes(b"fine")
    os.symlink("in", f"{bk_pool.backend}/inlink")             # stays inside: works
    for p in ("/abs/secret", "/rel/secret", "/../outside/secret"):
        r = io(bk_pool, "get", p, check=False)
        assert r.returncode != 0 and b"do not read" not in r.stdout, p
    assert get(bk_pool, "/inlink/ok") == b"fine"


@pytest.mark.timeout(90)
def test_a_restarted_server_does_not_fetch_over_written_chunks(bk_pool):
    data = random.Random(3).randbytes(8 * CHUNK)
    with open(f"{bk_pool.backend}/r", "wb") as f:
        f.write(data)
    new = b"w" * (8 * CHUNK)
    put(bk_pool, "/r", new, off=0, create=False)
    for i in range(len(bk_pool.dirs)):
        bk_pool.restart(i)
    assert get(bk_pool, "/r") == new


@pytest.mark.timeout(120)
def test_backend_chunks_written_in_chfs_survive_a_rebalance(bk_pool):
    """A joining server takes chunks from their previous owners: a chunk written in CHFS must
    move (and stay held there, never fetched over); a chunk never fetched is fetched by its new
    owner."""
    data = random.Random(4).randbytes(32 * CHUNK)
    with open(f"{bk_pool.backend}/reb", "wb") as f:
        f.write(data)
    want = bytearray(data)
    for i in range(0, 32, 2):                          # every other chunk changed in CHFS
        put(bk_pool, "/reb", b"#" * 100, off=i * CHUNK + 7, create=False)
        want[i * CHUNK + 7:i * CHUNK + 107] = b"#" * 100
    bk_pool.add()
    bk_pool.add()
    assert get(bk_pool, "/reb") == bytes(want)


def held_bytes(pool):
    """Bytes each server holds in its backing files (allocated blocks)."""
    out = []
    for d in pool.dirs:
        out.append(sum(os.stat(p).st_blocks * 512 for p in glob.glob(f"{d}/data/*")
                       if not p.endswith(".t")))
    return out


def held_maps(srv):
    """File ids a server keeps a held-map for: a map file in bcache/, or the xattr of the backing
    file (server/bcache_map.c)."""
    ids = set(os.listdir(os.path.join(srv, "bcache")))
    for p in glob.glob(f"{srv}/data/*"):
        try:
            if "user.chfs.held" in os.listxattr(p):
                ids.add(os.path.basename(p))
        except OSError:
            pass
    return ids


def overwrite_backend(root):
    """Replace every backend file's bytes: what CHFS serves afterwards must be what it staged."""
    for dp, _, files in os.walk(root):
        for fn in files:
            p = os.path.join(dp, fn)
            n = os.path.getsize(p)
            with open(p, "wb") as f:
                f.write(b"\0" * n)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("ranks", [0, 2, 4])
def test_find_xargs_chstagein_stages_every_file_then_reads_need_no_backend(bk_pool, ranks):
    """0: threads in one process; 2, 4: MPI ranks under mpiexec, each staging its share."""
    want = make_tree(bk_pool.backend, nfiles=120, seed=ranks)
    env = dict(bk_pool.env, CHFS_BACKEND_PATH=bk_pool.backend)
    find = subprocess.run(["find", "."], cwd=bk_pool.backend, capture_output=True, text=True,
                          check=True).stdout
    cmd = ["xargs", "chstagein"] if not ranks else \
        ["xargs", "mpiexec", "-launcher", "fork", "-n", str(ranks), "chstagein"]
    subprocess.run(cmd, input=find, cwd=bk_pool.backend, env=env, check=True, timeout=150,
                   capture_output=True, text=True, start_new_session=True)
    total = sum(os.path.getsize(os.path.join(bk_pool.backend, r)) for r in want)
    held = held_bytes(bk_pool)
    assert sum(held) >= total, held                     # everything is in CHFS now
    overwrite_backend(bk_pool.backend)
    out = os.path.join(bk_pool.tmp, "copy")
    bk_pool.run(["chcp", "-r", "chfs:/", out], timeout=120)
    assert tree_shas(out) == want


@pytest.mark.timeout(60)
def test_stagein_fetches_each_chunk_on_its_owner_only(bk_pool):
    data = random.Random(5).randbytes(64 * CHUNK)
    with open(f"{bk_pool.backend}/s", "wb") as f:
        f.write(data)
    io(bk_pool, "stagein", "/s")
    held = held_bytes(bk_pool)
    assert len(data) <= sum(held) <= len(data) + 64 * 4096, held   # each chunk once
    assert max(held) < len(data) // 2 and sum(1 for h in held if h) >= 3, held
    io(bk_pool, "stagein", "/s")                                    # again: nothing new
    assert held_bytes(bk_pool) == held
    overwrite_backend(bk_pool.backend)
    assert get(bk_pool, "/s") == data


@pytest.mark.timeout(60)
def test_chstagein_stages_in_4_mib_chunks_unless_told_otherwise(bk_pool):
    """Without -c or CHFS_CHUNK_SIZE a staged file has 4 MiB chunks (libchfs's 64 KiB made every
    server create a backing file for every staged file and stage-ins 1.7-3x slower): a 9 MiB file
    is held as chunks of 4, 4 and 1 MiB on at most three servers. CHFS_CHUNK_SIZE still rules
    when set: 64 KiB chunks of another 9 MiB file reach every server."""
    M = 1 << 20
    for name in ("d", "e"):
        with open(f"{bk_pool.backend}/{name}", "wb") as f:
            f.write(random.Random(name).randbytes(9 * M))
    env = dict(bk_pool.env, CHFS_BACKEND_PATH=bk_pool.backend)
    env.pop("CHFS_CHUNK_SIZE", None)
    subprocess.run(["chstagein", f"{bk_pool.backend}/d"], env=env, check=True, timeout=60,
                   capture_output=True)
    held = held_bytes(bk_pool)  # (allocated blocks: a server may add one for the held-map xattr)
    sums = (0, M, 4 * M, 5 * M, 8 * M, 9 * M)
    assert all(any(0 <= h - v <= 4096 for v in sums) for h in held), held
    assert sum(1 for h in held if h) <= 3, held
    subprocess.run(["chstagein", f"{bk_pool.backend}/e"], env=dict(env, CHFS_CHUNK_SIZE="64K"),
                   check=True, timeout=60, capture_output=True)
    more = [b - a for a, b in zip(held, held_bytes(bk_pool))]
    assert all(m > 0 for m in more) and 9 * M <= sum(more) <= 9 * M + 4096 * len(more), more
    assert get(bk_pool, "/d") == random.Random("d").randbytes(9 * M)


@pytest.mark.timeout(60)
def test_chstagein_chunk_size_and_errors(bk_pool):
    data = random.Random(6).randbytes(3 << 20)
    with open(f"{bk_pool.backend}/c", "wb") as f:
        f.write(data)
    env = dict(bk_pool.env, CHFS_BACKEND_PATH=bk_pool.backend)
    subprocess.run(["chstagein", "-c", "1M", "-b", "256K", "-v", f"{bk_pool.backend}/c"], env=env,
                   check=True, timeout=60, capture_output=True)
    held = [h for h in held_bytes(bk_pool) if h]
    assert len(held) <= 3 and all(h % (1 << 20) == 0 for h in held), held   # 1 MiB chunks
    r = subprocess.run(["chstagein", f"{bk_pool.backend}/missing"], env=env, timeout=60,
                       capture_output=True, text=True)
    assert r.returncode == 1 and "missing" in r.stderr and "No such file" in r.stderr
    r = subprocess.run(["chstagein", "--help"], env=env, timeout=10, capture_output=True, text=True)
    assert r.returncode == 0 and "usage: chstagein" in r.stdout


@pytest.mark.timeout(60)
def test_chstagein_reaches_this_nodes_servers_without_libfabric(bk_pool):
    """chstagein reaches the servers of its node over their Unix sockets unless told not to
    (CHFS_XPRT_LOCAL, as chfs-run does): every process loading Debian's libfabric sleeps ~0.2 s
    in PSM constructors, 40 % of staging 1,000 x 1 MiB. The staged bytes are the backend's."""
    data = random.Random(8).randbytes(2 * CHUNK + 5)
    with open(f"{bk_pool.backend}/l", "wb") as f:
        f.write(data)
    env = {k: v for k, v in bk_pool.env.items() if k != "CHFS_XPRT_LOCAL"}
    env.update(CHFS_BACKEND_PATH=bk_pool.backend, LD_DEBUG="files")
    r = subprocess.run(["chstagein", f"{bk_pool.backend}/l"], env=env, timeout=60,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "libchfs" in r.stderr, "LD_DEBUG output does not list the objects loaded"
    assert "libfabric" not in r.stderr, "chstagein of an all-local pool loaded libfabric"
    ofi = subprocess.run(["chstagein", f"{bk_pool.backend}/l"], env=dict(env, CHFS_XPRT_LOCAL="0"),
                         timeout=60, capture_output=True, text=True)
    assert ofi.returncode == 0 and "libfabric" in ofi.stderr   # (the check can see it)
    overwrite_backend(bk_pool.backend)
    assert get(bk_pool, "/l") == data


@pytest.mark.timeout(120)
def test_a_server_killed_while_staging_serves_no_partly_staged_chunk(bk_pool):
    """kill -9 of a server in the middle of a stage-in (32 MiB chunks: it dies inside the copy
    of a chunk), then its restart: every byte CHFS serves is the backend's. A chunk is marked
    held only once fetched whole, so the one cut short is fetched again on the first read, not
    served with the zeros past where the copy stopped."""
    rnd = random.Random(9)
    data = b"".join(rnd.randbytes(1 << 20) for _ in range(256))
    with open(f"{bk_pool.backend}/big", "wb") as f:
        f.write(data)
    env = dict(bk_pool.env, CHFS_BACKEND_PATH=bk_pool.backend)
    stager = subprocess.Popen(["chstagein", "-c", "32M", f"{bk_pool.backend}/big"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        end = time.time() + 60
        while not any(held := held_bytes(bk_pool)) and stager.poll() is None and time.time() < end:
            time.sleep(0.002)
        victim = max(range(len(held)), key=lambda i: held[i])   # the first to start copying
        cut = held[victim]
        bk_pool.kill(victim, signal.SIGKILL)
    finally:
        stager.kill()
        stager.wait()
    assert 0 < cut, "the server held nothing when killed: the stage-in never started"
    bk_pool.restart(victim)
    assert sha(get(bk_pool, "/big")) == sha(data), f"killed holding {cut} bytes"


@pytest.mark.timeout(60)
def test_stagein_makes_held_maps_only_where_chunks_are_fetched(bk_pool):
    """A stage-in reaches every server with every file; a server owning none of a file's chunks
    must not make a held-map for it (an empty file in STORAGE/bcache: for a tree of one-chunk
    files, a useless file created on every server but one — where creating files is most of
    a small file's stage-in)."""
    names = [f"s{i}" for i in range(24)]
    for i, n in enumerate(names):
        with open(f"{bk_pool.backend}/{n}", "wb") as f:
            f.write(random.Random(i).randbytes(100 + i))
    lst = os.path.join(bk_pool.tmp, "small-list")
    with open(lst, "w") as f:
        f.write("\n".join(names) + "\n")
    env = dict(bk_pool.env, CHFS_BACKEND_PATH=bk_pool.backend)
    subprocess.run(["chstagein", "-f", lst], cwd=bk_pool.backend, env=env, check=True, timeout=60,
                   capture_output=True)
    io(bk_pool, "stagein", "/s0")                        # (and the one-file request)
    maps = [len(held_maps(d)) for d in bk_pool.dirs]
    assert sum(maps) == len(names), maps                 # one per file: at its chunk's owner
    overwrite_backend(bk_pool.backend)
    for i, n in enumerate(names):
        assert get(bk_pool, f"/{n}") == random.Random(i).randbytes(100 + i)


@pytest.mark.timeout(120)
def test_a_map_past_its_xattr_keeps_every_chunk_across_a_restart(bk_pool):
    """A held-map is an xattr of the backing file for its first 8,192 chunks and a map file for
    the rest (server/bcache_map.c): a file of 8,300 chunks of 4 KiB is staged, written in both
    parts, truncated, and every server restarted — it reads back as CHFS has it, the backend
    (overwritten meanwhile) never read again."""
    cs = 4096
    data = random.Random(12).randbytes(8300 * cs + 100)
    with open(f"{bk_pool.backend}/m", "wb") as f:
        f.write(data)
    env = dict(bk_pool.env, CHFS_BACKEND_PATH=bk_pool.backend)
    subprocess.run(["chstagein", "-c", str(cs), f"{bk_pool.backend}/m"], env=env, check=True,
                   timeout=60, capture_output=True)
    fid = {i for d in bk_pool.dirs for i in held_maps(d)}
    assert len(fid) == 1 and any(os.listdir(os.path.join(d, "bcache")) for d in bk_pool.dirs)
    want = bytearray(data)
    for off in (5 * cs + 3, 8250 * cs + 7):                # one in each store's part
        put(bk_pool, "/m", b"#" * 50, off=off, create=False)
        want[off:off + 50] = b"#" * 50
    io(bk_pool, "truncate", "/m", 8280 * cs)
    del want[8280 * cs:]
    overwrite_backend(bk_pool.backend)
    for i in range(len(bk_pool.dirs)):
        bk_pool.restart(i)
    assert sha(get(bk_pool, "/m")) == sha(bytes(want))


def requests_served(pool):
    return sum(st.get("requests", 0) for st in poolstatus.status(pool.env).values())


@pytest.mark.timeout(240)
@pytest.mark.parametrize("ranks", [1, 2])
def test_chstagein_f_list_batches_files_and_names_each_failure(bk_pool, ranks):
    """chstagein -f LIST stages 600 files (three batches of chfs_stagein_many's 256) in a few
    requests per server — one file took three (STAGE_ENTRY at its owner, STAGE_DATA at every
    server) — and a failure is the named file's alone: the missing and the unreadable files
    are reported, every other file (and a directory, the root, a file CHFS made itself) stages."""
    want = make_tree(bk_pool.backend, nfiles=600, seed=20 + ranks)
    put(bk_pool, "/own", b"made in CHFS")
    secret = os.path.join(bk_pool.backend, "secret.bin")
    with open(secret, "wb") as f:
        f.write(b"x" * 100)
    os.chmod(secret, 0)
    names = sorted(want) + ["missing.bin", "d0", ".", "/own", "secret.bin"]
    lst = os.path.join(bk_pool.tmp, "list")
    with open(lst, "w") as f:
        f.write("\n".join(names) + "\n")
    env = dict(bk_pool.env, CHFS_BACKEND_PATH=bk_pool.backend)
    before = requests_served(bk_pool)
    cmd = ["chstagein", "-f", lst]
    if ranks > 1:
        cmd = ["mpiexec", "-launcher", "fork", "-n", str(ranks)] + cmd
    r = subprocess.run(cmd, cwd=bk_pool.backend, env=env, timeout=180, capture_output=True,
                       text=True, start_new_session=True)
    used = requests_served(bk_pool) - before
    errs = sorted(line for line in r.stderr.splitlines() if line.startswith("chstagein:"))
    unreadable = os.geteuid() != 0   # (root reads a mode-0 file)
    assert r.returncode == 1, r.stderr
    assert errs[0] == "chstagein: missing.bin: No such file or directory", errs
    assert len(errs) == 1 + unreadable and (not unreadable or "secret.bin" in errs[1]), errs
    # One by one: 1 + servers requests per file (3,025 with 4 servers); batched, each rank's
    # -j 4 threads send ~16 batches, each 2 requests per server (~180 with one rank, ~310
    # with two).
    assert used < len(names), used
    total = sum(os.path.getsize(os.path.join(bk_pool.backend, p)) for p in want)
    assert sum(held_bytes(bk_pool)) >= total
    overwrite_backend(bk_pool.backend)
    for p in ["secret.bin", "missing.bin"]:
        if os.path.exists(os.path.join(bk_pool.backend, p)):
            os.chmod(os.path.join(bk_pool.backend, p), 0o600)
            os.unlink(os.path.join(bk_pool.backend, p))
    out = os.path.join(bk_pool.tmp, "copy")
    bk_pool.run(["chcp", "-r", "chfs:/", out], timeout=120)
    got = tree_shas(out)
    assert {k: v for k, v in got.items() if k != "own" and k != "secret.bin"} == want
    assert get(bk_pool, "/own") == b"made in CHFS"


@pytest.mark.timeout(170)
def test_stagein_while_a_server_joins_serves_the_staged_bytes(tmp_path):
    """Issue 12's flaky `find | xargs chstagein`: a stage-in sent while a rebalance is open (a
    server joined) must not move a staged chunk away from the server that still owns it. Each
    server answering the stage-in used to take every chunk of the file from its previous owner,
    owned here or not; the owner's copy was then punched while its held-map still said held,
    and reads served zeros from it."""
    pool, backend = pool_with_backend(tmp_path, servers=2)
    try:
        want = make_tree(backend, nfiles=150, seed=12)
        paths = sorted(want)

        def stage():
            env = dict(pool.env, CHFS_BACKEND_PATH=backend)
            subprocess.run(["chstagein", *paths], cwd=backend, env=env, check=True, timeout=120,
                           capture_output=True, text=True)

        stage()          # every chunk held by its owner among 2 servers
        for _ in range(2):
            pool.add()   # one more joins: a rebalance window opens on every server
            stage()      # again, while the previous owners are still handing keys over
        overwrite_backend(backend)
        out = tmp_path / "copy"
        pool.run(["chcp", "-r", "chfs:/", str(out)], timeout=120)
        got = tree_shas(out)
        bad = sorted(r for r in want if got.get(r) != want[r])
        assert not bad, f"{len(bad)} of {len(want)} files read back wrong: {bad[:5]}"
    finally:
        pool.stop()
