"""access_paths.py — where the Montage workflow's working directory lives, per environment.

An access path is three things to the runner: a command prefix that lets a program reach the
working directory (nothing for `local` and `fuse`, `chfs-run --mount M --` for `hook`), the
directory's path as those programs see it, and how to bring the path up and down (start a local
CHFS pool; mount chfuse). The workflow itself never changes: the same `rake` command runs with
the prefix, inside the directory.

  local  a plain local directory — the baseline the others are compared with
  hook   the pool seen through the syscall hook at a virtual mount point (default /chfs);
         rake, the shell and every Montage tool run unmodified under chfs-run
  fuse   the pool mounted with chfuse (kernel passthrough for node-local files)

With attach=True the CHFS paths use the pool named by CHFS_SERVER in the environment instead
of starting their own.

`native` (programs linked with libchfs) and `mpiio` (ROMIO ad_chfs) are not offered: Montage's
tools are unmodified POSIX programs without MPI-IO, so neither path can carry this workflow;
their environments are exercised by IOR and the MPI-IO tests instead.
"""
import os
import shutil
import subprocess
import tempfile
import time

from pool import AttachedPool, LocalPool

NOT_MEANINGFUL = {
    "native": "Montage's tools are unmodified POSIX programs, not linked with libchfs; "
              "use --env hook (same programs, routed to libchfs by the syscall hook)",
    "mpiio": "Montage's tools do no MPI-IO; the mpiio environment is for MPI programs "
             "(IOR, HDF5) — use --env hook or --env fuse",
}


class LocalPath:
    """A directory on the local file system; no pool."""
    name = "local"

    def __init__(self, base, attach=False):
        self.base = base
        self.prefix = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def workdir(self, run_id):
        return os.path.join(self.base, "work-" + run_id)

    def run(self, argv, **kw):
        return subprocess.run(self.prefix + argv, **kw)


class HookPath(LocalPath):
    """The pool through the syscall hook: every command runs under chfs-run."""
    name = "hook"

    def __init__(self, base, attach=False, mount="/chfs"):
        super().__init__(base)
        self.mount = mount
        self.pool = AttachedPool() if attach else LocalPool(base)

    def __enter__(self):
        self.pool.start()
        self.prefix = ["chfs-run", "--mount", self.mount, "--"]
        return self

    def __exit__(self, *exc):
        self.pool.stop()
        return False

    def workdir(self, run_id):
        return f"{self.mount}/montage-{run_id}"

    def run(self, argv, **kw):
        kw["env"] = {**(kw.get("env") or os.environ), **self.pool.env}
        return subprocess.run(self.prefix + argv, **kw)


class FusePath(HookPath):
    """The pool mounted with chfuse on a fresh mount point."""
    name = "fuse"

    def __enter__(self):
        self.pool.start()
        self.mount = tempfile.mkdtemp(prefix="chfuse-", dir=self.base)
        self.daemon = subprocess.Popen(["chfuse", "--foreground", self.mount],
                                       env={**os.environ, **self.pool.env},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while not os.path.ismount(self.mount):
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                err = self.daemon.stderr.read().decode(errors="replace").strip() if self.daemon.poll() is not None else "timeout"
                self.__exit__()
                raise RuntimeError(f"chfuse did not mount {self.mount}: {err}")
            time.sleep(0.1)
        self.prefix = []
        return self

    def __exit__(self, *exc):
        try:
            if os.path.ismount(self.mount):
                subprocess.run(["fusermount3", "-u", self.mount], check=False)
            if getattr(self, "daemon", None):
                try:
                    self.daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.daemon.kill()
                    self.daemon.wait()
            if os.path.isdir(self.mount) and not os.path.ismount(self.mount):
                os.rmdir(self.mount)
        finally:
            self.pool.stop()
        return False


PATHS = {"local": LocalPath, "hook": HookPath, "fuse": FusePath}


def open_path(name, base, attach=False):
    if name in NOT_MEANINGFUL:
        raise SystemExit(f"run: --env {name} does not apply to this workflow: {NOT_MEANINGFUL[name]}")
    if name not in PATHS:
        raise SystemExit(f"run: unknown --env {name} (choose local, hook or fuse)")
    return PATHS[name](base, attach=attach)
