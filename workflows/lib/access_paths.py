"""access_paths.py — where the Montage workflow's working directory lives, per environment.

An access path is three things to the runner: a command prefix that lets a program reach the
working directory (nothing for `local` and `fuse`, `chfs-run --mount M --` for `hook`), the
directory's path as those programs see it, and how to bring the path up and down. The workflow
itself never changes: the same `rake` command runs with the prefix, inside the directory.

  local  a plain local directory — the baseline the others are compared with
  hook   the pool seen through the syscall hook at the virtual mount point /chfs; rake, the
         shell and every Montage tool run unmodified under chfs-run
  fuse   the pool mounted with chfuse (kernel passthrough for node-local files)

For hook and fuse the pool is private to the run and comes up with the environment's own
command (pool.StackPool: `environments/stack up hook|fuse`, which also mounts chfuse), so a run
uses exactly that environment's settings. With attach=True they use the running pool named by
CHFS_SERVER instead (pool.AttachedPool); `fuse` then uses the mount `environments/stack up
fuse` made at CHFS_STACK_MOUNT (on every host of its hostfile) if there is one, or mounts
chfuse itself.

`native` (programs linked with libchfs) and `mpiio` (ROMIO ad_chfs) are not offered: Montage's
tools are unmodified POSIX programs without MPI-IO, so neither path can carry this workflow;
their environments are exercised by IOR and the MPI-IO tests instead.
"""
import os
import subprocess
import tempfile
import time

from pool import AttachedPool, StackPool, is_mounted

NOT_MEANINGFUL = {
    "native": "Montage's tools are unmodified POSIX programs, not linked with libchfs; "
              "use --env hook (same programs, routed to libchfs by the syscall hook)",
    "mpiio": "Montage's tools do no MPI-IO; the mpiio environment is for MPI programs "
             "(IOR, HDF5) — use --env hook or --env fuse",
}


def stack_mount():
    """The chfuse mount `environments/stack up fuse` made (CHFS_STACK_MOUNT), if it is mounted."""
    m = os.environ.get("CHFS_STACK_MOUNT")
    return os.path.abspath(m) if m and is_mounted(m) else None


class LocalPath:
    """A directory on the local file system; no pool."""

    def __init__(self, base, attach=False):
        self.base = base
        self.prefix = []
        self.env = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def workdir(self, run_id):
        return os.path.join(self.base, "work-" + run_id)

    def run(self, argv, **kw):
        return subprocess.run(self.prefix + argv, env={**os.environ, **self.env}, **kw)

    def popen(self, argv, extra_env=None, **kw):
        env = {**os.environ, **self.env, **(extra_env or {})}
        return subprocess.Popen(self.prefix + argv, env=env, **kw)


class HookPath(LocalPath):
    """The pool through the syscall hook: every command runs under chfs-run."""

    def __init__(self, base, attach=False):
        super().__init__(base)
        self.pool = AttachedPool() if attach else StackPool("hook", base)

    def __enter__(self):
        self.pool.start()
        self.env = self.pool.env
        self.mount = self.pool.mount
        self.prefix = ["chfs-run", "--mount", self.mount, "--"]
        return self

    def __exit__(self, *exc):
        self.pool.stop()
        return False

    def workdir(self, run_id):
        return f"{self.pool.mount}/montage-{run_id}"


class FusePath(LocalPath):
    """The pool mounted with chfuse; ordinary paths under the mount point."""

    def __init__(self, base, attach=False):
        super().__init__(base)
        self.pool = AttachedPool() if attach else StackPool("fuse", base)
        self.attach = attach
        self.daemon = None

    def __enter__(self):
        self.pool.start()
        self.env = self.pool.env
        self.mount = self.pool.mount
        if self.attach:
            shared = stack_mount()
            if shared:      # environments/stack up fuse mounted it (on every host of its hostfile)
                self.mount = shared
            else:
                self._mount_chfuse()
        return self

    # chfuse gives up by itself when it cannot reach the pool (its own RPC time-outs); the
    # runner follows it and shows its message, and only stops it if it neither mounts nor
    # exits long after that (a hung daemon).
    CHFUSE_BOUND_S = 150

    def _mount_chfuse(self):
        self.mount = tempfile.mkdtemp(prefix="chfuse-", dir=self.base)
        # stderr to a file, not a pipe: a mounted daemon may write warnings all run long, and
        # the file keeps its message when it fails.
        self.errlog = self.mount + ".log"
        with open(self.errlog, "wb") as err:
            self.daemon = subprocess.Popen(["chfuse", "--foreground", self.mount],
                                           env={**os.environ, **self.env},
                                           stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + self.CHFUSE_BOUND_S
        while not os.path.ismount(self.mount):
            if self.daemon.poll() is not None:
                why = self._chfuse_message() or f"chfuse exited with status {self.daemon.returncode}"
            elif time.monotonic() > deadline:
                why = self._chfuse_message() or "no message"
                why = f"neither mounted nor exited within {self.CHFUSE_BOUND_S} s ({why})"
            else:
                time.sleep(0.1)
                continue
            self.__exit__()
            raise RuntimeError(f"chfuse did not mount {self.mount}: {why}")

    def _chfuse_message(self):
        try:
            with open(self.errlog, errors="replace") as f:
                lines = [ln.strip() for ln in f if ln.strip()]
        except OSError:
            return ""
        return "; ".join(lines[-3:])

    def __exit__(self, *exc):
        try:
            if self.daemon:
                if is_mounted(self.mount):
                    subprocess.run(["fusermount3", "-u", self.mount], check=False, timeout=60)
                try:
                    self.daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.daemon.kill()
                    self.daemon.wait()
                if not is_mounted(self.mount):
                    os.rmdir(self.mount)
                    if os.path.exists(self.errlog):
                        os.remove(self.errlog)
        finally:
            self.pool.stop()
        return False

    def workdir(self, run_id):
        return os.path.join(self.mount, "montage-" + run_id)


PATHS = {"local": LocalPath, "hook": HookPath, "fuse": FusePath}


def open_path(name, base, attach=False):
    if name in NOT_MEANINGFUL:
        raise SystemExit(f"run: --env {name} does not apply to this workflow: {NOT_MEANINGFUL[name]}")
    if name not in PATHS:
        raise SystemExit(f"run: unknown --env {name} (choose local, hook or fuse)")
    return PATHS[name](base, attach=attach)
