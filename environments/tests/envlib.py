"""Helpers for the environment tests: run shell code inside an activated environment, and bring
an environment's pool (and mount) up and down with environments/stack.

Each command runs in a fresh `bash -c` that first does `source environments/activate ENV` —
the Spack-free activation under test — so the tests exercise the same path a user takes. Pool
state, storage, secret and mount point live in the test's tmp directory (CHFS_STACK_RUN,
CHFS_STACK_SCRATCH, CHFS_SECRET_FILE, CHFS_STACK_MOUNT), never in the user's defaults.
"""
import contextlib
import hashlib
import os
import random
import re
import shlex
import signal
import subprocess

ENVDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ENVDIR, "tests", "programs")


class Session:
    def __init__(self, name, tmp, extra=None):
        self.name, self.tmp = name, str(tmp)
        self.env = dict(os.environ)
        # A clean start: no environment active from the calling shell.
        for k in list(self.env):
            if k.startswith("_CHFS_STACK") or k in ("CHFS_SERVER", "CHFS_STACK_ENV"):
                del self.env[k]
        self.env.update({
            "CHFS_STACK_RUN": os.path.join(self.tmp, "run"),
            "CHFS_STACK_SCRATCH": os.path.join(self.tmp, "scratch"),
            "CHFS_SECRET_FILE": os.path.join(self.tmp, "secret"),
            "CHFS_STACK_SERVERS": "2",
        })
        self.env.update(extra or {})
        self.server = None

    def sh(self, script, timeout=120, check=True):
        """Run script after activating the environment (and with the pool's CHFS_SERVER)."""
        pre = f"source {shlex.quote(os.path.join(ENVDIR, 'activate'))} {self.name} || exit 97\n"
        for k in ("CHFS_STACK_MOUNT", "CHFS_STACK_SCRATCH"):
            # The test's own settings win over the environment's defaults, as for `stack`.
            if k in self.env:
                pre += f"export {k}={shlex.quote(self.env[k])}\n"
        if self.server:
            pre += f"export CHFS_SERVER={shlex.quote(self.server)}\n"
        p = subprocess.run(["bash", "-c", pre + script], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"[{self.name}] `{script.strip()}` exited {p.returncode}\n"
                                 f"stdout: {p.stdout}\nstderr: {p.stderr}")
        return p

    def force_cleanup(self):
        """Last resort after `stack down` (which is what is under test): kill servers still
        running from this session's storage dirs and lazily unmount its mount point."""
        scratch = self.env["CHFS_STACK_SCRATCH"]
        for d in (os.listdir(scratch) if os.path.isdir(scratch) else []):
            try:
                with open(os.path.join(scratch, d, "chfsd.pid")) as f:
                    os.kill(int(f.read().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        mount = self.env.get("CHFS_STACK_MOUNT")
        if mount and os.path.ismount(mount):
            subprocess.run(["umount", "-l", mount], capture_output=True, timeout=30)

    def stack(self, cmd, timeout=120, check=True):
        p = subprocess.run([os.path.join(ENVDIR, "stack"), cmd, self.name], env=self.env,
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"stack {cmd} {self.name} exited {p.returncode}: {p.stderr}")
        return p


@contextlib.contextmanager
def live(name, tmp, extra=None):
    """Environment `name` with its pool up (stack up); always brought down (stack down)."""
    s = Session(name, tmp, extra)
    try:
        p = s.stack("up")
        m = re.match(r'CHFS_SERVER="([^"]+)"; export CHFS_SERVER;$', p.stdout.strip())
        assert m, f"stack up {name} printed {p.stdout!r}, not the CHFS_SERVER line"
        s.server = m.group(1)
        yield s
    finally:
        try:
            s.stack("down", check=False)
        finally:
            s.force_cleanup()


def make_input(tmp, size=2 * 1024 * 1024 + 12345, seed=6):
    """A random input file (crosses many 64 KiB chunk boundaries, odd tail); returns (path, fnv)."""
    data = random.Random(seed).randbytes(size)
    path = os.path.join(str(tmp), "input.bin")
    with open(path, "wb") as f:
        f.write(data)
    return path, fnv64(data), hashlib.sha256(data).hexdigest()


def fnv64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def parse_rw(output):
    m = re.search(r"written (\w+) read (\w+) bytes (\d+) (\d+)", output)
    assert m, f"program printed no checksums: {output!r}"
    return m.group(1), m.group(2), int(m.group(3)), int(m.group(4))


def chfs_sha256(session, chfs_path):
    """sha256 of a CHFS file read with the native tool (chfs-io get), independent of the path
    under test: proves the data really is in CHFS, not on a local file system."""
    p = session.sh(f"chfs-io get {shlex.quote(chfs_path)} | sha256sum")
    return p.stdout.split()[0]
