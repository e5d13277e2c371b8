"""Kernel passthrough really engaged: the daemon's own counters prove that reads and writes of
a node-local file never reach it (and do when passthrough is off, or the file is hash-placed),
and what the kernel wrote into the backing file is what every other client sees."""
import hashlib
import mmap
import os
import subprocess
import time

from chfuse_util import tool

MIB = 1 << 20


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MIB), b""):
            h.update(block)
    return h.hexdigest()


def chfs_io(env, *args, **kw):
    return subprocess.run([tool("chfs-io"), *args], env=env, capture_output=True, timeout=120,
                          check=True, **kw).stdout


def chfs_stat(env, path):
    mode, size, nlink, mtime = chfs_io(env, "stat", path).decode().split()
    return int(size), int(mtime)


def dd(*args):
    subprocess.run(["dd", *args, "status=none"], check=True, timeout=300)


def local_env(pool):
    return dict(pool.env, CHFS_PLACEMENT="local")


def test_patched_libfuse_passthrough_bypasses_daemon(loopback_mount, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(4 * MIB) * 16  # 64 MiB
    (src / "f").write_bytes(data)
    m = loopback_mount(str(src))
    assert sha256_file(f"{m.path}/f") == hashlib.sha256(data).hexdigest()
    dd("if=/dev/zero", f"of={m.path}/g", "bs=1M", "count=64")
    stats = m.unmount()
    assert (src / "g").stat().st_size == 64 * MIB
    assert stats["passthrough_opens"] == 2
    assert stats["read_requests"] == 0 and stats["write_requests"] == 0, stats

    m = loopback_mount(str(src), "--nopassthrough")
    assert sha256_file(f"{m.path}/f") == hashlib.sha256(data).hexdigest()
    stats = m.unmount()
    assert stats["passthrough_opens"] == 0
    assert stats["read_requests"] > 0, stats


def test_local_file_io_bypasses_daemon(chfs_pool, chfuse_mount):
    env = local_env(chfs_pool)
    m = chfuse_mount(env)
    f = f"{m.path}/big"
    dd("if=/dev/urandom", f"of={f}", "bs=1M", "count=256")
    digest = sha256_file(f)
    dd(f"if={f}", "of=/dev/null", "bs=1M")
    assert os.stat(f).st_size == 256 * MIB
    stats = m.unmount()
    assert stats["passthrough_active"] == 1
    assert stats["passthrough_opens"] >= 3, stats
    assert stats["read_requests"] == 0, stats
    assert stats["write_requests"] == 0, stats
    # Another client (libchfs directly) sees size and content the kernel wrote.
    assert chfs_stat(env, "/big")[0] == 256 * MIB
    assert hashlib.sha256(chfs_io(env, "get", "/big")).hexdigest() == digest


def test_nopassthrough_serves_io_in_daemon(chfs_pool, chfuse_mount):
    env = local_env(chfs_pool)
    m = chfuse_mount(env, "nopassthrough")
    f = f"{m.path}/big"
    dd("if=/dev/urandom", f"of={f}", "bs=1M", "count=256")
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
    digest = sha256_file(f)
    stats = m.unmount()
    assert stats["passthrough_opens"] == 0
    assert stats["local_opens_without_passthrough"] >= 2, stats
    assert stats["write_requests"] >= 256 * MIB // (1 << 20), stats  # <= 1 MiB per request
    assert stats["read_requests"] > 0, stats
    assert stats["write_bytes"] == 256 * MIB
    assert hashlib.sha256(chfs_io(env, "get", "/big")).hexdigest() == digest


def test_hash_placed_file_goes_through_daemon(chfs_pool, chfuse_mount):
    m = chfuse_mount(chfs_pool.env)  # default placement: chunks hashed over 4 servers
    f = f"{m.path}/striped"
    dd("if=/dev/urandom", f"of={f}", "bs=1M", "count=8")
    digest = sha256_file(f)
    stats = m.unmount()
    assert stats["passthrough_opens"] == 0
    assert stats["write_requests"] > 0 and stats["read_requests"] > 0, stats
    assert hashlib.sha256(chfs_io(chfs_pool.env, "get", "/striped")).hexdigest() == digest


def test_size_and_mtime_follow_passthrough_writes(chfs_pool, chfuse_mount):
    env = local_env(chfs_pool)
    m = chfuse_mount(env)
    f = f"{m.path}/grow"
    with open(f, "wb") as out:
        out.write(b"a" * 1000)
    size0, mtime0 = chfs_stat(env, "/grow")
    assert size0 == 1000
    time.sleep(1.1)
    with open(f, "ab") as out:  # append through passthrough, file still open
        out.write(b"b" * 500)
        out.flush()
        assert chfs_stat(env, "/grow")[0] == 1500
    size1, mtime1 = chfs_stat(env, "/grow")
    assert size1 == 1500 and mtime1 > mtime0
    assert os.stat(f).st_size == 1500
    stats = m.unmount()
    assert stats["write_requests"] == 0 and stats["passthrough_opens"] >= 2, stats
    assert chfs_io(env, "get", "/grow") == b"a" * 1000 + b"b" * 500


def test_mmap_of_local_file_uses_backing_file(chfs_pool, chfuse_mount):
    env = local_env(chfs_pool)
    m = chfuse_mount(env)
    f = f"{m.path}/mapped"
    with open(f, "wb") as out:
        out.truncate(2 * MIB)
    with open(f, "r+b") as fh:
        with mmap.mmap(fh.fileno(), 2 * MIB) as mm:
            mm[MIB:MIB + 5] = b"hello"
            mm.flush()
    stats = m.unmount()
    assert stats["read_requests"] == 0 and stats["write_requests"] == 0, stats
    assert chfs_io(env, "get", "/mapped", str(MIB), "5") == b"hello"


def test_size_visible_to_other_client_right_after_close(chfs_pool, chfuse_mount):
    # Hash placement: the daemon writes through libchfs; close(2) (FUSE FLUSH) reports the size,
    # without waiting for the asynchronous RELEASE.
    m = chfuse_mount(chfs_pool.env)
    for i in range(5):
        with open(f"{m.path}/c{i}", "wb") as out:
            out.write(os.urandom(3 * MIB + i))
        assert chfs_stat(chfs_pool.env, f"/c{i}")[0] == 3 * MIB + i
    m.unmount()


def test_o_local_creates_node_local_files(chfs_pool, chfuse_mount):
    m = chfuse_mount(chfs_pool.env, "local")  # no CHFS_PLACEMENT: the option alone decides
    dd("if=/dev/urandom", f"of={m.path}/viaopt", "bs=1M", "count=4")
    stats = m.unmount()
    assert stats["passthrough_opens"] == 1 and stats["write_requests"] == 0, stats
    assert chfs_io(chfs_pool.env, "localpath", "/viaopt").strip()
