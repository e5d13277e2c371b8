"""The loader's cache of syscall sites per mapped file (loader/rewrite_cache.c).

A library whose only `syscall` instruction opens a path with a raw system call (no libc) shows
whether its site was rewritten: rewritten, the open of /chfs/f reaches CHFS and returns the
file's bytes; left alone, the kernel answers ENOENT. The library is then changed in place — same
inode, same size, mtime set back to the old value, the site moved — so neither its name nor its
size nor its mtime tell the cached offsets are stale (its ctime does, and the bytes around the
recorded site do: tests/site_hash_test.c): the new library must be scanned again, not patched
from the cache."""
import os
import subprocess

import pytest

LIB_SRC = r"""
#include <fcntl.h>
#include <sys/syscall.h>
long raw_open(const char *path)
{
	long ret;
	register long r10 __asm__("r10") = 0;
	__asm__ volatile(PAD "syscall"
	                 : "=a"(ret)
	                 : "0"((long)SYS_openat), "D"((long)AT_FDCWD), "S"(path), "d"((long)O_RDONLY), "r"(r10)
	                 : "rcx", "r11", "memory");
	return ret;
}
"""

PROG_SRC = r"""
#include <stdio.h>
#include <unistd.h>
long raw_open(const char *path);
int main(int argc, char **argv)
{
	long fd = raw_open(argv[1]);
	if (fd < 0) {
		printf("open failed %ld\n", fd);
		return 1;
	}
	char buf[64];
	ssize_t n = read((int)fd, buf, sizeof buf);
	printf("read %.*s\n", (int)(n > 0 ? n : 0), buf);
	return 0;
}
"""


def build_lib(tmp, pad, out):
    src = tmp / f"site{len(pad)}.c"
    src.write_text(f'#define PAD "{pad}"\n' + LIB_SRC)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(out), str(src)], check=True,
                   timeout=60)


@pytest.fixture
def siteprog(tmp_path):
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    build_lib(tmp_path, "", lib_dir / "libsite.so")
    build_lib(tmp_path, "nop\\n" * 48, tmp_path / "libsite-moved.so")
    # Both versions padded to one size (trailing bytes do not matter to an ELF file), so the
    # changed file keeps the old one's size.
    a, b = (lib_dir / "libsite.so").read_bytes(), (tmp_path / "libsite-moved.so").read_bytes()
    size = max(len(a), len(b))
    (lib_dir / "libsite.so").write_bytes(a.ljust(size, b"\0"))
    (tmp_path / "libsite-moved.so").write_bytes(b.ljust(size, b"\0"))
    prog = tmp_path / "siteprog"
    (tmp_path / "prog.c").write_text(PROG_SRC)
    subprocess.run(["gcc", "-O1", "-o", str(prog), str(tmp_path / "prog.c"), f"-L{lib_dir}", "-lsite",
                    f"-Wl,-rpath,{lib_dir}"], check=True, timeout=60)
    return prog, lib_dir / "libsite.so", tmp_path / "libsite-moved.so"


@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_changed_library_is_rewritten_again_not_served_from_cache(chfs_pool, siteprog, tmp_path):
    prog, lib, moved = siteprog
    chfs_pool.run(["chfs-io", "put", "/f", "0", "create"], input="payload")
    cache = tmp_path / "hookcache"
    cache.mkdir(mode=0o700)
    env = dict(chfs_pool.env, CHFS_HOOK_CACHE=str(cache))

    def run():
        return subprocess.run(["chfs-run", "--", str(prog), "/chfs/f"], env=env, capture_output=True,
                              text=True, timeout=60)

    for attempt in ("scan", "cached"):
        r = run()
        assert r.stdout.strip() == "read payload", f"{attempt}: {r.stdout} {r.stderr}"
    entries = set(os.listdir(cache))
    assert entries, "no cache entries written"

    # Change the library in place: same inode, same size, old mtime; the site moves.
    old = os.stat(lib)
    with open(lib, "r+b") as f:
        f.write(moved.read_bytes())
    os.utime(lib, ns=(old.st_atime_ns, old.st_mtime_ns))
    new = os.stat(lib)
    assert (new.st_ino, new.st_size, new.st_mtime_ns) == (old.st_ino, old.st_size, old.st_mtime_ns)
    r = run()
    assert r.stdout.strip() == "read payload", f"changed library: {r.stdout} {r.stderr}"


@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_cache_directory_open_to_others_is_not_used(chfs_pool, siteprog, tmp_path):
    prog, _, _ = siteprog
    chfs_pool.run(["chfs-io", "put", "/f", "0", "create"], input="payload")
    cache = tmp_path / "opencache"
    cache.mkdir()
    os.chmod(cache, 0o755)
    env = dict(chfs_pool.env, CHFS_HOOK_CACHE=str(cache))
    r = subprocess.run(["chfs-run", "--", str(prog), "/chfs/f"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.strip() == "read payload", r.stderr
    assert os.listdir(cache) == [], "entries were written into a directory open to others"
