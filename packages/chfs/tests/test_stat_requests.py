"""What a stat and an open cost in requests (issue 18 item 5: per-process cost of hooked
workflow steps). Counted with the servers' per-op counters (`chlist -S`).

- A local-placement file's size and mtime come from its backing file at its home server. The
  owner of the name merges them itself when it is the home (server/handlers.c merge_local); the
  client used to ask the home again anyway (WOP_DATA_STAT), doubling every stat of such a file.
  Now it asks only when the owner that answered is another server, and the size stays right
  either way (a direct write to the backing file shows).
- The hook opened a file and then looked it up again (chfs_fstat) only to learn whether it is a
  directory; the open's own lookup says so (chfs_mode_of). A hooked open + fstat costs one
  lookup each.
- Every hooked open of a local-placement file asked its home for the backing file's path
  (WOP_LOCAL_PATH), although a file id's backing file never changes: a process now asks once
  per file (lib/backing_paths.c), and a file made anew under the same name is a new id.
"""
import os
import subprocess

import pytest

from chfsutil import io, owner, put, stat
from poolstatus import ops, ops_delta

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool


def home_index(pool, path):
    """Index of the server whose storage holds path's backing file (its home)."""
    p = io(pool, "localpath", path).stdout.decode().strip()
    return next(i for i, d in enumerate(pool.dirs) if p.startswith(d + "/")), p


def local_files(pool, want_home_is_owner, tries=64):
    """A new local-placement file whose name's owner is (or is not) its home."""
    for k in range(tries):
        path = f"/lf{k}"
        io(pool, "create", path, 0, "local")
        put(pool, path, b"x" * 100, create=False)
        h, backing = home_index(pool, path)
        if (pool.addrs[h] == owner(pool, path)) == want_home_is_owner:
            return path, backing
    pytest.fail(f"no name among {tries} with home {'=' if want_home_is_owner else '!='} owner")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("home_is_owner", [True, False])
def test_stat_of_a_local_file_asks_its_home_only_when_another_server_owns_the_name(chfs_pool,
                                                                                  home_is_owner):
    path, backing = local_files(chfs_pool, home_is_owner)
    with open(backing, "r+b") as f:     # a direct writer (hook, FUSE passthrough) extends it
        f.seek(5000)
        f.write(b"y")
    before = ops(chfs_pool.env)
    assert stat(chfs_pool, path)[1] == 5001
    d = ops_delta(before, ops(chfs_pool.env))
    assert d.get("stat") == 1, d
    assert d.get("data_stat", 0) == (0 if home_is_owner else 1), d


@pytest.mark.hook
@pytest.mark.timeout(120)
def test_a_hooked_open_and_fstat_look_the_file_up_once_each(chfs_pool):
    put(chfs_pool, "/catme", b"meow\n")
    script = ("import os\n"
              "fd = os.open('/chfs/catme', os.O_RDONLY)\n"
              "print(os.fstat(fd).st_size, os.read(fd, 5))\n"
              "os.close(fd)\n")
    before = ops(chfs_pool.env)
    r = subprocess.run(["chfs-run", "--", "/usr/bin/python3", "-c", script],
                       env=dict(chfs_pool.env, CHFS_HOOK_LOCAL="0"), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "5 b'meow\\n'\n", (r.stdout, r.stderr)
    d = ops_delta(before, ops(chfs_pool.env))
    assert d.get("stat-open") == 1, d
    assert d.get("stat", 0) == 1, d     # the fstat; the open needed no second lookup


@pytest.mark.hook
@pytest.mark.timeout(120)
def test_a_hooked_open_of_a_directory_still_refuses_writing_and_lists_it(chfs_pool):
    io(chfs_pool, "mkdir", "/dd")
    put(chfs_pool, "/dd/f", b"1")
    script = ("import errno, os\n"
              "try:\n"
              "    os.open('/chfs/dd', os.O_WRONLY)\n"
              "except OSError as e:\n"
              "    print(errno.errorcode[e.errno])\n"
              "fd = os.open('/chfs/dd', os.O_RDONLY | os.O_DIRECTORY)\n"
              "print(sorted(os.listdir(fd)))\n"
              "try:\n"
              "    os.open('/chfs/dd/f', os.O_RDONLY | os.O_DIRECTORY)\n"
              "except OSError as e:\n"
              "    print(errno.errorcode[e.errno])\n")
    r = subprocess.run(["chfs-run", "--", "/usr/bin/python3", "-c", script],
                       env=dict(chfs_pool.env, CHFS_HOOK_LOCAL="0"), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["EISDIR", "['f']", "ENOTDIR"], r.stdout


@pytest.mark.hook
@pytest.mark.timeout(120)
def test_a_hooked_process_asks_for_a_local_files_backing_path_once(chfs_pool):
    io(chfs_pool, "create", "/again", 0, "local")
    put(chfs_pool, "/again", b"first", create=False)
    script = ("import os\n"
              "for _ in range(5):\n"
              "    with open('/chfs/again', 'rb') as f:\n"
              "        print(f.read().decode())\n"
              "os.unlink('/chfs/again')\n"               # a new file (new id) under the name
              "with open('/chfs/again', 'wb') as f:\n"
              "    f.write(b'second, longer')\n"
              "with open('/chfs/again', 'rb') as f:\n"
              "    print(f.read().decode())\n")
    env = dict(chfs_pool.env, CHFS_HOOK_LOCAL="1", CHFS_PLACEMENT="local")
    before = ops(chfs_pool.env)
    r = subprocess.run(["chfs-run", "--", "/usr/bin/python3", "-c", script], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:6] == ["first"] * 5 + ["second, longer"], r.stdout
    d = ops_delta(before, ops(chfs_pool.env))
    assert d.get("local_path") == 2, d   # one per file: the first and the new one
    assert stat(chfs_pool, "/again")[1] == len(b"second, longer")

