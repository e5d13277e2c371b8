"""Names as long as Linux allows (NAME_MAX 255), on every access path, compared with tmpfs.

CHFS allowed 254 bytes per name (the old on-disk namespace prefixed every name with a byte), so
a 255-byte name that tmpfs, ext4 and the mount's own statfs/pathconf (NAME_MAX 255) accept gave
ENAMETOOLONG. The same script runs on tmpfs, on a chfuse mount and under the hook (chfs-run):
255 bytes create, stat, list, rename and unlink; 256 bytes are ENAMETOOLONG; pathconf says 255.
"""
import os
import subprocess
import tempfile

import pytest

from ci.testlib.fuse_mount import chfuse_mounted
from chfsutil import err_name, io

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool

SCRIPT = r"""
import errno, os, sys
base = sys.argv[1]
d = os.path.join(base, "names")
os.mkdir(d)
ok, long_ = "a" * 255, "b" * 256
def err(fn, *a):
    try:
        fn(*a)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
out = [
    err(lambda: open(os.path.join(d, ok), "w").write("x")),
    str(os.stat(os.path.join(d, ok)).st_size),
    str(ok in os.listdir(d)),
    err(os.mkdir, os.path.join(d, "D" * 255)),
    err(os.rename, os.path.join(d, ok), os.path.join(d, "c" * 255)),
    err(os.unlink, os.path.join(d, "c" * 255)),
    err(lambda: open(os.path.join(d, long_), "w")),
    err(os.mkdir, os.path.join(d, long_)),
    err(os.stat, os.path.join(d, long_)),
    str(os.pathconf(d, "PC_NAME_MAX")),
]
print(" ".join(out))
"""


def run_script(argv_prefix, base, env):
    r = subprocess.run(argv_prefix + ["/usr/bin/python3", "-c", SCRIPT, base], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def reference():
    base = tempfile.mkdtemp(prefix="names-ref-", dir="/dev/shm")
    try:
        return run_script([], base, dict(os.environ))
    finally:
        subprocess.run(["rm", "-rf", base], check=True)


@pytest.mark.hook
def test_255_byte_names_under_the_hook_as_on_tmpfs(chfs_pool):
    want = reference()
    assert want == "ok 1 True ok ok ok ENAMETOOLONG ENAMETOOLONG ENAMETOOLONG 255", want
    got = run_script(["chfs-run", "--"], "/chfs", dict(chfs_pool.env, CHFS_HOOK_LOCAL="0"))
    assert got == want


def test_255_byte_names_on_chfuse_as_on_tmpfs(chfs_pool, tmp_path):
    want = reference()
    mnt = str(tmp_path / "mnt")
    with chfuse_mounted(chfs_pool.env, mnt):
        assert run_script([], mnt, chfs_pool.env) == want


def test_255_byte_name_through_the_native_api(chfs_pool):
    name = "/n" + "x" * 254  # a 255-byte component
    io(chfs_pool, "put", name, 0, "create", input=b"hello")
    r = io(chfs_pool, "stat", name)
    assert r.returncode == 0
    r = io(chfs_pool, "put", "/" + "y" * 256, 0, "create", input=b"x", check=False)
    assert err_name(r) == "ENAMETOOLONG"
