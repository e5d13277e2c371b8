"""chfsd's storage I/O engines (server/io_engine.c, bulk_io.c): the same data must come back
under --io=sync (pread/pwrite), --io=uring (libasyncsys on io_uring: the RMA of one piece
overlaps the file write of the previous one) and uring with io_uring refused (chfsd started
under ci/no-io-uring, a seccomp filter giving EPERM as kernel.io_uring_disabled=2 would:
libasyncsys's execution threads run the same requests). Each engine runs a data-integrity
round (inline and RMA transfers, many pieces, unaligned offsets, overwrites, holes, reads past
the end, concurrent clients), a kill -9 in the middle of a stream of writes followed by a
restart (every acknowledged write is there, the server goes on), and the backend copies (flush
to the backend, stage-in).

The machine-wide sysctl is never touched (others test on the same machine): the filter covers
chfsd's process only. Under `ci/test --no-io-uring` the whole run has io_uring refused, and
the plain uring engine must fall back too."""
import signal
import subprocess

import pytest

from chfsutil import get, io, put, rand, sha, stat
from ci.testlib import no_io_uring
from ci.testlib.chfs_pool import ChfsPool

CHUNK = 8 << 20  # a chunk holds many 1 MiB pieces: one RPC moves up to 8 MiB
ENGINES = ["sync", "uring", "uring-refused"]
FALLBACK_LINE = "storage I/O engine: uring (execution threads)"


def log_line(engine):
    if engine == "sync":
        return "storage I/O engine: sync"
    if engine == "uring-refused" or no_io_uring.expected():
        return FALLBACK_LINE
    return "storage I/O engine: uring\n"


def start_pool(engine, tmp_path, extra_args=()):
    """One chfsd (tcp) with the engine under test: --io=uring, CHFS_IO_ENGINE=sync (the
    environment variable path), or --io=uring started with io_uring refused."""
    args = ["-L", "info"] + (["--io=uring"] if engine != "sync" else []) + list(extra_args)
    env = {"CHFS_CHUNK_SIZE": str(CHUNK)} | ({"CHFS_IO_ENGINE": "sync"} if engine == "sync" else {})
    launcher = no_io_uring.launcher() if engine == "uring-refused" else []
    pool = ChfsPool(servers=1, tmp=str(tmp_path / "pool"), rpc_timeout_ms=2000,
                    extra_env=env, chfsd_args=args, launcher=launcher)
    pool.engine = engine
    pool.restart_with_engine = lambda: _restart(pool)
    if log_line(engine) not in pool.log(0):
        pool.stop()
        raise AssertionError(pool.log(0))
    return pool


@pytest.fixture(params=ENGINES)
def engine_pool(request, tmp_path):
    pool = start_pool(request.param, tmp_path)
    try:
        yield pool
    finally:
        pool.stop()


def _restart(pool):
    pool.restart(0)  # under the same launcher
    assert pool.log(0).count(log_line(pool.engine)) >= 2, pool.log(0)


@pytest.mark.timeout(180)
def test_data_round_trips_under_each_engine(engine_pool):
    p = engine_pool
    sizes = [1, 4095, 65536 + 3, 1 << 20, 3 * (1 << 20) + 17, CHUNK + (5 << 20) + 9]
    blobs = {f"/f{n}": rand(n, n) for n in sizes}
    for path, b in blobs.items():
        put(p, path, b)
    for path, b in blobs.items():
        assert sha(get(p, path)) == sha(b), path
    # Unaligned overwrite across pieces and a chunk boundary; ranged reads; past the end.
    big = bytearray(blobs[f"/f{sizes[-1]}"])
    patch = rand((2 << 20) + 333, 7)
    off = CHUNK - (1 << 20) - 5
    put(p, f"/f{sizes[-1]}", patch, off=off, create=False)
    big[off:off + len(patch)] = patch
    assert sha(get(p, f"/f{sizes[-1]}")) == sha(bytes(big))
    assert get(p, f"/f{sizes[-1]}", off - 100, 3 << 20) == bytes(big[off - 100:off - 100 + (3 << 20)])
    assert get(p, f"/f{sizes[-1]}", len(big) - 10, 1 << 20) == bytes(big[-10:])
    # A hole reads as zeros, also in the middle of an RMA-sized read.
    tail = rand(1 << 20, 9)
    put(p, "/sparse", tail, off=(3 << 20) + 7)
    assert get(p, "/sparse") == bytes((3 << 20) + 7) + tail
    # Concurrent clients: their requests meet in the server's queue (one submit for what is
    # queued together).
    d = p.tmp
    per = {k: rand((4 << 20) + k, 50 + k) for k in range(4)}
    for k, b in per.items():
        with open(f"{d}/blob{k}", "wb") as f:
            f.write(b)
    procs = [subprocess.Popen(["bash", "-c", f"for i in 0 1 2; do chfs-io put /c{k}.$i 0 create"
                               f" < {d}/blob{k} || exit 1; done"], env=p.env) for k in per]
    assert all(q.wait(timeout=120) == 0 for q in procs)
    readers = [subprocess.Popen(["chfs-io", "get", f"/c{k}.{i}"], env=p.env, stdout=subprocess.PIPE)
               for k in per for i in range(3)]
    for n, r in enumerate(readers):
        out, _ = r.communicate(timeout=120)
        assert r.returncode == 0 and sha(out) == sha(per[n // 3]), f"/c{n // 3}.{n % 3}"
    assert stat(p, "/c3.2")[1] == len(per[3])


@pytest.mark.timeout(180)
def test_kill_9_mid_write_and_restart_under_each_engine(engine_pool):
    p = engine_pool
    before = rand(CHUNK + (3 << 20) + 1, 1)
    put(p, "/before", before)
    d = p.tmp
    blobs = [rand((6 << 20) + 11 * k, 20 + k) for k in range(3)]
    for k, b in enumerate(blobs):
        with open(f"{d}/w{k}", "wb") as f:
            f.write(b)
    # Writes /w0, /w1, ... (6 MiB each, several pieces) and prints each index once acknowledged.
    writer = subprocess.Popen(
        ["bash", "-c", f"for i in $(seq 0 100000); do chfs-io put /w$i 0 create < {d}/w$((i % 3))"
                       " 2>/dev/null || exit 1; echo $i; done"],
        env=p.env, stdout=subprocess.PIPE, text=True)
    acked = []
    for line in writer.stdout:  # kill once a few writes are through, in the middle of the next
        acked.append(int(line))
        if len(acked) == 4:
            break
    p.kill(0, signal.SIGKILL)
    out, _ = writer.communicate(timeout=60)
    acked += [int(x) for x in out.split()]
    assert writer.returncode != 0, "the writer did not notice the server's death"
    p.restart_with_engine()
    for i in acked:
        assert sha(get(p, f"/w{i}")) == sha(blobs[i % 3]), f"/w{i} (acknowledged) changed"
    assert sha(get(p, "/before")) == sha(before)
    # The interrupted write: whatever of it landed, it is readable; then it is rewritten.
    nxt = acked[-1] + 1
    put(p, f"/w{nxt}", blobs[nxt % 3])
    assert sha(get(p, f"/w{nxt}")) == sha(blobs[nxt % 3])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("engine", ENGINES)
def test_flush_and_stage_in_through_each_engine(engine, tmp_path):
    """The backend copies (io_copy.c): chfs_sync flushes a written file to the backend (pread of
    piece k+1 beside the pwrite of piece k), chfs_stagein brings a backend file in (by
    copy_file_range where the file systems allow it, else by the same pipelined copy)."""
    backend = tmp_path / "backend"
    backend.mkdir()
    staged = rand((5 << 20) + 77, 3)
    (backend / "in.bin").write_bytes(staged)
    p = start_pool(engine, tmp_path, ["-b", str(backend), "-F", "0"])
    try:
        p.env["CHFS_BACKEND_PATH"] = str(backend)
        written = rand(CHUNK + (3 << 20) + 5, 4)
        put(p, "/out.bin", written)
        io(p, "sync")
        assert sha((backend / "out.bin").read_bytes()) == sha(written)
        io(p, "stagein", "/in.bin")
        (backend / "in.bin").write_bytes(bytes(len(staged)))  # served from CHFS from now on
        assert sha(get(p, "/in.bin")) == sha(staged)
    finally:
        p.stop()


def test_unknown_engine_is_refused(tmp_path, chfs_stack_env):
    r = subprocess.run(["chfsd", "-f", "-c", str(tmp_path / "s"), "--io=aio"], env=chfs_stack_env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "--io=aio: expected uring or sync" in r.stderr


def test_refused_io_uring_is_said_once(tmp_path):
    """chfsd under ci/no-io-uring: one warning naming the cause, then the fallback engine."""
    p = start_pool("uring-refused", tmp_path)
    try:
        log = p.log(0)
        assert log.count("io_uring unavailable") == 1, log
        assert log.count(FALLBACK_LINE) == 1, log
        put(p, "/x", b"abc")
        assert get(p, "/x") == b"abc"
    finally:
        p.stop()
