"""Names and attributes reach the backend (chfsd -b DIR): after chfs_sync the backend directory
shows what CHFS shows — a renamed file under its new name only, an unlinked file gone (and not
read back through before that), an rmdir'd directory gone, new directories and symlinks there,
modes and mtimes as set — also when the server that recorded the change was killed -9 and
restarted in between."""
import os
import random
import signal
import stat
import time

import pytest

from chfsutil import get, io, put

from test_backend_flush import backend_bytes, make_pool  # noqa: F401 (fixture)


def bk(pool, rel):
    return os.path.join(pool.backend, rel)


@pytest.mark.timeout(60)
def test_a_renamed_file_is_on_the_backend_under_its_new_name_only(make_pool):
    pool = make_pool("-F", "0")
    data = random.Random(11).randbytes(300_000)
    put(pool, "/old", data)
    io(pool, "mkdir", "/d")
    io(pool, "rename", "/old", "/d/new")
    io(pool, "sync")
    assert backend_bytes(pool.backend, "d/new") == data
    assert not os.path.lexists(bk(pool, "old"))


@pytest.mark.timeout(60)
def test_renaming_a_flushed_file_moves_it_on_the_backend(make_pool):
    pool = make_pool("-F", "0")
    put(pool, "/a", b"first")
    io(pool, "sync")
    assert backend_bytes(pool.backend, "a") == b"first"
    io(pool, "rename", "/a", "/b")
    io(pool, "sync")
    assert backend_bytes(pool.backend, "b") == b"first"
    assert not os.path.lexists(bk(pool, "a"))


@pytest.mark.timeout(60)
def test_an_unlinked_backend_file_is_not_read_back_and_is_removed(make_pool):
    pool = make_pool("-F", "0")
    with open(bk(pool, "gone"), "wb") as f:
        f.write(b"in the backend")
    assert get(pool, "/gone") == b"in the backend"
    io(pool, "unlink", "/gone")
    # not read through again before the removal reaches the backend
    assert io(pool, "stat", "/gone", check=False).returncode != 0
    assert "gone" not in io(pool, "ls", "/").stdout.decode().split()
    io(pool, "sync")
    assert not os.path.lexists(bk(pool, "gone"))
    assert io(pool, "stat", "/gone", check=False).returncode != 0


@pytest.mark.timeout(60)
def test_directories_symlinks_modes_and_mtimes_reach_the_backend(make_pool):
    pool = make_pool("-F", "0")
    io(pool, "mkdir", "/dir")
    io(pool, "mkdir", "/dir/sub")
    io(pool, "mkdir", "/tmpdir")
    io(pool, "rmdir", "/tmpdir")
    io(pool, "symlink", "target/of/link", "/dir/ln")
    put(pool, "/dir/f", b"data")
    io(pool, "chmod", "/dir/f", "600")
    io(pool, "chmod", "/dir/sub", "700")
    io(pool, "utime", "/dir/f", "1000000000")
    io(pool, "sync")
    assert os.path.isdir(bk(pool, "dir/sub"))
    assert stat.S_IMODE(os.stat(bk(pool, "dir/sub")).st_mode) == 0o700
    assert not os.path.lexists(bk(pool, "tmpdir"))
    assert os.readlink(bk(pool, "dir/ln")) == "target/of/link"
    st = os.stat(bk(pool, "dir/f"))
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_mtime == 1000000000
    assert backend_bytes(pool.backend, "dir/f") == b"data"


@pytest.mark.timeout(60)
def test_an_rmdir_of_a_backend_directory_reaches_it(make_pool):
    pool = make_pool("-F", "0")
    os.mkdir(bk(pool, "bdir"))
    io(pool, "rmdir", "/bdir")
    io(pool, "sync")
    assert not os.path.lexists(bk(pool, "bdir"))


@pytest.mark.timeout(90)
def test_metadata_changes_survive_a_kill_and_restart(make_pool):
    pool = make_pool("-F", "0")
    with open(bk(pool, "u"), "wb") as f:
        f.write(b"backend file")
    put(pool, "/r", b"renamed")
    io(pool, "sync")
    io(pool, "unlink", "/u")
    io(pool, "rename", "/r", "/r2")
    io(pool, "mkdir", "/m")
    for i in range(pool.n):
        pool.kill(i, signal.SIGKILL)
    saved = list(pool.addrs)
    pool.addrs = [saved[0]] + [None] * (pool.n - 1)
    pool.restart(0)
    for i in range(1, pool.n):
        pool.addrs[i] = saved[i]
        pool.restart(i)
    assert io(pool, "stat", "/u", check=False).returncode != 0  # the tombstone survived too
    io(pool, "sync")
    assert not os.path.lexists(bk(pool, "u"))
    assert backend_bytes(pool.backend, "r2") == b"renamed"
    assert not os.path.lexists(bk(pool, "r"))
    assert os.path.isdir(bk(pool, "m"))


@pytest.mark.timeout(60)
def test_a_change_the_backend_refuses_is_named_by_chfs_sync(make_pool):
    pool = make_pool("-F", "0")
    os.mkdir(bk(pool, "ro"))
    with open(bk(pool, "ro/f"), "wb") as f:
        f.write(b"x")
    assert get(pool, "/ro/f") == b"x"
    io(pool, "unlink", "/ro/f")
    os.chmod(bk(pool, "ro"), 0o500)
    try:
        if os.geteuid() == 0:
            # root ignores modes: make the removal fail another way (a non-empty directory)
            os.chmod(bk(pool, "ro"), 0o700)
            os.remove(bk(pool, "ro/f"))
            os.mkdir(bk(pool, "ro/f"))
            open(bk(pool, "ro/f/keep"), "wb").close()
        r = io(pool, "sync", check=False)
        assert r.returncode != 0
        assert "ro/f" in r.stderr.decode()
        st = io(pool, "stat", "/ro/f", check=False)
        assert st.returncode != 0        # still gone in CHFS
    finally:
        os.chmod(bk(pool, "ro"), 0o700)


@pytest.mark.timeout(60)
def test_flush_threads_apply_removals_and_new_directories_without_a_sync(make_pool):
    from test_backend_flush import wait_for
    pool = make_pool("-F", "1", "-U", "1")
    with open(bk(pool, "old"), "wb") as f:
        f.write(b"backend")
    assert get(pool, "/old") == b"backend"
    io(pool, "unlink", "/old")
    io(pool, "mkdir", "/newdir")
    assert wait_for(lambda: not os.path.lexists(bk(pool, "old")), 15)
    assert wait_for(lambda: os.path.isdir(bk(pool, "newdir")), 15)
    # a renamed backend file: its old name does not come back meanwhile, on any server
    for i in range(8):
        with open(bk(pool, f"mv{i}"), "wb") as f:
            f.write(b"moved %d" % i)
        io(pool, "rename", f"/mv{i}", f"/moved{i}")
    time.sleep(2.5)
    for i in range(8):
        assert io(pool, "stat", f"/mv{i}", check=False).returncode != 0, i
        assert get(pool, f"/moved{i}") == b"moved %d" % i
    # a file's mode and mtime wait for its data, whatever the flush threads do meanwhile
    put(pool, "/w", b"written")
    io(pool, "utime", "/w", "1200000000")
    io(pool, "chmod", "/w", "640")
    io(pool, "sync")
    st = os.stat(bk(pool, "w"))
    assert (st.st_mtime, stat.S_IMODE(st.st_mode)) == (1200000000, 0o640)
    assert backend_bytes(pool.backend, "w") == b"written"


@pytest.mark.timeout(120)
def test_chfsctl_stop_puts_renamed_files_under_their_new_names(tmp_path):
    import re
    import subprocess
    from ci.testlib.chfs_pool import stack_env
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    backend = tmp_path / "backend"
    backend.mkdir()
    ctl = ["chfsctl", "-N", "3", "-c", str(tmp_path / "pool"), "-b", str(backend), "-F", "0"]
    try:
        out = subprocess.run(ctl + ["start"], env=env, capture_output=True, text=True, timeout=60,
                             check=True).stdout
        env["CHFS_SERVER"] = re.match(r'CHFS_SERVER="([^"]+)"', out).group(1)
        env["CHFS_IO_NOSYNC"] = "1"

        def run(*a, **kw):
            return subprocess.run(list(a), env=env, capture_output=True, timeout=60, check=True,
                                  **kw).stdout
        files = {f"f{i}": os.urandom(100_000 + i) for i in range(12)}
        for name, data in files.items():
            run("chfs-io", "put", "/" + name, "0", "create", input=data)
            run("chfs-io", "rename", "/" + name, "/renamed-" + name)
        run(*ctl, "stop")
        assert sorted(os.listdir(backend)) == sorted("renamed-" + n for n in files)
        for name, data in files.items():
            assert (backend / ("renamed-" + name)).read_bytes() == data
    finally:
        subprocess.run(ctl + ["clean"], env=env, timeout=60)


@pytest.mark.timeout(60)
def test_truncation_reaches_the_backend(make_pool):
    pool = make_pool("-F", "0")
    long = random.Random(12).randbytes(200_000)
    for name in ("t", "p", "w"):
        with open(bk(pool, name), "wb") as f:
            f.write(long)
    io(pool, "truncate", "/t", "10")                     # a backend file cut in CHFS
    put(pool, "/p", b"short")                            # rewritten with O_TRUNC
    put(pool, "/n", long)
    io(pool, "sync")
    io(pool, "truncate", "/n", "7")                      # a flushed file cut, then written again
    io(pool, "put", "/n", "3", input=b"XY")
    io(pool, "sync")
    assert backend_bytes(pool.backend, "t") == long[:10]
    assert backend_bytes(pool.backend, "p") == b"short"
    assert backend_bytes(pool.backend, "n") == long[:3] + b"XY" + long[5:7]
    assert backend_bytes(pool.backend, "w") == long      # untouched


@pytest.mark.timeout(60)
def test_a_file_written_after_its_rename_reached_the_backend_goes_to_the_new_name(make_pool):
    pool = make_pool("-F", "0")
    with open(bk(pool, "src"), "wb") as f:
        f.write(b"0123456789" * 20000)                      # 200,000 bytes, not read yet
    put(pool, "/a", b"first")
    io(pool, "sync")
    io(pool, "rename", "/a", "/b")
    io(pool, "rename", "/src", "/dst")
    io(pool, "sync")
    io(pool, "put", "/b", "5", input=b"+more")            # a later open: not the old name
    io(pool, "sync")
    assert backend_bytes(pool.backend, "b") == b"first+more"
    assert not os.path.lexists(bk(pool, "a"))
    assert get(pool, "/dst") == b"0123456789" * 20000     # read through from the new name
    assert not os.path.lexists(bk(pool, "src"))


@pytest.mark.timeout(60)
def test_a_directory_emptied_by_renames_and_removed_is_gone_from_the_backend_after_one_sync(make_pool):
    # /s reached DIR with its files; /n did not, and its files' data are flushed only at the
    # sync — under their old names, which the renames then move. Before, /n's rmdir ran at once
    # and the data flush made DIR/n again (left empty), and DIR/s's rmdir, on another server
    # than the renames out of it, could fail ENOTEMPTY (chfs_sync: EIO).
    pool = make_pool("-F", "0")
    io(pool, "mkdir", "/s")
    io(pool, "mkdir", "/t")
    for i in range(6):
        put(pool, f"/s/f{i}", b"s%d" % i)
    io(pool, "sync")
    io(pool, "mkdir", "/n")
    for i in range(6):
        put(pool, f"/n/g{i}", b"n%d" % i)
    for i in range(6):
        io(pool, "rename", f"/s/f{i}", f"/t/f{i}")
        io(pool, "rename", f"/n/g{i}", f"/t/g{i}")
    io(pool, "rmdir", "/s")
    io(pool, "rmdir", "/n")
    r = io(pool, "sync", check=False)
    assert r.returncode == 0, r.stderr.decode()
    assert not os.path.lexists(bk(pool, "s")) and not os.path.lexists(bk(pool, "n"))
    assert sorted(os.listdir(bk(pool, "t"))) == sorted([f"f{i}" for i in range(6)] + [f"g{i}" for i in range(6)])
    assert backend_bytes(pool.backend, "t/g5") == b"n5"
