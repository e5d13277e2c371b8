"""Names longer than PATH_MAX under the hook (issue 16 item 5).

One argument of a system call is at most 4,095 bytes, but a program walks deeper with directory
descriptors (openat/mkdirat/fstatat/renameat/unlinkat) or chdir/fchdir and short names. A CHFS
name may be 16,383 bytes from the CHFS root (libchfs's CHFS_PATH_MAX, HOOK_CHFS_PATH_MAX in
hook.h); the hook keeps such names on the heap. chfs-hook-deepwalk makes the same walk on a
local directory (the kernel's answers: getcwd is ENAMETOOLONG beyond PATH_MAX whatever the
buffer, an argument of 4,096 bytes is ENAMETOOLONG, readlink of /proc/self/fd/N of a deep file
is ENAMETOOLONG, a deep descriptor and cwd survive exec; glibc's getcwd(3) still answers with
the whole name, walking ".." itself) and under the hook in CHFS, and the transcripts must be
equal (getcwd(3) failed with ENOENT under the hook before chfs-hook/loader/getcwd.c). Beyond the bound, every call is a clean ENAMETOOLONG and nothing is
created at a shortened name. A deep cwd and descriptor follow a rename by another process. Before this change the walk stopped with ENAMETOOLONG at 4,096
bytes from the mount point (the hook's names were PATH_MAX buffers).
"""
import os
import subprocess
import sys

import pytest

from ci.testlib.chfs_pool import ChfsPool, stack_prefix

DEEPWALK = os.path.join(stack_prefix(), "libexec", "chfs-hook", "chfs-hook-deepwalk")
COMP = "w" * 120
CHFS_PATH_MAX = 16384  # libchfs's CHFS_PATH_MAX (packages/chfs/common/path.h)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with ChfsPool(servers=2, tmp=str(tmp_path_factory.mktemp("longpool"))) as p:
        yield p


def hooked(pool, argv, env=None, timeout=120):
    """argv under chfs-run, on the RPC data path unless env asks for the node-local one."""
    r = subprocess.run(["chfs-run", "--"] + argv,
                       env={**pool.env, "CHFS_HOOK_LOCAL": "0", **(env or {})},
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


def native(pool, *argv):
    return pool.run(["chfs-io", *argv]).stdout


def native_ls(pool, path):
    return sorted(n for n in native(pool, "ls", path).split() if n not in (".", ".."))


@pytest.mark.parametrize("data_path", ["rpc", "local"])
def test_a_deep_walk_with_short_arguments_answers_as_the_kernel(pool, tmp_path, data_path):
    """Also over the node-local fast path (the kernel descriptor is the server's backing file
    then, not a placeholder)."""
    local = tmp_path / "deep"
    local.mkdir()
    ref = subprocess.run([DEEPWALK, "walk", os.path.realpath(local), "40"], capture_output=True,
                         text=True, timeout=120)
    assert ref.returncode == 0, ref.stderr
    want = ref.stdout
    # the reference is what the kernel does (checked on tmpfs and ext4)
    for line in ("walk: 40 levels, 4840 bytes below DIR: ok", "read leaf: deep data",
                 "fstatat leaf2: file size 10", "getdents64: leaf2 sub",
                 "readlink /proc/self/fd/N: ENAMETOOLONG", "stat rel: ok size 4",
                 "getcwd in the deepest directory: size 20000 ENAMETOOLONG, size 1 ENAMETOOLONG, "
                 "NULL buffer ENAMETOOLONG",
                 "getcwd(3) of 4840 bytes: NULL 0 the whole name, size len+1 the whole name, "
                 "size len ERANGE, NULL len ERANGE",
                 "openat 4096-byte name: ENAMETOOLONG", "openat 4095-byte name: ENOENT",
                 "child: inherited descriptor reads deep data", "child: cwd's rel reads rel",
                 "getcwd one level down: size len ERANGE, size 0 ERANGE, size len+1 ok",
                 "chdir 40 levels down and up: getcwd as expected at every level (ENAMETOOLONG "
                 "where deeper than PATH_MAX)"):
        assert line in want.splitlines(), (line, want)
    top = f"/deep-{data_path}"
    native(pool, "mkdir", top)
    env = {"CHFS_HOOK_LOCAL": "1", "CHFS_PLACEMENT": "local"} if data_path == "local" else {}
    got = hooked(pool, [DEEPWALK, "walk", "/chfs" + top, "40"], env=env)
    assert got == want
    # the tree is CHFS's own: 40 levels, seen through libchfs without the hook
    deepest = top + f"/{COMP}" * 40
    assert len(deepest) > 4096
    assert native(pool, "stat", deepest).split()[0].startswith("4")  # a directory (040755)
    assert native_ls(pool, deepest) == []


def test_a_walk_under_a_subdirectory_mount_with_python_dir_fd_calls(pool, tmp_path):
    """Python's os functions with dir_fd, as conformance_run.py's walk-down, under a mount that
    shows a CHFS subdirectory (DIR=/CHFSDIR: the CHFS name is longer than the mount's)."""
    script = f"""
import os, sys
top = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fd = top
for _ in range(40):
    os.mkdir({COMP!r}, dir_fd=fd)
    nfd = os.open({COMP!r}, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    if fd != top:
        os.close(fd)
    fd = nfd
w = os.open("leaf", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
os.write(w, b"deep")
os.close(w)
print(os.stat("leaf", dir_fd=fd).st_size, sorted(os.listdir(fd)))
os.rename("leaf", "leaf2", src_dir_fd=fd, dst_dir_fd=fd)
with open(os.open("leaf2", os.O_RDONLY, dir_fd=fd), "rb") as f:
    print(f.read().decode())
os.chdir(fd)
print(os.stat("leaf2").st_size, os.path.exists("leaf"))
print(os.getcwd() == sys.argv[1] + {("/" + COMP) * 40!r}, os.path.abspath("leaf2")[-6:])
"""
    native(pool, "mkdir", "/proj")
    native(pool, "mkdir", "/proj/sub")
    mnt = str(tmp_path / "m")
    r = subprocess.run(["chfs-run", "--mount", f"{mnt}=/proj/sub", "--", sys.executable, "-c", script,
                        mnt], env={**pool.env, "CHFS_HOOK_LOCAL": "0"}, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == ["4 ['leaf']", "deep", "4 False", "True /leaf2"]
    assert native(pool, "get", "/proj/sub" + f"/{COMP}" * 40 + "/leaf2") == "deep"
    assert not os.path.exists(mnt)  # nothing went to the local disk


def test_beyond_the_chfs_bound_every_call_is_enametoolong(pool):
    """Below /b (2 bytes), 135 levels of 121 bytes are 16,337 bytes from the CHFS root; the
    136th is refused. In the deepest, a name 16,383 bytes from the root works (file, directory,
    chdir into it); one byte more, or anything below the directory at the bound, is
    ENAMETOOLONG, and nothing lands at a shortened name."""
    native(pool, "mkdir", "/b")
    out = hooked(pool, [DEEPWALK, "beyond", "/chfs/b", "2"]).splitlines()
    levels = (CHFS_PATH_MAX - 1 - 2) // 121
    assert levels == 135
    deepest = "/b" + f"/{COMP}" * levels
    room = CHFS_PATH_MAX - 1 - len(deepest) - 1
    at_bound = "f" * room
    assert len(deepest) + 1 + room == CHFS_PATH_MAX - 1
    assert out == [
        f"mkdirat at level 136 ({len(deepest) + 121} bytes from the CHFS root): ENAMETOOLONG",
        f"create a name {CHFS_PATH_MAX} bytes from the CHFS root: ENAMETOOLONG",
        "mkdirat it: ENAMETOOLONG",
        "fstatat it: ENAMETOOLONG",
        f"a name {CHFS_PATH_MAX - 1} bytes from the CHFS root:",
        f"create {at_bound}: ok, wrote 13",
        "read it: at the bound",
        "renameat it to d: ok",
        "mkdirat it: ok",
        "fchdir the deepest: ok",
        "chdir to the bound: ok",
        "getcwd at the bound: size 20000 ENAMETOOLONG, size 1 ENAMETOOLONG, NULL buffer "
        "ENAMETOOLONG",
        "stat .: dir",
        "stat x: ENAMETOOLONG",
        "mkdir x: ENAMETOOLONG",
        "chdir x: ENAMETOOLONG",
        "chdir ..: ok",
        "stat d: file size 13",
        f"levels 0..{levels - 1} list only the next level: yes",
        f"the deepest lists: d {at_bound}",
    ], "\n".join(out)
    assert native_ls(pool, deepest) == ["d", at_bound]
    assert native(pool, "get", deepest + "/d") == "at the bound\n"
    assert native_ls(pool, "/b") == [COMP]


FOLLOW_SCRIPT = f"""
import os, subprocess, sys
fd = os.open("/chfs/r/a", os.O_RDONLY | os.O_DIRECTORY)
for _ in range(40):
    os.mkdir({COMP!r}, dir_fd=fd)
    nfd = os.open({COMP!r}, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
w = os.open("leaf", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
os.write(w, b"followed")
os.close(w)
os.chdir(fd)
subprocess.run([sys.executable, "-c", "import os; os.rename('/chfs/r/a', '/chfs/r/b')"],
               check=True, timeout=60)
print(os.stat("leaf").st_size, os.stat("leaf", dir_fd=fd).st_size)
os.mkdir("new")
print(sorted(os.listdir(fd)))
"""


def test_a_deep_cwd_and_descriptor_follow_a_rename_by_another_process(pool):
    """hook/follow.c finds the new names (longer than PATH_MAX) of a directory another process
    renamed above the cwd and a directory descriptor, as the kernel's cwd and descriptors
    follow the directory itself."""
    native(pool, "mkdir", "/r")
    native(pool, "mkdir", "/r/a")
    out = hooked(pool, [sys.executable, "-c", FOLLOW_SCRIPT]).splitlines()
    assert out == ["8 8", "['leaf', 'new']"]
    assert native_ls(pool, "/r/b" + f"/{COMP}" * 40) == ["leaf", "new"]
    assert native_ls(pool, "/r") == ["b"]
