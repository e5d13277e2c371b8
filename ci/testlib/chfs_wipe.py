"""Empty a live CHFS pool's namespace in one client process (ChfsPool.wipe runs this file).

    python3 chfs_wipe.py        # with CHFS_SERVER etc. in the environment

Removes every entry under "/" through libchfs (ctypes): symlinks and files with chfs_unlink,
directories depth first with chfs_rmdir, then checks that "/" lists nothing. Exit status 0 only
if the pool is empty at the end; anything else (an entry that cannot be removed, a server that
does not answer, libchfs that does not load) prints one line and exits 1, and the caller then
starts a new pool instead of lending this one again. One process: a chfs-io per entry would pay
libfabric's ~0.2 s load each time.
"""
import ctypes
import os
import stat
import sys

FILLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                          ctypes.c_long)


def main():
    lib = ctypes.CDLL("libchfs.so.3", use_errno=True)
    if lib.chfs_init(None) != 0:
        sys.exit(f"chfs_wipe: chfs_init: {os.strerror(ctypes.get_errno())}")
    st = ctypes.create_string_buffer(256)  # struct stat (144 bytes on x86-64)
    mode_of = stat.S_IFMT

    def names(path):
        got = []

        def fill(_buf, name, _st, _off):
            if name not in (b".", b".."):
                got.append(name)
            return 0
        cb = FILLER(fill)
        if lib.chfs_readdir(path, None, cb) != 0:
            sys.exit(f"chfs_wipe: readdir {path.decode()}: {os.strerror(ctypes.get_errno())}")
        return got

    def remove_below(path):
        for name in names(path):
            child = (path.rstrip(b"/") + b"/" + name)
            if lib.chfs_lstat(child, st) != 0:
                sys.exit(f"chfs_wipe: lstat {child.decode()}: {os.strerror(ctypes.get_errno())}")
            mode = int.from_bytes(st.raw[24:28], "little")  # st_mode on x86-64
            if mode_of(mode) == stat.S_IFDIR:
                remove_below(child)
                rc = lib.chfs_rmdir(child)
            else:
                rc = lib.chfs_unlink(child)
            if rc != 0:
                sys.exit(f"chfs_wipe: remove {child.decode()}: {os.strerror(ctypes.get_errno())}")

    remove_below(b"/")
    left = names(b"/")
    if left:
        sys.exit(f"chfs_wipe: still in /: {left[:5]}")
    lib.chfs_term()


if __name__ == "__main__":
    main()
