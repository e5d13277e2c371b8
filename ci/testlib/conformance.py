"""The POSIX conformance table (issue 16 item 6) on every access path, for the test and the
benchmark command.

packages/chfs/tests/conformance_run.py holds the cases; this module runs it on tmpfs (the
reference), on a chfuse mount (allow_other) and under the hook (chfs-run), each as root and as a
second user (setpriv), and compares every case's transcript with the reference's for the same
user. run_table() returns {(path, user): {case: [lines]}}; differences() what differs.
"""
import json
import os
import shutil
import subprocess
import tempfile

from ci.testlib.chfs_pool import stack_prefix
from ci.testlib.fuse_mount import chfuse_mounted

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "packages", "chfs", "tests", "conformance_run.py")
PY = "/usr/bin/python3"  # stdlib only, readable by every user (unlike the build's venv)
USERS = {"root": None, "user": (1000, 1000)}
PATHS = ("tmpfs", "chfuse", "hook")


def load_cases():
    """The case table of the runner: [(case, steps)]."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("conformance_run", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CASES


def as_user(user, argv):
    if USERS[user] is None:
        return argv
    uid, gid = USERS[user]
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *argv]


def owned_dir(parent, name, user):
    d = os.path.join(parent, name)
    os.mkdir(d)
    if USERS[user]:
        os.chown(d, *USERS[user])
    return d


def parse(out, err, rc):
    cases = {}
    for line in out.splitlines():
        rec = json.loads(line)
        cases[rec["case"]] = rec["steps"]
    if rc != 0:
        cases["(runner)"] = [f"exit {rc}: {err.strip()[-400:]}"]
    return cases


class Workspace:
    """A world-traversable scratch directory with the runner, an OUTSIDE directory per user on
    another file system than tmpfs and CHFS (for EXDEV), and a copy of the installed libraries
    and chfs-run that another user can read (the build lives under /root, 0700 here)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="chfs-conformance-", dir="/var/tmp")
        os.chmod(self.dir, 0o755)
        self.runner = shutil.copy(RUNNER, self.dir)
        inst = os.path.join(self.dir, "inst")
        os.makedirs(os.path.join(inst, "bin"))
        shutil.copytree(os.path.join(stack_prefix(), "lib"), os.path.join(inst, "lib"), symlinks=True)
        self.chfs_run = shutil.copy(os.path.join(stack_prefix(), "bin", "chfs-run"),
                                    os.path.join(inst, "bin"))
        self.lib = os.path.join(inst, "lib")

    def outside(self, tag, user):
        return owned_dir(self.dir, f"out-{tag}-{user}", user)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def run(argv, env, timeout=300):
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    return parse(r.stdout, r.stderr, r.returncode)


def on_tmpfs(ws, user):
    top = tempfile.mkdtemp(prefix="conformance-ref-", dir="/dev/shm")
    try:
        os.chmod(top, 0o755)
        base = owned_dir(top, "base", user)
        return run(as_user(user, [PY, ws.runner, base, ws.outside("tmpfs", user)]),
                   dict(os.environ, HOME="/"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


def on_chfuse(ws, mnt, user, env):
    base = owned_dir(mnt, f"conformance-{user}", user)
    return run(as_user(user, [PY, ws.runner, base, ws.outside("chfuse", user)]), dict(env, HOME="/"))


def under_hook(ws, pool, user):
    secret = os.path.join(ws.dir, f"secret.{user}")
    shutil.copy(pool.secret_file, secret)
    if USERS[user]:
        os.chown(secret, *USERS[user])
    os.chmod(secret, 0o600)
    env = dict(pool.env, HOME="/", CHFS_SECRET_FILE=secret, CHFS_HOOK_LOCAL="0",
               LD_LIBRARY_PATH=ws.lib, PATH="/usr/bin:/bin")
    hook = [ws.chfs_run, "--mount", "/chfs", "--"]
    base = f"/chfs/hook-conformance-{user}"
    uid_gid = USERS[user] or (0, 0)
    r = subprocess.run(hook + ["sh", "-c", f"mkdir {base} && chown {uid_gid[0]}:{uid_gid[1]} {base}"],
                       env=dict(env, CHFS_SECRET_FILE=os.path.join(ws.dir, "secret.root")
                                if USERS[user] else secret),
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return {"(runner)": [f"setting up {base} failed: {r.stderr.strip()[-400:]}"]}
    return run(as_user(user, hook + [PY, ws.runner, base, ws.outside("hook", user)]), env)


def run_table(pool):
    """Every path x user: {(path, user): {case: [lines]}}. pool: a live ChfsPool."""
    ws = Workspace()
    results = {}
    try:
        for user in USERS:
            results[("tmpfs", user)] = on_tmpfs(ws, user)
        # root's secret first: under_hook makes each user's base directory as root
        for user in USERS:
            results[("hook", user)] = under_hook(ws, pool, user)
        mnt = os.path.join(ws.dir, "mnt")  # every user can reach it (workdir may be 0700)
        with chfuse_mounted(pool.env, mnt, "allow_other"):
            for user in USERS:
                results[("chfuse", user)] = on_chfuse(ws, mnt, user, pool.env)
    finally:
        ws.close()
    return results


def differences(results):
    """{(path, user, case): (reference lines, lines)} for every case that differs from tmpfs."""
    out = {}
    for (path, user), cases in results.items():
        if path == "tmpfs":
            continue
        ref = results[("tmpfs", user)]
        for case in sorted(set(ref) | set(cases)):
            if ref.get(case) != cases.get(case):
                out[(path, user, case)] = (ref.get(case), cases.get(case))
    return out


def pass_counts(results):
    """{(path, user): (cases equal to tmpfs, cases)}."""
    counts = {}
    for (path, user), cases in results.items():
        ref = results[("tmpfs", user)]
        counts[(path, user)] = (sum(1 for c in ref if cases.get(c) == ref[c]), len(ref))
    return counts


def show(ref, got):
    ref, got = ref or [], got or []
    lines = []
    for i in range(max(len(ref), len(got))):
        r = ref[i] if i < len(ref) else ""
        g = got[i] if i < len(got) else ""
        lines.append(f"  {'  ' if r == g else '!!'} {g:<60} | tmpfs: {r}")
    return "\n".join(lines)
