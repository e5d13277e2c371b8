"""Renaming a non-empty directory (issue 16, lib/dir_rename.c): a deep tree — directories,
files with data, symlinks, a FIFO, hard links inside it and to outside it, an open descriptor
kept across the rename and written after it — renamed on a 4-server pool, under the hook and
on chfuse, must give the transcript tmpfs gives: every byte under the new names, the old names
gone, modes, sizes, link counts and mtimes kept, the directory's ctime and its parent's times
changed, EINVAL into itself, ENOTEMPTY over a non-empty directory, an empty one replaced. With
a backend (chfsd -b DIR), the renamed tree reaches DIR under the new name only after one
chfs_sync — also its files that were flushed before and those only DIR had.

Before this change the rename gave EXDEV (mv(1) copied every byte instead)."""
import os
import random

import pytest

from chfsutil import err_name, get, io, owner, put
from test_backend_flush import backend_bytes, make_pool  # noqa: F401 (fixture)
from tri_path import on_chfuse, on_tmpfs, under_hook

SCRIPT = r"""
import errno, hashlib, os, stat, sys, time
b = os.path.join(sys.argv[1], "dr")
os.mkdir(b)
src, dst = os.path.join(b, "src"), os.path.join(b, "dst")
def data(i):
    return hashlib.sha256(b"%d" % i).digest() * (1 + 997 * (i % 5))
def write(p, s):
    with open(p, "wb") as f:
        f.write(s)
os.mkdir(src)
d, n = src, 0
for level in range(6):                     # src/l0/l1/.../l5, files and a side directory each
    d = os.path.join(d, "l%d" % level)
    os.mkdir(d)
    for i in range(5):
        write(os.path.join(d, "f%d" % i), data(n)); n += 1
    os.mkdir(os.path.join(d, "side"))
    write(os.path.join(d, "side", "g"), data(n)); n += 1
os.mkdir(os.path.join(src, "empty"))
os.chmod(os.path.join(src, "l0", "side"), 0o700)
os.chmod(os.path.join(src, "l0", "f1"), 0o640)
os.symlink("f0", os.path.join(src, "l0", "ln"))
os.symlink("../nowhere", os.path.join(src, "l0", "dangling"))
os.mkfifo(os.path.join(src, "l0", "fifo"))
os.link(os.path.join(src, "l0", "f0"), os.path.join(src, "l0", "l1", "l2", "hard"))
write(os.path.join(b, "outside"), b"linked from outside")
os.link(os.path.join(b, "outside"), os.path.join(src, "l0", "l1", "out"))
fd = os.open(os.path.join(src, "l0", "l1", "l2", "open"), os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"before-")

def tree(top):
    out, inos = {}, {}
    for dp, dns, fns in os.walk(top):
        for name in dns + fns:
            p = os.path.join(dp, name)
            rel = os.path.relpath(p, top)
            st = os.lstat(p)
            what = (stat.S_IFMT(st.st_mode), oct(stat.S_IMODE(st.st_mode)), st.st_nlink)
            if rel != "l0/l1/l2/open":          # (written after the rename: checked below)
                what += (st.st_mtime_ns,)
            if stat.S_ISREG(st.st_mode) and rel != "l0/l1/l2/open":
                with open(p, "rb") as f:
                    what += (st.st_size, hashlib.sha256(f.read()).hexdigest())
            elif stat.S_ISLNK(st.st_mode):
                what += (os.readlink(p),)
            out[rel] = what
            inos.setdefault(st.st_ino, []).append(rel)
    return out, sorted(sorted(v) for v in inos.values() if len(v) > 1)

before, links = tree(src)
top_before, b_before = os.stat(src), os.stat(b)
time.sleep(0.05)
os.rename(src, dst)
out = ["rename: ok", "old name: %s" % os.path.lexists(src)]
os.write(fd, b"after")
os.close(fd)
after, links_after = tree(dst)
out.append("entries: %d same: %s" % (len(after), after == before))
out += ["differs: %s %s -> %s" % (k, before.get(k), after.get(k))
        for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
out.append("hard links: %s same: %s" % (links_after, links_after == links))
out.append("outside and inside one file: %s" % (
    os.stat(os.path.join(b, "outside")).st_ino == os.stat(os.path.join(dst, "l0", "l1", "out")).st_ino))
with open(os.path.join(dst, "l0", "l1", "l2", "open"), "rb") as f:
    out.append("written through the descriptor after the rename: %s" % f.read())
top, b_after = os.stat(dst), os.stat(b)
out.append("dir: mtime kept %s, ctime changed %s, nlink %d" % (
    top.st_mtime_ns == top_before.st_mtime_ns, top.st_ctime_ns > top_before.st_ctime_ns, top.st_nlink))
out.append("parent: mtime changed %s, nlink %d" % (b_after.st_mtime_ns > b_before.st_mtime_ns, b_after.st_nlink))
out.append("listing: %s" % sorted(os.listdir(b)))
def err(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
out.append("into itself: %s" % err(lambda: os.rename(dst, os.path.join(dst, "l0", "in"))))
os.mkdir(os.path.join(b, "full"))
write(os.path.join(b, "full", "x"), b"x")
out.append("over a non-empty directory: %s" % err(lambda: os.rename(dst, os.path.join(b, "full"))))
os.mkdir(os.path.join(b, "vacant"))
out.append("over an empty directory: %s" % err(lambda: os.rename(dst, os.path.join(b, "vacant"))))
again, _ = tree(os.path.join(b, "vacant"))
out.append("after a second rename: same %s, old name %s" % (
    {k: v for k, v in again.items() if k != "l0/l1/l2/open"} ==
    {k: v for k, v in after.items() if k != "l0/l1/l2/open"}, os.path.lexists(dst)))
print("\n".join(out))
"""

POOL4 = pytest.mark.parametrize("chfs_pool", [{"servers": 4}], indirect=True)


def reference():
    want = on_tmpfs(SCRIPT)
    assert "same: True" in want and "differs" not in want and "old name: False" in want, want
    return want


@pytest.mark.hook
@pytest.mark.timeout(180)
@POOL4
def test_a_deep_tree_renamed_under_the_hook_as_on_tmpfs(chfs_pool):
    want = reference()
    assert under_hook(SCRIPT, chfs_pool) == want


@pytest.mark.timeout(180)
@POOL4
def test_a_deep_tree_renamed_on_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    want = reference()
    assert on_chfuse(SCRIPT, chfs_pool, tmp_path) == want


def backend_tree(root):
    out = {}
    for dp, dns, fns in os.walk(root):
        for name in dns + fns:
            p = os.path.join(dp, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read())
    return out


@pytest.mark.timeout(120)
def test_a_renamed_tree_reaches_the_backend_under_its_new_name(make_pool):
    pool = make_pool("-F", "0")
    want = {}
    for d in ("/src", "/src/a", "/src/a/b", "/src/a/b/c"):
        io(pool, "mkdir", d)
        if d != "/src":
            want[d[5:]] = ("dir",)
    for i, d in enumerate(("/src", "/src/a", "/src/a/b", "/src/a/b/c") * 3):
        data = random.Random(i).randbytes(1000 + 40_000 * (i % 3))
        put(pool, f"{d}/f{i}", data)
        want[f"{d[5:]}/f{i}".lstrip("/")] = ("file", data)
    io(pool, "symlink", "f0", "/src/ln")
    want["ln"] = ("link", "f0")
    io(pool, "sync")                         # these are on DIR/src before the rename
    os.makedirs(os.path.join(pool.backend, "src", "only", "here"))
    with open(os.path.join(pool.backend, "src", "only", "here", "x"), "wb") as f:
        f.write(b"only DIR had it")          # never read through before the rename
    os.symlink("here/x", os.path.join(pool.backend, "src", "only", "sl"))
    want.update({"only": ("dir",), "only/here": ("dir",), "only/here/x": ("file", b"only DIR had it"),
                 "only/sl": ("link", "here/x")})
    io(pool, "mkdir", "/src/new")
    want["new"] = ("dir",)
    for i, d in enumerate(("a", "a", "new", "new")):   # after the last sync: not on DIR yet
        data = random.Random(100 + i).randbytes(30_000)
        put(pool, f"/src/{d}/late{i}", data)
        want[f"{d}/late{i}"] = ("file", data)
    put(pool, "/src/new/empty", b"")
    want["new/empty"] = ("file", b"")
    os.makedirs(os.path.join(pool.backend, "bonly"))      # a tree only DIR has, renamed whole
    with open(os.path.join(pool.backend, "bonly", "y"), "wb") as f:
        f.write(b"y")
    os.symlink("y", os.path.join(pool.backend, "bonly", "ly"))
    io(pool, "rename", "/bonly", "/src/bmoved")
    want.update({"bmoved": ("dir",), "bmoved/y": ("file", b"y"), "bmoved/ly": ("link", "y")})
    io(pool, "rename", "/src", "/dst")
    assert get(pool, "/dst/only/here/x") == b"only DIR had it"
    r = io(pool, "sync", check=False)
    assert r.returncode == 0, r.stderr.decode()
    assert not os.path.lexists(os.path.join(pool.backend, "src"))
    assert not os.path.lexists(os.path.join(pool.backend, "bonly"))
    assert backend_tree(os.path.join(pool.backend, "dst")) == want
    assert io(pool, "stat", "/src", check=False).returncode != 0


@pytest.mark.timeout(120)
def test_a_rename_that_fails_midway_leaves_every_entry_under_one_of_its_names(chfs_pool):
    # The deepest file's new name would pass CHFS_PATH_MAX: the walk stops there with
    # ENAMETOOLONG, having moved what it reached; nothing is lost or doubled.
    deep = "/a" + ("/" + "d" * 250) * 65
    put(chfs_pool, f"{deep}/{'f' * 60}", b"deepest")  # 16,377 bytes; its parents made implicitly
    files = {f"{deep}/{'f' * 60}": b"deepest"}
    files.update({"/a" + ("/" + "d" * 250) * k + f"/x{k}": b"level %d" % k for k in range(0, 66, 16)})
    for path, data in files.items():
        put(chfs_pool, path, data)
    r = io(chfs_pool, "rename", "/a", "/a123456789", check=False)
    assert err_name(r) == "ENAMETOOLONG"
    for path, data in files.items():
        moved = "/a123456789" + path[2:]
        here = [p for p in (path, moved) if io(chfs_pool, "stat", p, check=False).returncode == 0]
        assert len(here) == 1, (path[-20:], here)
        assert get(chfs_pool, here[0]) == data


@pytest.mark.timeout(120)
def test_a_symlink_applied_after_its_renamed_directory_left_does_not_make_it_again(make_pool):
    """A directory d holding a symlink, renamed to e before the backend saw either: d's owner
    records mkdir d and rmdir d, the symlink's owner (another server) symlink d/ln and unlink
    d/ln. Servers apply their records independently (a sync's, concurrently; here each at its
    shutdown, d's owner first). The symlink's owner made d/ln — and d above it — after d's
    owner had removed d, then unlinked d/ln: an empty d stayed on DIR (under a renamed tree,
    its parent's rmdir then failed ENOTEMPTY at every sync)."""
    pool = make_pool("-F", "0")                  # no background pass: records wait
    for i in range(64):
        d = f"/d{i}"
        x, y = owner(pool, d), owner(pool, d + "/ln")
        if x != y:
            break
    else:
        raise AssertionError("no directory and entry names on different servers")
    io(pool, "mkdir", d)
    io(pool, "symlink", "target", d + "/ln")
    io(pool, "rename", d, "/e")
    pool.restart(pool.addrs.index(x))            # applies mkdir d, rmdir d
    pool.restart(pool.addrs.index(y))            # applies symlink d/ln, unlink d/ln
    r = io(pool, "sync", check=False)
    assert r.returncode == 0, r.stderr.decode()
    assert backend_tree(pool.backend) == {"e": ("dir",), "e/ln": ("link", "target")}
