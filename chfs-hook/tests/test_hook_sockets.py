"""Unix sockets named in CHFS under the hook (issue 16 item 3): bind() of a CHFS name makes a
socket entry in CHFS and binds a node-local shadow socket (chfs-hook/hook/sock.c); connect()
and sendto() of that name reach it, so two processes of one node talk through it, as they do
through a socket on NFS.

Each script runs on tmpfs (the reference) and under the hook with its names under /chfs; the
transcripts must be equal. On the previous build bind() of a CHFS name went to the kernel: an
absolute name failed (ENOENT: no /chfs directory on the local disk) and a relative one, with
the working directory under /chfs, made the socket in the process's real directory on the
local disk, where CHFS never saw it (the relative test checks that directory stays empty).
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from ci.testlib.chfs_pool import ChfsPool

# Parent binds and listens, a forked child connects and writes: two processes through one name.
STREAM = r"""
import errno, os, socket, stat, sys
d = os.path.join(sys.argv[1], "sio")
os.mkdir(d)
out = []
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
sp = os.path.join(d, "s")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sp)
srv.listen(1)
pid = os.fork()
if pid == 0:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sp)
    c.sendall(b"from the child")
    c.close()
    os._exit(0)
conn, _ = srv.accept()
out.append("got=%r" % conn.recv(100))
os.waitpid(pid, 0)
st = os.lstat(sp)
out.append("sock=%s mode=%o" % (stat.S_ISSOCK(st.st_mode), stat.S_IMODE(st.st_mode) & 0o700))
out.append("list=%s" % sorted(os.listdir(d)))
again = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out.append("bind-again=%s" % err(lambda: again.bind(sp)))
open(os.path.join(d, "plain"), "w").close()
out.append("connect-file=%s" % err(lambda: socket.socket(socket.AF_UNIX).connect(
    os.path.join(d, "plain"))))
out.append("connect-missing=%s" % err(lambda: socket.socket(socket.AF_UNIX).connect(
    os.path.join(d, "none"))))
out.append("bind-no-parent=%s" % err(lambda: socket.socket(socket.AF_UNIX).bind(
    os.path.join(d, "no", "s"))))
for x in (conn, srv, again):
    x.close()
out.append("connect-closed=%s" % err(lambda: socket.socket(socket.AF_UNIX).connect(sp)))
os.mknod(os.path.join(d, "m"), 0o600 | stat.S_IFSOCK)  # an entry nobody bound
out.append("connect-unbound=%s" % err(lambda: socket.socket(socket.AF_UNIX).connect(
    os.path.join(d, "m"))))
for n in ("s", "plain", "m"):
    os.unlink(os.path.join(d, n))
os.rmdir(d)
print("\n".join(out))
"""

# The same with relative names while the working directory is under the mount, and a datagram
# socket reached by sendto() (no connect).
RELATIVE = r"""
import os, socket, stat, sys
d = os.path.join(sys.argv[1], "rel")
os.mkdir(d)
os.chdir(d)
out = []
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind("s")
srv.listen(1)
dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
dg.bind("dg")
pid = os.fork()
if pid == 0:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect("s")
    c.sendall(b"relative")
    c.close()
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"datagram", "dg")
    os._exit(0)
conn, _ = srv.accept()
out.append("got=%r" % conn.recv(100))
out.append("dgram=%r" % dg.recv(100))
os.waitpid(pid, 0)
out.append("types=%s" % [stat.S_ISSOCK(os.lstat(n).st_mode) for n in ("s", "dg")])
out.append("list=%s" % sorted(os.listdir(".")))
for x in (conn, srv, dg):
    x.close()
os.unlink("s")
os.unlink("dg")
os.chdir("/")
os.rmdir(d)
print("\n".join(out))
"""


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with ChfsPool(servers=2, tmp=str(tmp_path_factory.mktemp("sockpool"))) as p:
        yield p


def run(argv, env, cwd):
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def on_tmpfs(script):
    base = tempfile.mkdtemp(prefix="sock-ref-", dir="/dev/shm")
    try:
        return run(["/usr/bin/python3", "-c", script, base], dict(os.environ), base)
    finally:
        shutil.rmtree(base)


def under_hook(script, pool, cwd, base):
    return run(["chfs-run", "--", "/usr/bin/python3", "-c", script, base],
               dict(pool.env, CHFS_HOOK_LOCAL="0"), cwd)


def test_socket_bound_in_chfs_connects_across_processes(pool, tmp_path):
    want = on_tmpfs(STREAM)
    assert "got=b'from the child'" in want and "bind-again=EADDRINUSE" in want, want
    assert "connect-closed=ECONNREFUSED" in want, want
    assert under_hook(STREAM, pool, str(tmp_path), "/chfs") == want


def test_relative_socket_names_stay_in_chfs(pool, tmp_path):
    want = on_tmpfs(RELATIVE)
    assert "got=b'relative'" in want and "dgram=b'datagram'" in want, want
    real = tmp_path / "realcwd"
    real.mkdir()
    assert under_hook(RELATIVE, pool, str(real), "/chfs") == want
    assert os.listdir(real) == []  # nothing made on the local disk on the program's behalf
