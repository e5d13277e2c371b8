"""FIFOs and sockets (issue 16 item 3): mkfifo and mknod(S_IFIFO / S_IFSOCK) make CHFS entries
that stat, list, rename and unlink as on tmpfs; on a chfuse mount the kernel runs them, so a
FIFO carries bytes between two processes and a Unix socket can be bound and connected.

On the previous build mkfifo/mknod gave ENOSYS on the mount and EPERM under the hook. The
entry script, the FIFO I/O script and the socket script run on all three (under the hook a CHFS
FIFO opens as a node-local shadow FIFO, chfs-hook/hook/fifo.c, and a socket bound to a CHFS name
binds a node-local shadow socket, chfs-hook/hook/sock.c; chfs-hook/tests/test_hook_sockets.py
covers more of it).
"""
import pytest

from tri_path import on_chfuse, on_tmpfs, under_hook

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool

ENTRIES = r"""
import errno, os, stat, sys
d = os.path.join(sys.argv[1], "sp")
os.mkdir(d)
f, s = os.path.join(d, "fifo"), os.path.join(d, "sock")
os.mkfifo(f, 0o640)
os.mknod(s, 0o600 | stat.S_IFSOCK)
out = []
for p, t in ((f, stat.S_IFIFO), (s, stat.S_IFSOCK)):
    st = os.lstat(p)
    out.append("%s type=%s mode=%o size=%d" % (os.path.basename(p), stat.S_IFMT(st.st_mode) == t,
                                               stat.S_IMODE(st.st_mode), st.st_size))
out.append("list=%s" % sorted(os.listdir(d)))
try:
    os.open(s, os.O_RDONLY)
except OSError as e:
    out.append("open-sock=%s" % errno.errorcode[e.errno])
try:
    os.mkfifo(f)
except OSError as e:
    out.append("again=%s" % errno.errorcode[e.errno])
os.rename(f, f + "2")
out.append("renamed=%s" % stat.S_ISFIFO(os.lstat(f + "2").st_mode))
os.unlink(f + "2")
os.unlink(s)
os.rmdir(d)
print("\n".join(out))
"""

FIFO_IO = r"""
import os, sys
d = os.path.join(sys.argv[1], "fio")
os.mkdir(d)
f = os.path.join(d, "fifo")
os.mkfifo(f)
pid = os.fork()
if pid == 0:
    w = os.open(f, os.O_WRONLY)
    os.write(w, b"through the fifo")
    os._exit(0)
r = os.open(f, os.O_RDONLY)
data = os.read(r, 100)
os.close(r)
os.waitpid(pid, 0)
r = os.open(f, os.O_RDONLY | os.O_NONBLOCK)  # no writer: opens, reads nothing
out = ["fifo=%r" % data, "nonblock=%r" % os.read(r, 10)]
os.close(r)
os.unlink(f)
os.rmdir(d)
print("\n".join(out))
"""

SOCKET_IO = r"""
import os, socket, sys
d = os.path.join(sys.argv[1], "sio")
os.mkdir(d)
out = []
sp = os.path.join(d, "s")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sp)
srv.listen(1)
cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cli.connect(sp)
conn, _ = srv.accept()
cli.sendall(b"through the socket")
out.append("socket=%r" % conn.recv(100))
for x in (conn, cli, srv):
    x.close()
out.append("list=%s" % sorted(os.listdir(d)))
os.unlink(sp)
os.rmdir(d)
print("\n".join(out))
"""

@pytest.mark.hook
def test_fifo_and_socket_entries_and_io_under_the_hook_as_on_tmpfs(chfs_pool):
    want = on_tmpfs(ENTRIES)
    assert "fifo type=True mode=640" in want and "again=EEXIST" in want, want
    assert under_hook(ENTRIES, chfs_pool) == want
    want_io = on_tmpfs(FIFO_IO)
    assert "fifo=b'through the fifo'" in want_io, want_io
    assert under_hook(FIFO_IO, chfs_pool) == want_io  # a node-local shadow FIFO (hook/fifo.c)
    want_sock = on_tmpfs(SOCKET_IO)
    assert under_hook(SOCKET_IO, chfs_pool) == want_sock  # a shadow socket (hook/sock.c)


def test_fifo_and_socket_on_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    want = on_tmpfs(ENTRIES)
    assert on_chfuse(ENTRIES, chfs_pool, tmp_path) == want
    want_io = on_tmpfs(FIFO_IO) + "\n" + on_tmpfs(SOCKET_IO)
    assert "fifo=b'through the fifo'" in want_io and "list=['s']" in want_io, want_io
    got = on_chfuse(FIFO_IO, chfs_pool, tmp_path) + "\n" + on_chfuse(SOCKET_IO, chfs_pool, tmp_path)
    assert got == want_io


# Device nodes (issue 16 item 3): mknod(S_IFCHR / S_IFBLK) by root makes an entry with its device
# number (large majors and minors too), which stat reports (on a chfuse mount the kernel opens
# the device itself; the hook and libchfs do not: ENXIO). A second user's EPERM (no CAP_MKNOD) is
# the conformance table's case mknod-char. On the previous build every device mknod gave EPERM.
DEVICES = r"""
import os, stat, sys
d = os.path.join(sys.argv[1], "dev%d" % os.getpid())  # the hook and the mount share the pool
os.mkdir(d)
out = []
for name, kind, dev in (("null", stat.S_IFCHR, os.makedev(1, 3)), ("blk", stat.S_IFBLK, os.makedev(259, 70000)),
                        ("big", stat.S_IFCHR, os.makedev(4095, (1 << 20) - 1))):
    p = os.path.join(d, name)
    os.mknod(p, kind | 0o666, dev)
    st = os.lstat(p)
    out.append("%s type=%s rdev=%d:%d mode=%o" % (name, stat.S_IFMT(st.st_mode) == kind, os.major(st.st_rdev),
                                                  os.minor(st.st_rdev), stat.S_IMODE(st.st_mode)))
out.append("list=%s" % sorted(os.listdir(d)))
for name in ("null", "blk", "big"):
    os.unlink(os.path.join(d, name))
os.rmdir(d)
print("\n".join(out))
"""


@pytest.mark.hook
def test_device_nodes_under_the_hook_and_on_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    want = on_tmpfs(DEVICES)
    assert "big type=True rdev=4095:1048575" in want, want
    assert on_chfuse(DEVICES, chfs_pool, tmp_path) == want
    assert under_hook(DEVICES, chfs_pool) == want
