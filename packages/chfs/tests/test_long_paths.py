"""Names deeper than Linux's per-argument limit (issue 16 item 5).

Linux limits each path argument to 4,095 bytes, not the depth of a tree: a program reaches
deeper entries relative to a directory (openat, chdir). CHFS counted its bound from its root
(CHFS_PATH_MAX 4,096), so such entries were ENAMETOOLONG on the mount and under the hook even
with every argument short. The bound is now 16,383 bytes from the CHFS root; beyond it a clean
ENAMETOOLONG. With a backend (chfsd -b) a name must stay reachable there in one system call
(4,095 bytes): longer ones are refused at creation, so nothing is held that cannot be flushed.

The rebalance used to batch 128 names per HINT whatever their length: 128 names of 3 KB made a
request larger than the transport carries, and a join never settled ("did not take 128 keys").
"""
import os
import subprocess

import pytest

import poolstatus
from ci.testlib.fuse_mount import chfuse_mounted
from chfsutil import err_name, get, io, put

BOUND = 16383  # bytes of a CHFS path, counted from the root (its leading "/" not included)


def deep_dir(levels, width=120):
    """A canonical absolute CHFS directory of `levels` components of `width` bytes."""
    return "/" + "/".join(f"d{i:03d}" + "x" * (width - 4) for i in range(levels))


def test_deep_names_through_the_native_api(chfs_pool):
    pool = chfs_pool
    d = deep_dir(80)  # 9,680 bytes: beyond 4,095, within the bound
    assert 4095 < len(d) < BOUND
    put(pool, d + "/leaf", b"deep data")  # the parents are made implicitly (upstream's namespace)
    assert get(pool, d + "/leaf") == b"deep data"
    assert io(pool, "stat", d + "/leaf").stdout.split()[1] == b"9"
    io(pool, "rename", d + "/leaf", d + "/moved")
    assert io(pool, "ls", d).stdout.split() == [b"moved"]
    io(pool, "symlink", "moved", d + "/sl")
    assert io(pool, "readlink", d + "/sl").stdout.strip() == b"moved"
    assert get(pool, d + "/sl") == b"deep data"
    io(pool, "mkdir", d + "/sub")
    assert b"sub" in io(pool, "ls", d).stdout.split()
    for name in ("sl", "moved"):
        io(pool, "unlink", d + "/" + name)
    io(pool, "rmdir", d + "/sub")
    assert io(pool, "ls", d).stdout == b""

    # At the bound exactly, and one byte beyond it.
    top = deep_dir(135)  # 16,335 bytes
    last = "/" + "z" * (BOUND - len(top))
    assert len((top + last).lstrip("/")) == BOUND
    put(pool, top + last, b"at the bound")
    assert get(pool, top + last) == b"at the bound"
    r = io(pool, "put", top + last + "z", 0, "create", input=b"x", check=False)
    assert err_name(r) == "ENAMETOOLONG"
    r = io(pool, "mkdir", top + last + "z", check=False)
    assert err_name(r) == "ENAMETOOLONG"
    # A symlink's target keeps the kernel's bound (symlink(2) refuses longer ones).
    r = io(pool, "symlink", "t" * 4096, d + "/long-target", check=False)
    assert err_name(r) == "ENAMETOOLONG"
    assert io(pool, "symlink", "t" * 4095, d + "/long-target").returncode == 0
    assert io(pool, "readlink", d + "/long-target").stdout.strip() == b"t" * 4095


@pytest.mark.timeout(180)
@pytest.mark.parametrize("levels", [25, 80], ids=["3025-bytes", "9680-bytes"])
def test_a_join_hands_over_long_names(tmp_path, levels):
    """300 files in one deep directory, then a second server joins: the pool settles and every
    name is found. On the previous build the 3,025-byte case never settled (each HINT of 128
    names was ~390 KB, beyond the transport's 132 KiB) and the 9,680-byte names could not be
    made at all."""
    from ci.testlib.chfs_pool import ChfsPool
    pool = ChfsPool(servers=1, tmp=str(tmp_path / "pool"))
    try:
        d = deep_dir(levels)
        io(pool, "mkfiles", d, 300)
        e0 = poolstatus.epoch(pool.env)
        pool.add()
        poolstatus.wait_settled(pool.env, 2, after_epoch=e0, timeout=60)
        # A HINT the joiner refused because its member list was one push behind is retried
        # by design; what this test guards against is a transport or size refusal.
        refused = [l for l in pool.log(0).splitlines()
                   if "did not take" in l and "the member list changed" not in l]
        assert not refused, refused
        names = io(pool, "ls", d).stdout.split()
        assert sorted(names) == [f"f{i:06d}".encode() for i in range(300)]
        for i in range(0, 300, 13):
            assert io(pool, "stat", f"{d}/f{i:06d}").returncode == 0
        assert "took over every key" in pool.log(1), pool.log(1)
    finally:
        pool.stop()


@pytest.mark.timeout(120)
def test_deep_names_survive_a_restart(tmp_path):
    """The namespace journal (frames of up to CHFS_PATH_MAX) replays deep names."""
    from ci.testlib.chfs_pool import ChfsPool
    pool = ChfsPool(servers=2, tmp=str(tmp_path / "pool"))
    try:
        poolstatus.wait_settled(pool.env, 2)
        d = deep_dir(130)  # 15,730 bytes
        for i in range(20):
            put(pool, f"{d}/f{i}", f"file {i}".encode())
        for i in range(2):
            pool.restart(i)
        poolstatus.wait_settled(pool.env, 2)
        for i in range(20):
            assert get(pool, f"{d}/f{i}") == f"file {i}".encode()
    finally:
        pool.stop()


@pytest.mark.timeout(120)
def test_a_backend_refuses_names_it_cannot_reach(tmp_path):
    """With chfsd -b a name reaches the backend in one system call (4,095 bytes): a longer one
    is refused when it is made, not accepted and then never flushed."""
    from test_backend import pool_with_backend
    pool, backend = pool_with_backend(tmp_path, servers=2)
    try:
        ok = deep_dir(33)  # 3,993 bytes
        put(pool, ok + "/f", b"reaches the backend")
        io(pool, "sync")
        with open(backend + ok + "/f", "rb") as f:
            assert f.read() == b"reaches the backend"
        far = deep_dir(40)  # 4,840 bytes
        r = io(pool, "put", far + "/f", 0, "create", input=b"x", check=False)
        assert err_name(r) == "ENAMETOOLONG"
        # nothing of it in CHFS, and the backend is not asked beyond its bound either
        r = io(pool, "stat", far + "/f", check=False)
        assert err_name(r) == "ENAMETOOLONG"
        assert not os.path.exists(backend + ok + "/d033" + "x" * 116)
        io(pool, "sync")  # nothing failed to flush
    finally:
        pool.stop()


WALK = r"""
import errno, os, sys
top = sys.argv[1]
os.mkdir(os.path.join(top, "long"))
fd = os.open(os.path.join(top, "long"), os.O_RDONLY | os.O_DIRECTORY)
depth, stop = 4, "none"  # bytes of "long", then of each "/" + component
for i in range(140):
    comp = "d%03d" % i + "x" * 116
    try:
        os.mkdir(comp, dir_fd=fd)
    except OSError as e:
        stop = errno.errorcode[e.errno]
        break
    nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd, depth = nfd, depth + 121
w = os.open("leaf", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
os.write(w, b"deep")
os.close(w)
with os.fdopen(os.open("leaf", os.O_RDONLY, dir_fd=fd), "rb") as f:
    data = f.read().decode()
st = os.stat("leaf", dir_fd=fd)
print(depth, stop, data, st.st_size, sorted(os.listdir(fd)))
"""


def walk(base, env):
    r = subprocess.run(["/usr/bin/python3", "-c", WALK, base], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split(" ", 4)


@pytest.mark.timeout(180)
def test_walking_down_on_the_mount(chfs_pool, tmp_path):
    """openat/mkdirat one short name at a time, as on tmpfs, down to the bound: 135 levels
    (16,339 bytes from the CHFS root) work and read back; the 136th is ENAMETOOLONG, where tmpfs
    goes on (it has no bound)."""
    mnt = str(tmp_path / "mnt")
    with chfuse_mounted(chfs_pool.env, mnt):
        depth, stop, data, size, names = walk(mnt, chfs_pool.env)
    assert (int(depth), stop, data, size, names) == (4 + 135 * 121, "ENAMETOOLONG", "deep", "4",
                                                     "['leaf']\n")
    ref = tmp_path / "local"  # a local file system: no bound on depth
    ref.mkdir()
    depth, stop, data, _, _ = walk(str(ref), dict(os.environ))
    assert (int(depth), stop, data) == (4 + 140 * 121, "none", "deep")
