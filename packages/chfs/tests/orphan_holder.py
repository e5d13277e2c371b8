#!/usr/bin/env python3
"""orphan_holder — a libchfs client (ctypes) that keeps an unlinked file open, for the tests of
files that outlive their name across processes and nodes (test_orphan_lease.py).

    orphan_holder.py PATH SIZE [--no-unlink]

Creates PATH, writes SIZE bytes of a fixed pattern, unlinks it (unless --no-unlink) and prints
"held". Then it answers commands on stdin, one a line:
    check      -> "ok N" if all N bytes read back through the descriptor equal the pattern,
                  else "bad ..."
    append N   -> writes N more bytes of the pattern at the end: "appended"
    stat       -> "stat NLINK SIZE" from chfs_fstat of the descriptor (x86_64 struct stat)
    unlink P   -> unlinks P (another name of the file, say) while the descriptor stays open:
                  "unlinked" or "error ERRNO"
    fork       -> a child closes its copy of the descriptor and ends with chfs_term (it must
                  neither remove the data nor end the parent's lease): "forked STATUS"
    close      -> closes the descriptor (the last one: an orphan's data go), prints "closed"
    term_nosync -> chfs_term_without_sync with the descriptor still open (the end of a process
                  that skips the flush), then "tasks NAME,...": the names of the threads left
                  (a thread still finishing its exit in the kernel is waited for, 2 s at most)
    tasks      -> "tasks NAME,...": the names of this process's threads now
    quit       -> closes the descriptor and calls chfs_term (the normal end), prints "done"
End of input is "quit". A test kills it with SIGKILL to play a client that dies.
"""
import ctypes
import os
import sys
import time

CHUNK = 1 << 20


def pattern(size):
    block = bytes((i * 7 + 3) & 0xFF for i in range(4096))
    return (block * (size // len(block) + 1))[:size]


def task_names():
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass  # it ended meanwhile
    return ",".join(sorted(names))


def main():
    path, size = sys.argv[1].encode(), int(sys.argv[2])
    unlink = "--no-unlink" not in sys.argv[3:]
    lib = ctypes.CDLL("libchfs.so.3", use_errno=True)
    lib.chfs_create.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_uint]
    lib.chfs_pwrite.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
    lib.chfs_pwrite.restype = ctypes.c_ssize_t
    lib.chfs_pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
    lib.chfs_pread.restype = ctypes.c_ssize_t
    lib.chfs_unlink.argtypes = [ctypes.c_char_p]

    def fail(what):
        e = ctypes.get_errno()
        sys.exit(f"orphan_holder: {what}: {os.strerror(e)}")

    if lib.chfs_init(None) != 0:
        fail("chfs_init")
    data = pattern(size)
    fd = lib.chfs_create(path, os.O_RDWR | os.O_TRUNC, 0o644)
    if fd < 0:
        fail(f"create {sys.argv[1]}")
    for off in range(0, size, CHUNK):
        piece = data[off:off + CHUNK]
        if lib.chfs_pwrite(fd, piece, len(piece), off) != len(piece):
            fail("pwrite")
    if lib.chfs_fsync(fd) != 0:
        fail("fsync")
    if unlink and lib.chfs_unlink(path) != 0:
        fail(f"unlink {sys.argv[1]}")
    print("held", flush=True)
    buf = ctypes.create_string_buffer(CHUNK)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            break
        if cmd.startswith("unlink "):
            ok = lib.chfs_unlink(cmd[7:].encode()) == 0
            print("unlinked" if ok else f"error {ctypes.get_errno()}", flush=True)
        if cmd == "fork":
            pid = os.fork()
            if pid == 0:
                lib.chfs_close(fd)
                lib.chfs_term()
                os._exit(0)
            print(f"forked {os.waitpid(pid, 0)[1]}", flush=True)
        if cmd.startswith("append "):
            more = int(cmd.split()[1])
            data = pattern(size + more)
            ok = lib.chfs_pwrite(fd, data[size:], more, size) == more
            size += more
            print("appended" if ok else f"error {ctypes.get_errno()}", flush=True)
        if cmd == "stat":
            st = ctypes.create_string_buffer(144)
            if lib.chfs_fstat(fd, st) != 0:
                print(f"error {ctypes.get_errno()}", flush=True)
            else:
                nlink, fsize = int.from_bytes(st.raw[16:24], "little"), int.from_bytes(st.raw[48:56], "little")
                print(f"stat {nlink} {fsize}", flush=True)
        if cmd == "term_nosync":
            lib.chfs_term_without_sync()
            # A thread that has returned stays listed in /proc until the kernel has finished its
            # exit (after libchfs stopped waiting for it): a moment, so look again for up to 2 s.
            end = time.monotonic() + 2
            while "chfs-lease" in task_names().split(",") and time.monotonic() < end:
                time.sleep(0.01)
            print(f"tasks {task_names()}", flush=True)
            return
        if cmd == "tasks":
            print(f"tasks {task_names()}", flush=True)
        if cmd == "close":
            lib.chfs_close(fd)
            fd = -1
            print("closed", flush=True)
        if cmd == "check":
            got = bytearray()
            while True:
                n = lib.chfs_pread(fd, buf, CHUNK, len(got))
                if n <= 0:
                    break
                got += buf.raw[:n]
            print(f"ok {len(got)}" if bytes(got) == data else f"bad {len(got)} of {size}", flush=True)
    if fd >= 0:
        lib.chfs_close(fd)
    lib.chfs_term()
    print("done", flush=True)


if __name__ == "__main__":
    main()
