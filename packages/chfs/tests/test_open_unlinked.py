"""Files that outlive their name (issue 16 item 2): a file unlinked, or renamed over, while open
stays readable and writable through its open descriptors until the last close, fstat says
st_nlink 0, and its data are freed at the last close.

On the previous build fstat of such a descriptor gave ESTALE through chfuse and nlink 1 with
size 0 under the hook, and the data were removed at unlink (reads gave nothing). The same
script runs on tmpfs, chfuse and the hook; the transcripts must be equal. Afterwards no data
file is left on any server.
"""
import time

import pytest

from tri_path import data_files, on_chfuse, on_tmpfs, under_hook

SCRIPT = r"""
import os, sys
d = os.path.join(sys.argv[1], "unl")
os.mkdir(d)
out = []
p = os.path.join(d, "tmp")
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"hello world")
os.unlink(p)
st = os.fstat(fd)
out += ["nlink=%d size=%d exists=%s" % (st.st_nlink, st.st_size, os.path.exists(p))]
os.write(fd, b", more" * 2000)       # still writable, beyond a chunk
os.lseek(fd, 0, 0)
data = os.read(fd, 1 << 20)
out += ["read=%d %r" % (len(data), data[:17]), "fsize=%d" % os.fstat(fd).st_size]
os.ftruncate(fd, 5)
out += ["trunc=%d %r" % (os.fstat(fd).st_size, os.pread(fd, 100, 0))]
# two descriptors: the data live until the second closes
q = os.path.join(d, "two")
a = os.open(q, os.O_CREAT | os.O_RDWR, 0o644)
os.write(a, b"abc")
b = os.open(q, os.O_RDONLY)
os.unlink(q)
os.close(a)
out += ["second=%r nlink=%d" % (os.pread(b, 10, 0), os.fstat(b).st_nlink)]
os.close(b)
# rename over an open file: the old file stays readable through its descriptor
r = os.path.join(d, "r")
with open(r, "w") as f:
    f.write("old data")
rfd = os.open(r, os.O_RDONLY)
with open(r + ".new", "w") as f:
    f.write("new")
os.rename(r + ".new", r)
st = os.fstat(rfd)
out += ["renamed-over=%r nlink=%d size=%d" % (os.pread(rfd, 20, 0), st.st_nlink, st.st_size)]
os.close(rfd)
with open(r) as f:
    out += ["name=%r" % f.read()]
os.unlink(r)
os.close(fd)
out += ["left=%r" % sorted(os.listdir(d))]
os.rmdir(d)
print("\n".join(out))
"""

WANT_PREFIX = "nlink=0 size=11 exists=False"


@pytest.mark.hook
def test_open_unlinked_file_under_the_hook_as_on_tmpfs(chfs_pool):
    want = on_tmpfs(SCRIPT)
    assert want.startswith(WANT_PREFIX), want
    assert under_hook(SCRIPT, chfs_pool) == want
    assert data_files(chfs_pool) == []  # freed at the last close


def test_open_unlinked_file_on_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    want = on_tmpfs(SCRIPT)
    assert on_chfuse(SCRIPT, chfs_pool, tmp_path, while_mounted=lambda: wait_freed(chfs_pool)) == want


def wait_freed(pool):
    """No data file left on any server (on a mount, once the kernel's last release and libfuse's
    unlink of the hidden name have come, which is asynchronous; before the unmount)."""
    end = time.time() + 10
    while data_files(pool) and time.time() < end:
        time.sleep(0.1)
    assert data_files(pool) == []


EXIT_OPEN = r"""
import os, sys
p = os.path.join(sys.argv[1], "kept")
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"x" * 300000)
os.unlink(p)
print(os.pread(fd, 400000, 0).count(b"x"))  # the data, not zeros
os._exit(0)  # no close: the exit closes it
"""


@pytest.mark.hook
def test_exit_without_close_frees_an_unlinked_file(chfs_pool, tmp_path):
    assert under_hook(EXIT_OPEN, chfs_pool) == "300000"
    assert data_files(chfs_pool) == []
    assert on_chfuse(EXIT_OPEN, chfs_pool, tmp_path, while_mounted=lambda: wait_freed(chfs_pool)) == "300000"

