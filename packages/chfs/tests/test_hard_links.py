"""Hard links (issue 16 item 2): chfs_link gives a regular file more names, in any directories,
whose records live on different servers; the file's attributes move to one inode record at the
owner of a reserved key (server/inode.c, lib/link.c). Every name reports the file's nlink and
size, data written through one name are read through the others, unlinking a name counts down
and the last one frees the data, rename over a linked name drops only that name, a join's
rebalance moves inode records like entries, and errors are a local file system's (EPERM for a
directory, EEXIST, ENOENT; EXDEV between CHFS and another file system under the hook).

Before this change link gave EPERM everywhere (chfs_link did not exist; the hook and chfuse
refused link) and nlink was always 1.
"""
import os
import platform
import re
import subprocess
import sys

import pytest

import poolstatus
from chfsutil import err_name, get, io, owner, put, python_env
from tri_path import data_files, on_chfuse, on_tmpfs, under_hook

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool


def nstat(pool, path):
    """(size, nlink) of path, through the native API."""
    mode, size, nlink, _ = io(pool, "stat", path).stdout.split()
    return int(size), int(nlink)


def names_on_several_servers(pool, count=8, servers=3):
    """count names /dI/nI whose entries live on at least `servers` servers. Placement hashes the
    servers' addresses (random ports), so a fixed set of 8 names fell on only 2 servers in about
    one run of ten; an entry's owner is known before it exists (chlist -o)."""
    firsts, rest, owners = [], [], set()
    for i in range(200):
        name = f"/d{i}/n{i}"
        o = owner(pool, name)
        (rest if o in owners else firsts).append(name)
        owners.add(o)
        if len(firsts) >= servers and len(firsts) + len(rest) >= count:
            return (firsts + rest)[:count]
    raise AssertionError(f"200 names fell on only {len(owners)} servers")


def test_links_across_directories_and_servers_share_data_count_and_size(chfs_pool):
    pool = chfs_pool
    assert pool.n >= 3
    names = names_on_several_servers(pool)
    for n in names:
        io(pool, "mkdir", os.path.dirname(n))
    put(pool, names[0], b"hello")
    for i, n in enumerate(names[1:], start=2):
        io(pool, "link", names[0], n)
        assert nstat(pool, names[0]) == (5, i)  # every name counts at once
    assert len({owner(pool, n) for n in names}) >= 3, "the names should live on several servers"
    assert {nstat(pool, n) for n in names} == {(5, 8)}
    # written through one name, read through every other; sizes after writes through two names
    put(pool, names[3], b"WORLD", off=5, create=False)
    put(pool, names[6], b"x" * 200000, off=100000, create=False)  # several chunks, other servers
    want = b"helloWORLD" + bytes(100000 - 10) + b"x" * 200000
    for n in names:
        assert get(pool, n) == want
        assert nstat(pool, n) == (300000, 8)
    # truncate through one name: every name's size
    io(pool, "truncate", names[7], 7)
    assert {nstat(pool, n) for n in names} == {(7, 8)}
    assert get(pool, names[1]) == b"helloWO"
    # the inode record is no name: not listed in the root
    root = io(pool, "ls", "/").stdout.decode().split()
    dirs = [os.path.dirname(n) for n in names]
    assert sorted(root) == sorted(d[1:] for d in dirs), root
    found = pool.run(["chfind", "/"]).stdout.split("\n")
    assert sorted(p for p in found if p) == sorted(["/"] + dirs + names), found
    # unlink either name, in any order: the count goes down, the data stay until the last
    order = [names[0]] + names[2:] + [names[1]]
    for k, n in enumerate(order):
        io(pool, "unlink", n)
        left = order[k + 1:]
        for m in left[:1] + left[-1:]:
            assert nstat(pool, m) == (7, len(left))
        if left:
            assert get(pool, left[-1]) == b"helloWO"
        assert err_name(io(pool, "stat", n, check=False)) == "ENOENT"
    assert data_files(pool) == []  # freed with the last name


def test_rename_over_a_link_and_between_two_names_of_one_file(chfs_pool):
    pool = chfs_pool
    io(pool, "mkdir", "/a")
    io(pool, "mkdir", "/b")
    put(pool, "/a/f", b"F")
    io(pool, "link", "/a/f", "/b/g")
    put(pool, "/a/h", b"HH")
    io(pool, "rename", "/a/h", "/b/g")  # over a linked name: only that name goes
    assert nstat(pool, "/a/f") == (1, 1)
    assert get(pool, "/a/f") == b"F"
    assert get(pool, "/b/g") == b"HH"
    io(pool, "link", "/a/f", "/a/f2")
    io(pool, "rename", "/a/f", "/a/f2")  # two names of one file: rename(2) does nothing
    assert nstat(pool, "/a/f") == (1, 2) and nstat(pool, "/a/f2") == (1, 2)
    io(pool, "rename", "/a/f2", "/b/moved")  # a linked name moves to another owner
    assert nstat(pool, "/b/moved") == (1, 2)
    put(pool, "/b/moved", b"Z", off=1, create=False)
    assert get(pool, "/a/f") == b"FZ"
    io(pool, "unlink", "/a/f")
    io(pool, "unlink", "/b/moved")
    io(pool, "unlink", "/b/g")
    assert data_files(pool) == []


def test_link_errors_as_on_a_local_file_system(chfs_pool):
    pool = chfs_pool
    io(pool, "mkdir", "/d")
    put(pool, "/f", b"x")
    put(pool, "/g", b"y")
    io(pool, "symlink", "f", "/s")
    cases = [(("/d", "/e"), "EPERM"),            # a directory
             (("/f", "/g"), "EEXIST"),           # the new name exists
             (("/f", "/d"), "EEXIST"),           # ... as a directory
             (("/nothere", "/h"), "ENOENT"),
             (("/f", "/nodir/h"), "ENOENT"),     # the new name's directory is missing
             (("/f", "/g/h"), "ENOTDIR"),
             (("/s", "/s2"), "EPERM")]           # a symlink (documented limit: not linkable yet)
    for (a, b), want in cases:
        assert err_name(io(pool, "link", a, b, check=False)) == want, (a, b)
    assert nstat(pool, "/f") == (1, 1)  # nothing half-done
    assert nstat(pool, "/g") == (1, 1)


@pytest.mark.hook
def test_link_under_the_hook_and_on_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    script = r"""
import errno, os, sys
b = os.path.join(sys.argv[1], "t%d" % os.getpid())  # the hook and the mount share the pool
os.makedirs(b + "/x/y"); os.mkdir(b + "/z")
out = []
with open(b + "/x/y/f", "wb") as f:
    f.write(b"one")
os.link(b + "/x/y/f", b + "/z/g")
os.link(b + "/z/g", b + "/h")
with open(b + "/z/g", "ab") as f:
    f.write(b"-two")
with open(b + "/h", "r+b") as f:
    f.seek(100)
    f.write(b"three")
for n in ("/x/y/f", "/z/g", "/h"):
    st = os.stat(b + n)
    with open(b + n, "rb") as f:
        out.append("%s nlink=%d size=%d %r" % (n, st.st_nlink, st.st_size, f.read().rstrip(b"\0")[:12]))
out.append("same-ino=%s" % (os.stat(b + "/h").st_ino == os.stat(b + "/x/y/f").st_ino))
fd = os.open(b + "/h", os.O_RDONLY)
os.unlink(b + "/x/y/f")
os.unlink(b + "/h")
out.append("fstat nlink=%d name-left=%r" % (os.fstat(fd).st_nlink, open(b + "/z/g", "rb").read()[:7]))
os.close(fd)
for a, c in (("/z", "/zz"), ("/z/g", "/z/g"), ("/nothere", "/n"), ("/z/g", "/x/nodir/n")):
    try:
        os.link(b + a, b + c)
        out.append("ok")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
os.link(b + "/z/g", b + "/z/g2", follow_symlinks=False)  # linkat without AT_SYMLINK_FOLLOW
out.append("after linkat nlink=%d" % os.stat(b + "/z/g").st_nlink)
print("\n".join(out))
"""
    want = on_tmpfs(script)
    assert "/h nlink=3 size=105" in want, want
    assert under_hook(script, chfs_pool) == want
    assert on_chfuse(script, chfs_pool, tmp_path) == want


@pytest.mark.hook
def test_link_between_chfs_and_another_file_system_is_exdev(chfs_pool, tmp_path):
    local = tmp_path / "local"
    local.write_text("l")
    script = r"""
import errno, os, sys
out = []
open("/chfs/c", "w").write("c")
for a, b in (("/chfs/c", sys.argv[2] + ".x"), (sys.argv[2], "/chfs/l")):
    try:
        os.link(a, b)
        out.append("ok")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(" ".join(out))
"""
    r = subprocess.run(["chfs-run", "--", "/usr/bin/python3", "-c", script, "/chfs", str(local)],
                       env=dict(chfs_pool.env, CHFS_HOOK_LOCAL="0"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "EXDEV EXDEV"


# One process (libchfs through ctypes, as chfsload.py) makes and checks many linked files: a
# chfs-io process per call would take minutes on a loaded machine.
LINKED = r"""
import ctypes, os, struct, sys
sys.path.insert(0, sys.argv[1])
import chfsload
c = chfsload.Client()
lib = c.lib
lib.chfs_link.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
lib.chfs_unlink.argtypes = [ctypes.c_char_p]
lib.chfs_stat.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
st = ctypes.create_string_buffer(256)
def call(rc, what):
    if rc != 0:
        raise SystemExit("%s: %s" % (what, os.strerror(ctypes.get_errno())))
def size_nlink(p):  # glibc x86_64 struct stat: st_nlink at 16, st_size at 48
    call(lib.chfs_stat(p.encode(), st), "stat " + p)
    return struct.unpack_from("<q", st.raw, 48)[0], struct.unpack_from("<Q", st.raw, 16)[0]
def expect(got, want, what):
    if got != want:
        raise SystemExit("%s: %r, want %r" % (what, got, want))
phase, n = sys.argv[2], int(sys.argv[3])
for i in range(n):
    data = ("file %d " % i).encode() * 50
    a, l = "/s%d/a" % i, "/l%d" % i
    if phase == "make":
        c.mkdir("/s%d" % i)
        c.put(a, data)
        call(lib.chfs_link(a.encode(), l.encode()), "link " + l)
        continue
    expect(size_nlink(a), (len(data), 2), a)
    expect(c.get(l), data, l)
    fd = lib.chfs_open(l.encode(), os.O_WRONLY)
    expect(lib.chfs_pwrite(fd, b"!", 1, len(data)), 1, "write " + l)
    call(lib.chfs_close(fd), "close " + l)
    expect(size_nlink(a), (len(data) + 1, 2), a)
    call(lib.chfs_unlink(a.encode()), "unlink " + a)
    expect(size_nlink(l), (len(data) + 1, 1), l)
    expect(c.get(l), data + b"!", l)
    call(lib.chfs_unlink(l.encode()), "unlink " + l)
print("ok")
"""


def linked_files(pool, phase, n):
    r = subprocess.run([sys.executable, "-c", LINKED, os.path.dirname(os.path.abspath(__file__)), phase,
                        str(n)], env=python_env(pool.env), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.skipif(platform.machine() != "x86_64", reason="reads glibc's x86_64 struct stat")
@pytest.mark.parametrize("chfs_pool", [{"servers": 3}], indirect=True)
def test_a_join_moves_inode_records_and_links_keep_working(chfs_pool):
    pool = chfs_pool
    files = 60
    linked_files(pool, "make", files)
    e0 = poolstatus.status(pool.env)[pool.addrs[0]]["epoch"]
    new = pool.add()
    poolstatus.wait_settled(pool.env, 4, after_epoch=e0)
    # inode records are on the new server now: its namespace journal holds inode keys
    # ("\x01" + 16 hex digits, wire_inode_key), taken from their previous owners
    with open(os.path.join(pool.dirs[new], "ns.journal"), "rb") as f:
        moved = set(re.findall(rb"\x01[0-9a-f]{16}", f.read()))
    assert moved, "no inode record moved to the joining server"
    linked_files(pool, "check", files)  # both names, writes, unlink of either: all still work
    assert data_files(pool) == []
