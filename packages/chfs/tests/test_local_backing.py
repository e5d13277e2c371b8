"""Node-local (local-placement) files whose backing file other access paths use directly (FUSE
passthrough, the hook's fast path): metadata operations must keep that backing file exact —
an extending truncate extends it, and an explicit utimens is not overridden by the backing
file's own mtime (tar and cp -p set times right after writing)."""
import os
import time

import pytest

from chfsutil import get, io, put, stat

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool


def backing(pool, path):
    p = io(pool, "localpath", path).stdout.decode().strip()
    assert any(p.startswith(d) for d in pool.dirs), p
    return p


@pytest.mark.timeout(60)
def test_extending_truncate_extends_the_backing_file(chfs_pool):
    io(chfs_pool, "create", "/grow", 0, "local")
    put(chfs_pool, "/grow", b"q" * 1000, create=False)
    io(chfs_pool, "truncate", "/grow", 200000)
    path = backing(chfs_pool, "/grow")
    assert os.path.getsize(path) == 200000          # a direct reader sees the whole file
    with open(path, "rb") as f:
        assert f.read() == b"q" * 1000 + bytes(199000)
    assert stat(chfs_pool, "/grow")[1] == 200000
    io(chfs_pool, "truncate", "/grow", 10)
    assert os.path.getsize(path) == 10 and get(chfs_pool, "/grow") == b"q" * 10


@pytest.mark.timeout(60)
def test_utimens_sticks_on_a_local_file_until_its_data_changes(chfs_pool):
    io(chfs_pool, "create", "/times", 0, "local")
    put(chfs_pool, "/times", b"data", create=False)
    io(chfs_pool, "utime", "/times", 1000000000)     # what tar does after writing
    mtime = lambda: int(io(chfs_pool, "stat", "/times").stdout.split()[3])
    assert mtime() == 1000000000
    # The rule compares the backing file's mtime, stamped from the kernel's clock tick, with the
    # time of the utimens: a write within the same tick (4 ms at HZ=250) is not told from one
    # before it, as Linux keeps one mtime for writes within a tick (handlers.c merge_backing).
    time.sleep(0.02)  # past the tick of the utimens (up to 10 ms at HZ=100)
    with open(backing(chfs_pool, "/times"), "r+b") as f:   # a later direct write
        f.write(b"DATA")
    assert mtime() > 1000000000
    assert get(chfs_pool, "/times") == b"DATA"


@pytest.mark.timeout(60)
def test_utimens_right_after_writing_through_an_open_descriptor_sticks(chfs_pool, tmp_path):
    """The writer's pending size report must not override the times it sets next (cp -p)."""
    prog = tmp_path / "wu.c"
    prog.write_text(r'''
#include <chfs.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
int main(void) {
    if (chfs_init(NULL) < 0) return 2;
    int fd = chfs_create("/wu", O_WRONLY, 0644);
    if (fd < 0 || chfs_write(fd, "abc", 3) != 3) return 3;
    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    if (chfs_utimens("/wu", ts) < 0) return 4;
    struct stat st;
    if (chfs_fstat(fd, &st) < 0 || chfs_close(fd) < 0) return 5;
    printf("%lld %lld\n", (long long)st.st_mtim.tv_sec, (long long)st.st_size);
    chfs_term();
    return 0;
}
''')
    import subprocess
    cflags = subprocess.run(["pkg-config", "--cflags", "--libs", "chfs"], capture_output=True,
                            text=True, check=True).stdout.split()
    prefix = os.environ["CHFS_STACK_PREFIX"]
    # Against a sanitizer build (ci/test --asan/--tsan) the program must carry the runtime too.
    san = (["-fsanitize=address,undefined"] if "asan" in prefix else
           ["-fsanitize=thread"] if "tsan" in prefix else [])
    subprocess.run(["cc", "-o", str(tmp_path / "wu"), str(prog), *san, *cflags,
                    "-Wl,-rpath," + prefix + "/lib"], check=True)
    out = subprocess.run([str(tmp_path / "wu")], env=chfs_pool.env, capture_output=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b"1000000000", b"3"]
    assert int(io(chfs_pool, "stat", "/wu").stdout.split()[3]) == 1000000000


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_hash_placed_file_on_a_one_server_pool_offers_no_backing_file(chfs_pool):
    """Its size lives only in the metadata, so a direct writer would go unseen: ENXIO."""
    put(chfs_pool, "/h1", b"x" * 100)
    r = io(chfs_pool, "localpath", "/h1", check=False)
    assert r.returncode != 0 and b"ENXIO" in r.stderr
