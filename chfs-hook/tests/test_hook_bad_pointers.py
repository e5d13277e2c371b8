"""A bad name pointer before the hook library is loaded (chfs-hook/loader/gate.c).

A hooked process loads the hook library only when it first names something under a mount point;
until then the loader's gate glances at every name a path call passes. It read them directly, so
open((char *)0xdeadc0de) or a name in a page the program had just unmapped killed the program with
SIGSEGV in a process that never touched CHFS, where the kernel answers EFAULT. The gate now checks
each page of a name first (process_vm_readv on itself, remembered per thread until a call that may
unmap memory): the kernel then answers the call.
"""
import subprocess
import sys

import pytest

from ci.testlib.chfs_pool import ChfsPool

pytestmark = pytest.mark.timeout(120)

SCRIPT = r"""
import ctypes, errno, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

def call(name, fn, *args):
    ctypes.set_errno(0)
    r = fn(*args)
    print(name, r, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))

bad = ctypes.c_void_p(0xdeadc0de)
call("open", libc.open, bad, 0)
call("mkdirat", libc.mkdirat, -100, bad, 0o755)
call("stat", libc.stat, ctypes.c_void_p(8), ctypes.create_string_buffer(256))
call("rename", libc.rename, ctypes.c_char_p(b"nothere-x"), bad)
page = libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
ctypes.memmove(page, b"nothere-y\0", 10)
call("open mapped", libc.open, ctypes.c_void_p(page), 0)
libc.munmap(ctypes.c_void_p(page), 4096)
call("open unmapped", libc.open, ctypes.c_void_p(page), 0)
print("hook loaded", "libchfs-hook.so" in open("/proc/self/maps").read())
"""


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with ChfsPool(servers=1, tmp=str(tmp_path_factory.mktemp("badptr"))) as p:
        yield p


def test_bad_name_pointers_before_the_hook_loads_give_efault(pool, tmp_path):
    bare = subprocess.run([sys.executable, "-c", SCRIPT], cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert bare.returncode == 0, bare.stderr
    want = bare.stdout
    r = subprocess.run(["chfs-run", "--", sys.executable, "-c", SCRIPT], cwd=str(tmp_path),
                       env={**pool.env, "CHFS_HOOK_EAGER": "0"}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout == want
    assert "open -1 EFAULT" in want and "open unmapped -1 EFAULT" in want
    assert "open mapped -1 ENOENT" in want and want.endswith("hook loaded False\n")
