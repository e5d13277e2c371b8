"""Unmodified programs on a chfuse mount: coreutils, tar, python3, concurrent writers; and the
errno of each namespace error exactly as on a local file system."""
import errno
import hashlib
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from chfuse_util import tool


def sh(script, cwd, timeout=120):
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"{script}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r.stdout


@pytest.mark.parametrize("placement", ["hash", "local"])
def test_coreutils_and_tar(chfs_pool, chfuse_mount, tmp_path, placement):
    m = chfuse_mount(dict(chfs_pool.env, CHFS_PLACEMENT=placement))
    src = tmp_path / "src"
    (src / "sub" / "deep").mkdir(parents=True)
    for i in range(20):
        (src / "sub" / f"f{i}.txt").write_text(f"line {i}\n" * (i * 50 + 1))
    (src / "sub" / "deep" / "bin.dat").write_bytes(os.urandom(300_000))
    out = sh(f"""
        mkdir -p a/b/c
        cp -r {src}/sub a/b/c/
        diff -r {src}/sub a/b/c/sub
        ls -l a/b/c/sub | grep -c 'f[0-9]*.txt'
        cat a/b/c/sub/f3.txt | wc -l
        sha256sum a/b/c/sub/deep/bin.dat | cut -d' ' -f1
        mv a/b/c/sub a/moved
        test ! -e a/b/c/sub
        find a -type f | wc -l
        ln -s moved/f1.txt a/link
        readlink a/link
        cat a/link
        dd if=/dev/urandom of=blob bs=1M count=5 status=none
        cp blob {tmp_path}/blob.out
        cmp blob {tmp_path}/blob.out
        truncate -s 123 blob && stat -c %s blob
        chmod 640 blob && stat -c %a blob
        touch -d '2021-02-03 04:05:06' blob && stat -c %Y blob
        tar -C a -cf {tmp_path}/a.tar moved
        mkdir x && tar -C x --no-same-owner -xf {tmp_path}/a.tar
        diff -r {src}/sub x/moved
        tar -cf archive.tar a && tar -tf archive.tar | wc -l
        rm -r a x
        ls
    """, cwd=m.path)
    lines = out.split()
    assert lines[0] == "20"
    assert lines[1] == "151"
    assert lines[2] == hashlib.sha256((src / "sub" / "deep" / "bin.dat").read_bytes()).hexdigest()
    assert lines[3] == "21"
    assert lines[4] == "moved/f1.txt"
    assert "123" in lines and "640" in lines and "1612325106" in lines
    assert lines[-2:] == ["archive.tar", "blob"]
    m.unmount()


def test_python_walk_and_copytree(chfs_pool, chfuse_mount, tmp_path):
    m = chfuse_mount(chfs_pool.env)
    script = textwrap.dedent("""
        import os, shutil, sys
        root = sys.argv[1]
        os.makedirs(f"{root}/t/a/b")
        for i in range(10):
            with open(f"{root}/t/a/b/n{i}", "w") as f:
                f.write(str(i) * 1000)
        shutil.copytree(f"{root}/t", f"{root}/u")
        names = sorted(n for _, _, fs in os.walk(f"{root}/u") for n in fs)
        total = sum(os.path.getsize(f"{root}/u/a/b/{n}") for n in names)
        with open(f"{root}/u/a/b/n3", "r+") as f:
            f.seek(10); f.write("X")
        os.rename(f"{root}/u/a/b/n3", f"{root}/u/n3")
        shutil.rmtree(f"{root}/t")
        print(len(names), total, open(f"{root}/u/n3").read(12), sorted(os.listdir(root)))
    """)
    r = subprocess.run([sys.executable, "-c", script, m.path], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split(None, 3)[:3] == ["10", "10000", "3333333333X3"]
    assert r.stdout.strip().endswith("['u']")
    m.unmount()


def test_two_writers_at_once(chfs_pool, chfuse_mount):
    m = chfuse_mount(dict(chfs_pool.env, CHFS_PLACEMENT="local"))
    procs = [subprocess.Popen(["dd", f"if=/dev/urandom", f"of={m.path}/w{i}", "bs=64k",
                               "count=800", "status=none"]) for i in range(2)]
    procs += [subprocess.Popen([sys.executable, "-c",
                                "import sys\nwith open(sys.argv[1],'wb') as f:\n"
                                " [f.write(bytes([i % 251]) * 65536) for i in range(400)]",
                                f"{m.path}/p"])]
    for p in procs:
        assert p.wait(timeout=120) == 0
    assert os.path.getsize(f"{m.path}/w0") == os.path.getsize(f"{m.path}/w1") == 800 * 65536
    with open(f"{m.path}/p", "rb") as f:
        data = f.read()
    assert data == b"".join(bytes([i % 251]) * 65536 for i in range(400))
    env = dict(chfs_pool.env)
    for name in ("w0", "w1"):
        got = subprocess.run([tool("chfs-io"), "get", f"/{name}"], env=env, capture_output=True,
                             timeout=60, check=True).stdout
        with open(f"{m.path}/{name}", "rb") as f:
            assert f.read() == got
    m.unmount()


CREAT_WRITER = """
import os, sys
path, i = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
os.pwrite(fd, bytes([i + 1]) * 65536, i * 65536)
os.close(fd)
"""


def test_concurrent_o_creat_from_two_mounts_loses_no_byte(chfs_pool, chfuse_mount):
    """Two mounts (two nodes' daemons) open one new file with O_CREAT at once and write
    disjoint blocks. chfuse's create used to reset an existing file (no O_EXCL), wiping the
    block of a writer that got there first; libchfs's open-or-create-exclusive keeps it."""
    a = chfuse_mount(chfs_pool.env, name="a")
    b = chfuse_mount(chfs_pool.env, name="b")
    want = b"".join(bytes([i + 1]) * 65536 for i in range(4))
    bad = []
    for it in range(20):
        procs = [subprocess.Popen([sys.executable, "-c", CREAT_WRITER, f"{m.path}/c{it}", str(i)])
                 for i, m in enumerate([a, b, a, b])]
        assert all(p.wait(timeout=60) == 0 for p in procs)
        got = subprocess.run([tool("chfs-io"), "get", f"/c{it}"], env=chfs_pool.env,
                             capture_output=True, timeout=60, check=True).stdout
        if got != want:
            bad.append((it, len(got), sum(1 for k in range(0, len(want), 65536)
                                          if got[k:k + 65536] != want[k:k + 65536])))
    assert not bad, f"(iteration, size, blocks lost): {bad}"
    a.unmount()
    b.unmount()


def on_fd(path, flags, fn):
    fd = os.open(path, flags)
    try:
        return fn(fd)
    finally:
        os.close(fd)


def test_errors_match_local_file_system(chfs_pool, chfuse_mount):
    m = chfuse_mount(chfs_pool.env)
    p = m.path
    os.mkdir(f"{p}/d")
    with open(f"{p}/d/f", "w") as f:
        f.write("x")
    cases = [
        (errno.ENOENT, lambda: open(f"{p}/missing")),
        (errno.ENOENT, lambda: os.stat(f"{p}/no/such")),
        (errno.EEXIST, lambda: os.mkdir(f"{p}/d")),
        (errno.EEXIST, lambda: os.open(f"{p}/d/f", os.O_CREAT | os.O_EXCL | os.O_WRONLY)),
        (errno.ENOTEMPTY, lambda: os.rmdir(f"{p}/d")),
        (errno.EISDIR, lambda: open(f"{p}/d", "w")),
        (errno.ENOTDIR, lambda: os.listdir(f"{p}/d/f")),
        (errno.ENOTDIR, lambda: os.rmdir(f"{p}/d/f")),
        (errno.ENOENT, lambda: open(f"{p}/no/f", "w")),   # libchfs's create would make "no"
        # the kernel enforces access modes (libchfs descriptors, like upstream's, do not)
        (errno.EBADF, lambda: on_fd(f"{p}/d/f", os.O_WRONLY, lambda fd: os.read(fd, 1))),
        (errno.EBADF, lambda: on_fd(f"{p}/d/f", os.O_RDONLY, lambda fd: os.write(fd, b"y"))),
    ]
    os.chown(f"{p}/d/f", 12345, 12345)  # root changes owners (CHFS keeps them)
    assert (os.stat(f"{p}/d/f").st_uid, os.stat(f"{p}/d/f").st_gid) == (12345, 12345)
    for want, call in cases:
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == want, f"{call}: got {errno.errorcode.get(e.value.errno)}"
    shutil.rmtree(f"{p}/d")
    m.unmount()
