"""pool.py — a private local CHFS pool for one workflow run.

Starts the servers with `chfsctl start` on this host, with a fresh scratch directory and pool
secret under the run's output directory, keeps the `CHFS_SERVER` it prints (and the secret's
location) as the environment every client command of the run gets, and stops the pool and
removes its storage at the end — also when the run fails. CHFS_STACK_POOL_SERVERS (default 1:
one node, one server) and CHFS_STACK_POOL_PROTO (default tcp) shape the pool.
"""
import os
import re
import shutil
import subprocess
import tempfile


class PoolError(RuntimeError):
    pass


class LocalPool:
    def __init__(self, base):
        self.base = base
        self.env = {}
        self.dir = None

    def _chfsctl(self, *args):
        cmd = ["chfsctl", *args]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                                  env={**os.environ, **self.env})
        except FileNotFoundError:
            raise PoolError("chfsctl not found: build the stack first (ci/setup), then "
                            'eval "$(ci/env)"') from None

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="chfs-pool-", dir=self.base)
        secret = os.path.join(self.dir, "secret")
        self.args = ["-c", os.path.join(self.dir, "scratch"), "-k", secret,
                     "-p", os.environ.get("CHFS_STACK_POOL_PROTO", "tcp"),
                     "-N", os.environ.get("CHFS_STACK_POOL_SERVERS", "1")]
        self.env = {"CHFS_SECRET_FILE": secret}
        r = self._chfsctl(*self.args, "start")
        m = re.search(r'CHFS_SERVER="([^"]+)"', r.stdout)
        if r.returncode != 0 or not m:
            self.stop()
            raise PoolError("chfsctl start failed: " + (r.stderr.strip() or r.stdout.strip()))
        self.env["CHFS_SERVER"] = m.group(1)

    def stop(self):
        if self.dir is None:
            return
        if "CHFS_SERVER" in self.env:
            r = self._chfsctl(*self.args, "stop")
            if r.returncode != 0:
                self._chfsctl(*self.args, "kill")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None
        self.env = {}


class AttachedPool:
    """A pool someone else runs (a test fixture, a batch job's pool): CHFS_SERVER and
    CHFS_SECRET_FILE come from the environment; start/stop leave the servers alone."""

    def __init__(self, base=None):
        self.env = {}

    def start(self):
        if not os.environ.get("CHFS_SERVER"):
            raise PoolError("--attach needs CHFS_SERVER (and CHFS_SECRET_FILE) in the environment, "
                            'e.g. eval "$(chfsctl start)"')
        self.env = {k: os.environ[k] for k in ("CHFS_SERVER", "CHFS_SECRET_FILE") if k in os.environ}

    def stop(self):
        self.env = {}
