"""One step of the owners-and-permissions scenario (test_owners.py), run as the user it names.

Usage: owners_steps.py BASE OP PATH [ARG...]   (run under setpriv as the step's user)
Prints one line: "ok" plus what the step reads back (owner, group, mode of the entry it made or
changed), or the errno name. Runs with any access path in front of BASE (a local directory, a
chfuse mount, or /chfs under chfs-run), so the test compares the lines of every path.
"""
import errno
import os
import stat
import sys


def describe(path):
    st = os.lstat(path)
    return f"uid={st.st_uid} gid={st.st_gid} mode={stat.S_IMODE(st.st_mode):o}"


def run(base, op, rel, args):
    p = os.path.join(base, rel)
    if op == "mkdir":
        os.mkdir(p, int(args[0], 8))
        return describe(p)
    if op == "create":  # O_CREAT|O_EXCL|O_WRONLY with a mode, write a little
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, int(args[0], 8))
        os.write(fd, b"hello")
        os.close(fd)
        return describe(p)
    if op == "create-or-open":  # O_CREAT without O_EXCL
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
        return describe(p)
    if op == "write":
        fd = os.open(p, os.O_WRONLY)
        os.write(fd, b"again")
        os.close(fd)
        return ""
    if op == "read":
        with open(p, "rb") as f:
            return f.read().decode()
    if op == "truncate":
        os.truncate(p, 1)
        return ""
    if op == "unlink":
        os.unlink(p)
        return ""
    if op == "rmdir":
        os.rmdir(p)
        return ""
    if op == "rename":
        os.rename(p, os.path.join(base, args[0]))
        return ""
    if op == "chmod":
        os.chmod(p, int(args[0], 8))
        return describe(p)
    if op == "chown":
        os.chown(p, int(args[0]), int(args[1]))
        return describe(p)
    if op == "lchown":
        os.lchown(p, int(args[0]), int(args[1]))
        return describe(p)
    if op == "symlink":
        os.symlink(args[0], p)
        return describe(p)
    if op == "utime":  # explicit times
        os.utime(p, (1000000, 2000000))
        return str(int(os.stat(p).st_mtime))
    if op == "utime-now":
        os.utime(p, None)
        return ""
    if op == "access-w":
        return str(os.access(p, os.W_OK))
    if op == "stat":
        return describe(p)
    raise SystemExit(f"owners_steps.py: unknown op {op}")


def main():
    base, op, rel, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    try:
        out = run(base, op, rel, args)
        print(f"ok {out}".rstrip())
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))


if __name__ == "__main__":
    main()
