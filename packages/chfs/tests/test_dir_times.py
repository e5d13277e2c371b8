"""Directory times and link counts (issue 16 item 4): a directory's mtime and ctime change when
a name is created, removed or renamed in it (not when a file in it is written), and its
st_nlink is 2 + its subdirectories, as on tmpfs.

On the previous build a directory's times never changed and st_nlink was always 2. The same
script runs on tmpfs, chfuse and the hook (and checks that a renamed file's ctime changes) (4 servers, so most directories are owned by another
server than their entries); the transcripts must be equal.
"""
import pytest

from tri_path import on_chfuse, on_tmpfs, under_hook

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool

SCRIPT = r"""
import os, sys, time
b = os.path.join(sys.argv[1], "dt")
os.mkdir(b)
d, e = os.path.join(b, "d"), os.path.join(b, "e")
os.mkdir(d)
os.mkdir(e)
out = []
def t(p):
    st = os.stat(p)
    return st.st_mtime_ns, st.st_ctime_ns
def step(name, fn, dirs):
    before = [t(x) for x in dirs]
    time.sleep(0.05)
    fn()
    after = [t(x) for x in dirs]
    out.append(name + ": " + " ".join("m=%s,c=%s" % (a[0] > o[0], a[1] > o[1])
                                      for o, a in zip(before, after)))
def write(p, s):
    with open(p, "w") as f:
        f.write(s)
for i in range(3):  # many names, so that owners differ from their directory's
    step("create%d" % i, lambda: write(os.path.join(d, "f%d" % i), ""), [d, e])
step("write", lambda: write(os.path.join(d, "f0"), "x"), [d])
step("mkdir", lambda: os.mkdir(os.path.join(d, "sub")), [d, b])
step("symlink", lambda: os.symlink("f0", os.path.join(d, "l")), [d])
step("rename-in", lambda: os.rename(os.path.join(d, "l"), os.path.join(d, "l2")), [d])
step("rename-across", lambda: os.rename(os.path.join(d, "f0"), os.path.join(e, "g")), [d, e])
st = os.stat(os.path.join(e, "g"))  # a renamed file's ctime changes, its mtime does not
out.append("renamed file: ctime>mtime=%s" % (st.st_ctime_ns > st.st_mtime_ns))
step("unlink", lambda: os.unlink(os.path.join(e, "g")), [e, d])
step("rmdir", lambda: os.rmdir(os.path.join(d, "sub")), [d])
def nlinks():
    return "nlink b=%d d=%d e=%d" % tuple(os.stat(x).st_nlink for x in (b, d, e))
out.append(nlinks())
for i in range(3):
    os.mkdir(os.path.join(d, "s%d" % i))
out.append(nlinks())
os.rename(os.path.join(d, "s2"), os.path.join(e, "s2"))
out.append(nlinks())
os.rmdir(os.path.join(d, "s0"))
out.append(nlinks())
print("\n".join(out))
"""


@pytest.mark.hook
def test_directory_times_and_nlink_under_the_hook_as_on_tmpfs(chfs_pool):
    want = on_tmpfs(SCRIPT)
    assert "mkdir: m=True,c=True m=False,c=False" in want and "nlink b=4 d=4 e=3" in want, want
    assert under_hook(SCRIPT, chfs_pool) == want


def test_directory_times_and_nlink_on_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    want = on_tmpfs(SCRIPT)
    assert on_chfuse(SCRIPT, chfs_pool, tmp_path) == want
