"""pool.py — the CHFS pool a workflow run uses.

StackPool: a private pool for one run, brought up and down with the environments' own command
(`environments/stack up|down ENV`), so the run gets exactly the settings of that environment's
spack.yaml (read by `environments/stack-env show ENV`: CHFS_* defaults, the local build on
PATH) and, for `fuse`, the chfuse mount that `stack up fuse` makes. Everything the pool leaves
on disk — state, server storage, secret, mount point — lives in one fresh directory under the
run's output directory, and `stop` removes it, also when the run failed.

AttachedPool: a pool someone else runs (a test fixture, a batch job's pool), named by
CHFS_SERVER and CHFS_SECRET_FILE in the environment; start/stop leave its servers alone.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STACK = os.path.join(ROOT, "environments", "stack")
STACK_ENV = os.path.join(ROOT, "environments", "stack-env")


class PoolError(RuntimeError):
    pass


def is_mounted(path):
    """Whether path is a mount point, from the mount table. os.path.ismount stats the path, and
    a FUSE mount whose pool died answers with an error: it looked unmounted and stayed behind."""
    path = os.path.abspath(path)
    with open("/proc/self/mounts") as f:
        return any(len(fields) > 1 and fields[1] == path for fields in map(str.split, f))


def environment_vars(env_name):
    """What `source environments/activate ENV` would export, as a dict."""
    try:
        r = subprocess.run([STACK_ENV, "show", env_name], capture_output=True, text=True,
                           timeout=60)
    except FileNotFoundError:
        raise PoolError(f"{STACK_ENV} not found") from None
    if r.returncode != 0:
        raise PoolError(r.stderr.strip() or f"stack-env show {env_name} failed")
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


class StackPool:
    def __init__(self, env_name, base):
        self.env_name = env_name
        self.base = base
        self.dir = None
        self.env = {}

    def _stack(self, cmd):
        argv = [STACK, cmd, self.env_name]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                  env={**os.environ, **self.env})
        except subprocess.TimeoutExpired:    # e.g. a pool that died: handled like a failure
            return subprocess.CompletedProcess(argv, 124, "", f"{cmd} took over 120 s")

    def start(self):
        self.env = environment_vars(self.env_name)
        self.dir = tempfile.mkdtemp(prefix="chfs-pool-", dir=self.base)
        self.env.update({
            "CHFS_STACK_RUN": os.path.join(self.dir, "state"),
            "CHFS_STACK_SCRATCH": os.path.join(self.dir, "scratch"),
            "CHFS_SECRET_FILE": os.path.join(self.dir, "secret"),
        })
        if self.env_name == "fuse":     # a private mount point; the hook keeps its virtual /chfs
            self.env["CHFS_STACK_MOUNT"] = os.path.join(self.dir, "mnt")
        for var in ("CHFS_STACK_SERVERS", "CHFS_STACK_PROTO", "CHFS_PLACEMENT",
                    "CHFS_BACKEND_PATH"):
            if os.environ.get(var):     # the caller's choice wins over the environment's
                self.env[var] = os.environ[var]
        r = self._stack("up")
        m = re.search(r'CHFS_SERVER="([^"]+)"', r.stdout)
        if r.returncode != 0 or not m:
            msg = r.stderr.strip() or r.stdout.strip()
            self.stop()         # also undoes a half-finished start
            raise PoolError(f"environments/stack up {self.env_name} failed: {msg}")
        self.env["CHFS_SERVER"] = m.group(1)
        self.mount = self.env.get("CHFS_STACK_MOUNT", "/chfs")

    def stop(self):
        if self.dir is None:
            return
        if "CHFS_SERVER" in self.env:
            r = self._stack("down")
            if r.returncode != 0:
                print(f"run: environments/stack down {self.env_name} failed "
                      f"({r.stderr.strip().splitlines()[-1:]}); stopping the pool directly",
                      file=sys.stderr)
                self._stop_directly()
        elif self._servers_alive():     # a start that failed half-way
            self._stop_directly()
        mnt = os.path.join(self.dir, "mnt")
        if is_mounted(mnt) or self._servers_alive():
            # never delete a live server's storage or through a mount that would not go away
            print(f"run: pool in {self.dir} did not go down; left in place", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def _stop_directly(self):
        """What `stack down` does, for when it fails: unmount, then chfsctl stop."""
        mnt = os.path.join(self.dir, "mnt")
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", mnt], check=False, timeout=60)
        subprocess.run(["chfsctl", "-c", self.env["CHFS_STACK_SCRATCH"],
                        "-k", self.env["CHFS_SECRET_FILE"],
                        "-N", self.env.get("CHFS_STACK_SERVERS", "1"), "stop"],
                       check=False, timeout=120, capture_output=True,
                       env={**os.environ, **self.env})

    def _servers_alive(self):
        for pidfile in glob.glob(os.path.join(self.dir, "scratch", "srv*", "chfsd.pid")):
            try:
                os.kill(int(open(pidfile).read().strip()), 0)
                return True
            except (ValueError, OSError):
                pass
        return False


class AttachedPool:
    def __init__(self):
        self.env = {}
        self.mount = "/chfs"

    def start(self):
        if not os.environ.get("CHFS_SERVER"):
            raise PoolError("--attach needs CHFS_SERVER (and CHFS_SECRET_FILE) in the environment, "
                            'e.g. eval "$(environments/stack up hook)"')
        self.env = {k: os.environ[k] for k in ("CHFS_SERVER", "CHFS_SECRET_FILE") if k in os.environ}

    def stop(self):
        self.env = {}
