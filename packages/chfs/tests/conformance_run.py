"""The POSIX conformance table (issue 16 item 6): every case run on one access path, as one user.

Usage: conformance_run.py BASE OUTSIDE [CASE...]
  BASE     an empty directory on the path under test (a tmpfs directory — the reference —, a
           chfuse mount, or /chfs/... under chfs-run); each case runs in its own BASE/<case>.
  OUTSIDE  an empty directory on another file system (for EXDEV).
Prints one JSON object per case: {"case": id, "steps": ["op args -> result", ...]}. A result is
"ok" plus what the step reads back (type, size, nlink, data, whether a time moved), or the errno
name, or "crash SIGSEGV" (a step that takes bad pointers runs in a forked child). Nothing here
reads inode numbers or absolute times, so the transcripts of every path compare line by line.
Standard library only: it runs as any user and under the hook.
"""
import ctypes
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time

# (case, [(op, args...), ...]). Paths are relative to the case's directory; "@out/x" is in OUTSIDE.
CASES = [
    # errno parity (item 6)
    ("eexist-mkdir", [("mkdir", "d"), ("mkdir", "d")]),
    ("eexist-excl", [("create", "f", "x"), ("open", "f", "wr,creat,excl")]),
    ("eexist-symlink", [("create", "f", "x"), ("symlink", "t", "f")]),
    ("enotdir-component", [("create", "f", "x"), ("open", "f/x", "rd"), ("mkdir", "f/x")]),
    ("enotdir-trailing-slash", [("create", "f", "x"), ("stat", "f/"), ("open", "f/", "rd")]),
    ("enotdir-rmdir-file", [("create", "f", "x"), ("rmdir", "f")]),
    ("enotdir-o-directory", [("create", "f", "x"), ("open", "f", "rd,dir")]),
    ("eloop", [("symlink", "b", "a"), ("symlink", "a", "b"), ("open", "a", "rd"), ("stat", "a"),
               ("lstat", "a")]),
    ("eloop-nofollow", [("create", "f", "x"), ("symlink", "f", "l"), ("open", "l", "rd,nofollow")]),
    ("einval-rename-into-self", [("mkdir", "d"), ("mkdir", "d/s"), ("rename", "d", "d/s/x")]),
    ("einval-readlink-file", [("create", "f", "x"), ("readlink", "f")]),
    ("enotempty-rmdir", [("mkdir", "d"), ("create", "d/f", "x"), ("rmdir", "d")]),
    ("enotempty-rename", [("mkdir", "a"), ("mkdir", "b"), ("create", "b/f", "x"),
                          ("rename", "a", "b")]),
    ("eisdir-open-write", [("mkdir", "d"), ("open", "d", "wr")]),
    ("eisdir-unlink", [("mkdir", "d"), ("unlink", "d")]),
    ("eisdir-rename-file-over-dir", [("mkdir", "d"), ("create", "f", "x"), ("rename", "f", "d")]),
    ("enotdir-rename-dir-over-file", [("mkdir", "d"), ("create", "f", "x"), ("rename", "d", "f")]),
    ("enoent", [("open", "nothere", "rd"), ("open", "", "rd"), ("mkdir", "no/d"),
                ("unlink", "nothere"), ("rename", "nothere", "x")]),
    ("exdev-rename-out", [("create", "f", "x"), ("rename", "f", "@out/f")]),
    ("exdev-link-out", [("create", "f", "x"), ("link", "f", "@out/f")]),
    ("rename-over-file", [("create", "a", "A"), ("create", "b", "B"), ("rename", "a", "b"),
                          ("read", "b"), ("stat", "a")]),
    ("rename-dir-over-empty-dir", [("mkdir", "a"), ("mkdir", "b"), ("rename", "a", "b"),
                                   ("stat", "b"), ("stat", "a")]),
    ("rename-nonempty-dir", [("mkdir", "a"), ("create", "a/f", "x"), ("rename", "a", "c"),
                             ("read", "c/f")]),
    ("efault", [("efault-open",), ("efault-stat",), ("efault-mkdir",), ("efault-null-open",),
                ("efault-getcwd",), ("efault-getdents",)]),
    # names (item 5)
    ("name-max", [("create", "n" * 255, "x"), ("stat", "n" * 255), ("create", "m" * 256, "x")]),
    ("relative-long-path", [("deep", 30), ("create-rel", 30, 3900), ("stat-rel", 30, 3900)]),
    ("beyond-4k-from-the-root", [("walk-down", 40)]),
    ("relative-from-outside", [("mkdir", "d"), ("create", "d/f", "data"), ("from-outside", "d/f")]),
    # hard links (item 2)
    ("link-basic", [("create", "f", "data"), ("link", "f", "g"), ("stat", "f"), ("stat", "g"),
                    ("append", "g", "+more"), ("read", "f"), ("unlink", "f"), ("read", "g"),
                    ("stat", "g")]),
    ("link-across-dirs", [("mkdir", "a"), ("mkdir", "b"), ("create", "a/f", "data"),
                          ("link", "a/f", "b/g"), ("stat", "b/g"), ("rename", "b/g", "a/h"),
                          ("stat", "a/f")]),
    ("link-errors", [("mkdir", "d"), ("link", "d", "e"), ("create", "f", "x"),
                     ("create", "g", "y"), ("link", "f", "g"), ("link", "nothere", "h")]),
    ("rename-over-link", [("create", "f", "F"), ("link", "f", "g"), ("create", "h", "H"),
                          ("rename", "h", "g"), ("stat", "f"), ("read", "g")]),
    # files that outlive their name (item 2)
    ("open-unlinked", [("create", "f", "data"), ("unlinked-io", "f")]),
    ("rename-over-open", [("create", "f", "old"), ("create", "g", "new"), ("renamed-over-io", "f", "g")]),
    # ... also when another process takes the name away (the hook: another client; open leases)
    ("unlinked-by-other-process", [("create", "f", "data"), ("other-removes-io", "f", "unlink")]),
    ("renamed-over-by-other-process", [("create", "f", "old"), ("create", "g", "new"),
                                       ("other-removes-io", "f", "g")]),
    # ... and a working directory or directory descriptor inside a directory that another
    # process renames (the kernel's follow the directory; the hook's are names: hook/follow.c)
    ("dir-renamed-by-other-process", [("mkdir", "a"), ("mkdir", "a/s"), ("create", "a/s/f", "F"),
                                      ("other-renames-base", "a", "b", "a/s", 1.1)]),
    # ... used in the same second as this process last looked the directory up
    ("dir-renamed-by-other-process-at-once",
     [("mkdir", "a"), ("mkdir", "a/s"), ("create", "a/s/f", "F"),
      ("other-renames-base", "a", "b", "a/s", 0)]),
    # FIFOs, sockets, devices (item 3)
    ("mkfifo", [("mkfifo", "p"), ("lstat", "p"), ("unlink", "p")]),
    ("mknod-socket", [("mknod", "s", "sock"), ("lstat", "s")]),
    ("mknod-char", [("mknod", "c", "chr"), ("lstat", "c")]),
    # times and counts (item 4)
    ("dir-nlink", [("mkdir", "d"), ("stat", "d"), ("mkdir", "d/a"), ("mkdir", "d/b"),
                   ("create", "d/f", "x"), ("stat", "d"), ("rmdir", "d/a"), ("stat", "d")]),
    ("parent-times", [("mkdir", "d"), ("ptimes", "d", "create", "d/f"),
                      ("ptimes", "d", "mkdir", "d/s"), ("ptimes", "d", "symlink", "d/l"),
                      ("ptimes", "d", "rename", "d/g"), ("ptimes", "d", "unlink", "d/g"),
                      ("ptimes", "d", "rmdir", "d/s")]),
    ("parent-times-link", [("mkdir", "d"), ("create", "d/f", "x"), ("ptimes", "d", "link", "d/h")]),
    ("ctime", [("create", "f", "x"), ("ctime", "f", "chmod"), ("ctime", "f", "chown"),
               ("ctime", "f", "rename")]),
    ("ctime-link", [("create", "f", "x"), ("ctime", "f", "link")]),
    ("utime-symlink-nofollow", [("create", "f", "x"), ("symlink", "f", "l"), ("utime-nofollow", "l"),
                                ("mtime", "l", "lstat"), ("mtime", "f", "stat")]),
]

FLAGS = {"rd": os.O_RDONLY, "wr": os.O_WRONLY, "rdwr": os.O_RDWR, "creat": os.O_CREAT,
         "excl": os.O_EXCL, "trunc": os.O_TRUNC, "dir": os.O_DIRECTORY, "nofollow": os.O_NOFOLLOW}
TYPES = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink", stat.S_IFIFO: "fifo",
         stat.S_IFSOCK: "socket", stat.S_IFCHR: "chr", stat.S_IFBLK: "blk"}
OLD = 1_000_000_000  # a parent's times are set here before an operation that must move them
libc = ctypes.CDLL(None, use_errno=True)


def describe(st):
    size = st.st_size if stat.S_ISREG(st.st_mode) else "-"
    nlink = st.st_nlink if not stat.S_ISLNK(st.st_mode) else "-"
    return f"{TYPES.get(stat.S_IFMT(st.st_mode), '?')} size={size} nlink={nlink}"


def write_file(p, data, flags=os.O_CREAT | os.O_EXCL | os.O_WRONLY):
    fd = os.open(p, flags, 0o644)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def write_file_at(dirfd, name, data):
    fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=dirfd)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def in_child(fn):
    """Runs fn in a forked child: a crash (a hook that dereferences a bad pointer) is a result,
    not the end of the transcript. fn returns an errno (0 = success)."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(fn())
        except BaseException:
            os._exit(255)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"crash {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.WEXITSTATUS(status)
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))


def raw(nr, *args):
    def call():
        r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        return ctypes.get_errno() if r < 0 else 0
    return in_child(call)


SYS = {"openat": 257, "newfstatat": 262, "mkdirat": 258}
AT_FDCWD = -100
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]


def bad_pointers():
    """Two addresses the kernel answers EFAULT for: a page mapped PROT_NONE, and the first address
    above user space (never mapped; an unmapped page could be mapped again by any allocation).
    (Not a low constant such as 1: the hook's trampoline lives in page 0.)"""
    prot_none = libc.mmap(None, 4096, 0, 0x22, -1, 0)  # MAP_PRIVATE | MAP_ANONYMOUS
    return prot_none, 1 << 47


BAD, BAD_GONE = bad_pointers()


def long_names(depth, total):
    """A chain of depth directories and a relative path of about total bytes inside it."""
    comp = "c" * 120
    rel = "/".join([comp] * depth)
    name = "f" * max(1, min(255, total - len(rel) - 1))
    return rel, name


def from_outside(path):
    """Read path by a relative name from the directory above the file system holding it (the
    parent of its mount point: "chfs/case/d/f"), with the cwd there and with a descriptor of it;
    "/" when the file system is the root one."""
    top = path
    while os.path.dirname(top) != top and os.stat(os.path.dirname(top)).st_dev == os.stat(path).st_dev:
        top = os.path.dirname(top)
    parent = os.path.dirname(top)
    rel = os.path.relpath(path, parent)
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.chdir(parent)
        with open(rel, "rb") as f:
            by_cwd = f.read().decode()
        with open(os.open(rel, os.O_RDONLY, dir_fd=pfd), "rb") as f:
            by_fd = f.read().decode()
        return f"{by_cwd} {by_fd} {os.path.isdir(os.path.dirname(rel))}"
    finally:
        os.fchdir(here)
        os.close(here)
        os.close(pfd)


def step(base, outside, op, *a):
    def P(rel):
        return os.path.join(outside, rel[5:]) if rel.startswith("@out/") else os.path.join(base, rel)

    if op == "mkdir":
        os.mkdir(P(a[0]))
        return ""
    if op == "create":
        write_file(P(a[0]), a[1])
        return ""
    if op == "append":
        write_file(P(a[0]), a[1], os.O_WRONLY | os.O_APPEND)
        return ""
    if op == "read":
        with open(P(a[0]), "rb") as f:
            return f.read().decode()
    if op == "open":
        flags = 0
        for f in a[1].split(","):
            flags |= FLAGS[f]
        os.close(os.open(P(a[0]) if a[0] else "", flags, 0o644))
        return ""
    if op in ("stat", "lstat"):
        return describe(os.stat(P(a[0])) if op == "stat" else os.lstat(P(a[0])))
    if op == "symlink":
        os.symlink(a[0], P(a[1]))
        return ""
    if op == "link":
        os.link(P(a[0]), P(a[1]))
        return ""
    if op == "rename":
        os.rename(P(a[0]), P(a[1]))
        return ""
    if op == "unlink":
        os.unlink(P(a[0]))
        return ""
    if op == "rmdir":
        os.rmdir(P(a[0]))
        return ""
    if op == "readlink":
        return os.readlink(P(a[0]))
    if op == "mkfifo":
        os.mkfifo(P(a[0]), 0o644)
        return ""
    if op == "mknod":
        kind = {"sock": stat.S_IFSOCK, "chr": stat.S_IFCHR}[a[1]]
        os.mknod(P(a[0]), kind | 0o644, os.makedev(1, 3) if a[1] == "chr" else 0)
        return ""
    if op == "efault-open":
        return f"{raw(SYS['openat'], AT_FDCWD, BAD, os.O_RDONLY)} {raw(SYS['openat'], AT_FDCWD, BAD_GONE, 0)}"
    if op == "efault-null-open":
        return raw(SYS["openat"], AT_FDCWD, 0, os.O_RDONLY)
    if op == "efault-stat":
        path = ctypes.create_string_buffer(P("x").encode())
        write_file(P("x"), "x")
        return f"{raw(SYS['newfstatat'], AT_FDCWD, ctypes.addressof(path), BAD, 0)} " \
               f"{raw(SYS['newfstatat'], AT_FDCWD, BAD, ctypes.addressof(path), 0)}"
    if op == "efault-getcwd":  # with the working directory in the case's (CHFS) directory
        def call():
            os.chdir(base)
            r = libc.syscall(ctypes.c_long(79), ctypes.c_long(BAD), ctypes.c_long(4096))  # getcwd
            return ctypes.get_errno() if r < 0 else 0
        return in_child(call)
    if op == "efault-getdents":  # the case's directory (it holds x) listed into a bad buffer
        def call():
            fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
            r = libc.syscall(ctypes.c_long(217), ctypes.c_long(fd), ctypes.c_long(BAD),
                             ctypes.c_long(4096))  # getdents64
            return ctypes.get_errno() if r < 0 else 0
        return in_child(call)
    if op == "efault-mkdir":
        return raw(SYS["mkdirat"], AT_FDCWD, BAD_GONE, 0o755)
    if op == "deep":
        rel, _ = long_names(a[0], 0)
        os.makedirs(P(rel))
        return ""
    if op in ("create-rel", "stat-rel"):
        rel, name = long_names(a[0], a[1])
        top = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if op == "create-rel":
                os.close(os.open(rel + "/" + name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=top))
                return f"len={len(rel) + 1 + len(name)}"
            return describe(os.stat(rel + "/" + name, dir_fd=top))
        finally:
            os.close(top)
    if op == "from-outside":  # a relative name from the directory that holds the file system
        return from_outside(P(a[0]))
    if op == "walk-down":  # every argument short, the name from the top longer than 4,095 bytes
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        depth = 0
        try:
            for _ in range(a[0]):
                comp = "w" * 120
                os.mkdir(comp, dir_fd=fd)
                nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd, depth = nfd, depth + len(comp) + 1
            write_file_at(fd, "leaf", "deep")
            with os.fdopen(os.open("leaf", os.O_RDONLY, dir_fd=fd), "rb") as f:
                return f"bytes-from-top={depth + 5} read={f.read().decode()}"
        finally:
            os.close(fd)
    if op == "unlinked-io":
        fd = os.open(P(a[0]), os.O_RDWR)
        try:
            os.unlink(P(a[0]))
            os.pwrite(fd, b"DATA", 0)
            got = os.pread(fd, 100, 0).decode()
            st = os.fstat(fd)
            gone = not os.path.lexists(P(a[0]))
            return f"read={got} nlink={st.st_nlink} size={st.st_size} name-gone={gone}"
        finally:
            os.close(fd)
    if op == "other-removes-io":  # a child process (python, hooked as we are) unlinks or renames
        fd = os.open(P(a[0]), os.O_RDWR)
        try:
            if a[1] == "unlink":
                code, argv = "import os, sys; os.unlink(sys.argv[1])", [P(a[0])]
            else:
                code, argv = "import os, sys; os.rename(sys.argv[1], sys.argv[2])", [P(a[1]), P(a[0])]
            subprocess.run([sys.executable, "-c", code] + argv, check=True, timeout=60)
            had = os.pread(fd, 100, 0).decode()
            os.pwrite(fd, b"+MORE", len(had))
            got = os.pread(fd, 100, 0).decode()
            st = os.fstat(fd)
            return f"read={had} then={got} nlink={st.st_nlink} size={st.st_size}"
        finally:
            os.close(fd)
    if op == "other-renames-base":  # a child renames a[0] -> a[1] while we are inside a[2];
        # we go on a[3] seconds later
        dirfd, home = os.open(P(a[2]), os.O_RDONLY | os.O_DIRECTORY), os.open(".", os.O_RDONLY)
        try:
            os.chdir(P(a[2]))
            ino = os.fstat(dirfd).st_ino
            code = "import os, sys; os.rename(sys.argv[1], sys.argv[2])"
            subprocess.run([sys.executable, "-c", code, P(a[0]), P(a[1])], check=True, timeout=60)
            time.sleep(a[3])

            def res(fn):
                try:
                    return fn()
                except OSError as e:
                    return errno.errorcode.get(e.errno, str(e.errno))
            moved = os.path.join(a[1], os.path.relpath(a[2], a[0]))
            got = [res(lambda: write_file_at(dirfd, "x", "X") or "ok"),
                   res(lambda: ",".join(sorted(os.listdir(dirfd)))),
                   res(lambda: write_file("y", "Y") or "ok"),
                   res(lambda: open("f").read()),
                   res(lambda: os.getcwd().endswith("/" + moved)),
                   res(lambda: ",".join(sorted(os.listdir(P(moved))))),
                   res(lambda: os.path.lexists(P(a[0]))),
                   res(lambda: os.fstat(dirfd).st_ino == os.stat(P(moved)).st_ino == ino)]
            return "at-dirfd={} list-dirfd={} at-cwd={} read-cwd={} getcwd-moved={} " \
                   "new-dir={} old-name={} same-inode={}".format(*got)
        finally:
            os.fchdir(home)
            os.close(home)
            os.close(dirfd)
    if op == "renamed-over-io":
        fd = os.open(P(a[0]), os.O_RDWR)
        try:
            os.rename(P(a[1]), P(a[0]))
            got = os.pread(fd, 100, 0).decode()
            st = os.fstat(fd)
            with open(P(a[0]), "rb") as f:
                now = f.read().decode()
            return f"open-fd-reads={got} nlink={st.st_nlink} name-reads={now}"
        finally:
            os.close(fd)
    if op == "ptimes":  # set the parent's times old, do the operation, see which moved
        parent, what, target = a
        os.utime(P(parent), (OLD, OLD))
        c0 = os.stat(P(parent)).st_ctime_ns
        time.sleep(0.02)
        if what == "create":
            write_file(P(target), "x")
        elif what == "mkdir":
            os.mkdir(P(target))
        elif what == "symlink":
            os.symlink("f", P(target))
        elif what == "link":
            os.link(P(os.path.join(parent, "f")), P(target))
        elif what == "rename":
            os.rename(P(os.path.join(parent, "f")), P(target))
        elif what == "unlink":
            os.unlink(P(target))
        elif what == "rmdir":
            os.rmdir(P(target))
        st = os.stat(P(parent))
        return f"mtime-moved={st.st_mtime > OLD + 1} ctime-moved={st.st_ctime_ns > c0}"
    if op == "ctime":  # ctime moves on chmod/chown/link/rename of the file itself
        p, what = P(a[0]), a[1]
        before = os.stat(p).st_ctime_ns
        time.sleep(0.02)
        if what == "chmod":
            os.chmod(p, 0o600)
        elif what == "chown":
            st = os.stat(p)
            os.chown(p, st.st_uid, st.st_gid)
        elif what == "link":
            os.link(p, p + ".l")
        elif what == "rename":
            os.rename(p, p + ".r")
            p += ".r"
        return f"ctime-moved={os.stat(p).st_ctime_ns > before}"
    if op == "utime-nofollow":
        os.utime(P(a[0]), ns=(OLD * 10**9, OLD * 10**9), follow_symlinks=False)
        return ""
    if op == "mtime":
        st = os.lstat(P(a[0])) if a[1] == "lstat" else os.stat(P(a[0]))
        return f"at-old={int(st.st_mtime) == OLD}"
    raise SystemExit(f"conformance_run.py: unknown op {op}")


def run_case(base, outside, case, steps):
    d = os.path.join(base, case)
    out = os.path.join(outside, case)
    os.mkdir(d)
    os.mkdir(out)
    lines = []
    for s in steps:
        op, *args = s
        try:
            res = step(d, out, op, *args)
            res = res if op.startswith("efault") else f"ok {res}".rstrip()
        except OSError as e:
            res = errno.errorcode.get(e.errno, str(e.errno))
        shown = " ".join(str(x) if len(str(x)) < 40 else f"<{len(str(x))} chars>" for x in args)
        lines.append(f"{op} {shown} -> {res}")
    return lines


def main():
    base, outside, only = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    for case, steps in CASES:
        if only and case not in only:
            continue
        print(json.dumps({"case": case, "steps": run_case(base, outside, case, steps)}), flush=True)


if __name__ == "__main__":
    main()
