"""Owners and permissions for several users, as on a local file system (issue: POSIX semantics).

One scenario of steps — each run as root or as one of two unprivileged users (setpriv) — is
played on tmpfs (the reference), on a chfuse mount with allow_other, and under the hook
(chfs-run) with every user's processes joining the pool with their own copy of the secret. Each
step prints "ok" + the owner, group and mode it reads back, or the errno name
(owners_steps.py); the three transcripts must be identical. Before the fix, chfuse recorded every
entry as root's (the creating user got EACCES on its own 0644 file and in its own directory) and
the hook applied no check at all (user B wrote user A's 0644 file) and ignored chown.
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from ci.testlib.chfs_pool import stack_prefix
from ci.testlib.fuse_mount import chfuse_mounted

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # stdlib only: readable by every user, unlike the build's venv
USERS = {  # uid, gid, supplementary groups
    "A": (1000, 1000, [1000, 3000]),
    "B": (1001, 1001, [1001]),
}

# (user, op, path, args...); paths are relative to a root-owned directory of mode 1777.
SCENARIO = [
    ("A", "mkdir", "d", "755"),
    ("A", "create", "d/f", "644"),
    ("A", "write", "d/f"),  # its own 0644 file (EACCES on chfuse before: owned by root)
    ("A", "mkdir", "d/sub", "755"),
    ("A", "create", "d/sub/g", "600"),  # in its own new directory
    ("B", "write", "d/f"),
    ("B", "read", "d/f"),
    ("B", "create", "d/x", "644"),
    ("B", "create-or-open", "d/f"),
    ("B", "unlink", "d/f"),
    ("B", "truncate", "d/f"),
    ("B", "chmod", "d/f", "666"),
    ("A", "chmod", "d/f", "600"),
    ("B", "read", "d/f"),
    ("A", "chown", "d/f", "1001", "1000"),
    ("A", "chown", "d/f", "-1", "3000"),
    ("A", "chown", "d/f", "-1", "1001"),
    ("root", "chown", "d/f", "1001", "1001"),
    ("B", "write", "d/f"),
    ("A", "create", "s", "644"),  # sticky base directory
    ("B", "unlink", "s"),
    ("B", "rename", "s", "s2"),
    ("A", "rename", "s", "s2"),
    ("A", "mkdir", "g", "775"),
    ("A", "chown", "g", "-1", "3000"),
    ("A", "chmod", "g", "2775"),
    ("A", "create", "g/h", "644"),  # set-group-ID directory: group inherited
    ("A", "mkdir", "g/k", "755"),  # ... and the bit too
    ("A", "create", "x", "755"),
    ("A", "chmod", "x", "4755"),
    ("root", "chown", "x", "1001", "1001"),  # set-user-ID cleared
    ("A", "utime", "d/sub/g"),
    ("B", "utime", "d/sub/g"),
    ("B", "utime-now", "d/sub/g"),
    ("B", "access-w", "d/sub/g"),
    ("A", "access-w", "d/sub/g"),
    ("A", "symlink", "ln", "d/f"),
    ("root", "lchown", "ln", "1001", "1001"),
    ("B", "rmdir", "d/sub"),
    ("A", "unlink", "d/sub/g"),
    ("A", "rmdir", "d/sub"),
    ("root", "stat", "d/f"),
]


def as_user(user, argv):
    if user == "root":
        return argv
    uid, gid, groups = USERS[user]
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--groups=" + ",".join(map(str, groups)),
            *argv]


def play(base, prefix_for, env_for, steps_py):
    out = []
    for user, op, path, *args in SCENARIO:
        argv = as_user(user, prefix_for(user) + [PY, steps_py, base, op, path, *args])
        r = subprocess.run(argv, env=env_for(user), capture_output=True, text=True, timeout=60)
        line = r.stdout.strip() or f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
        out.append(f"{user} {op} {path} {' '.join(args)} -> {line}")
    return out


@pytest.fixture
def shared_dir():
    """A world-traversable scratch directory (pytest's tmp_path is root's 0700)."""
    d = tempfile.mkdtemp(prefix="chfs-owners-")
    os.chmod(d, 0o755)
    shutil.copy(os.path.join(HERE, "owners_steps.py"), d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def reference(shared_dir):
    base = tempfile.mkdtemp(prefix="owners-ref-", dir="/dev/shm")  # tmpfs
    try:
        os.chmod(base, 0o1777)
        return play(base, lambda u: [], lambda u: dict(os.environ, HOME="/"),
                    os.path.join(shared_dir, "owners_steps.py"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_two_users_on_chfuse_allow_other_behave_as_on_tmpfs(chfs_pool, shared_dir):
    assert os.geteuid() == 0, "this test acts as two users and must run as root"
    want = reference(shared_dir)
    mnt = os.path.join(shared_dir, "mnt")
    with chfuse_mounted(chfs_pool.env, mnt, "allow_other"):
        os.chmod(mnt, 0o1777)  # what the root already is: allowed (was EPERM even for root)
        with pytest.raises(PermissionError):
            os.chmod(mnt, 0o755)  # the root is fixed
        base = os.path.join(mnt, "scenario")
        os.mkdir(base)
        os.chmod(base, 0o1777)
        got = play(base, lambda u: [], lambda u: dict(os.environ, HOME="/"),
                   os.path.join(shared_dir, "owners_steps.py"))
        assert got == want, "\n".join(f"{'  ' if g == w else '!!'} chfuse: {g}\n   tmpfs:  {w}"
                                      for g, w in zip(got, want))


def world_readable_install(shared_dir):
    """The installed build lives under /root (0700 here): give the users a copy of what the
    hook loads, as a site installs it world-readable. Returns its chfs-run."""
    inst = os.path.join(shared_dir, "inst")
    os.makedirs(os.path.join(inst, "bin"))
    shutil.copytree(os.path.join(stack_prefix(), "lib"), os.path.join(inst, "lib"), symlinks=True)
    shutil.copy(os.path.join(stack_prefix(), "bin", "chfs-run"), os.path.join(inst, "bin"))
    return os.path.join(inst, "bin", "chfs-run")


@pytest.mark.hook
@pytest.mark.timeout(300)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_two_users_under_the_hook_behave_as_on_tmpfs(chfs_pool, shared_dir):
    assert os.geteuid() == 0, "this test acts as two users and must run as root"
    want = reference(shared_dir)
    chfs_run = world_readable_install(shared_dir)
    inst = os.path.dirname(os.path.dirname(chfs_run))
    # Each user joins with its own copy of the secret.
    secrets = {}
    for user in ("root", *USERS):
        secrets[user] = os.path.join(shared_dir, f"secret.{user}")
        shutil.copy(chfs_pool.secret_file, secrets[user])
        if user != "root":
            os.chown(secrets[user], USERS[user][0], USERS[user][1])
        os.chmod(secrets[user], 0o600)

    def env_for(user):
        return dict(chfs_pool.env, HOME="/", CHFS_SECRET_FILE=secrets[user], CHFS_HOOK_LOCAL="0",
                    LD_LIBRARY_PATH=os.path.join(inst, "lib"), PATH="/usr/bin:/bin")

    run = [chfs_run, "--mount", "/chfs", "--"]
    r = subprocess.run(run + ["sh", "-c", "mkdir /chfs/scenario && chmod 1777 /chfs/scenario"],
                       env=env_for("root"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = play("/chfs/scenario", lambda u: run, env_for, os.path.join(shared_dir, "owners_steps.py"))
    assert got == want, "\n".join(f"{'  ' if g == w else '!!'} hook:  {g}\n   tmpfs: {w}"
                                  for g, w in zip(got, want))


DROPPED = """
import os, sys
fd = os.open("/chfs/dropped/f", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"x")
os.close(fd)
st = os.stat("/chfs/dropped/f")
print(st.st_uid, st.st_gid)
"""


@pytest.mark.hook
@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_hooked_process_that_drops_root_stays_in_the_pool_as_the_new_user(chfs_pool, shared_dir):
    """root starts the job; it drops to uid 1000 (setpriv, as su or a daemon would) and execs a
    program that then opens CHFS for the first time: the secret file is root's 0600, so it
    joins with the descriptor chfs-run handed down, and what it creates is uid 1000's. Before,
    every CHFS call of such a process failed with EACCES."""
    assert os.geteuid() == 0, "this test acts as another user and must run as root"
    chfs_run = world_readable_install(shared_dir)
    inst = os.path.dirname(os.path.dirname(chfs_run))
    env = dict(chfs_pool.env, HOME="/", CHFS_HOOK_LOCAL="0", LD_LIBRARY_PATH=os.path.join(inst, "lib"),
               PATH="/usr/bin:/bin")
    r = subprocess.run([chfs_run, "--", "sh", "-c", "mkdir /chfs/dropped && chmod 1777 /chfs/dropped"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(chfs_pool.secret_file).st_mode & 0o777) == "0o600"
    r = subprocess.run([chfs_run, "--", *as_user("A", [PY, "-c", DROPPED])], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1000", "1000"]
