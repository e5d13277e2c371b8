"""pool.py — a private local CHFS pool for one workflow run.

Starts the servers with `chfsctl start` (one host: this one) on a fresh storage directory,
keeps the `CHFS_SERVER` it prints (and the pool secret's location) as the environment every
client command of the run gets, and stops the pool and removes its storage at the end — also
when the run fails. CHFS_STACK_POOL_SERVERS sets the number of servers (default 1: one node).
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
        storage = os.path.join(self.dir, "storage")
        os.mkdir(storage)
        hostfile = os.path.join(self.dir, "hosts")
        with open(hostfile, "w") as f:
            f.write("localhost\n")
        self.env = {"CHFS_SECRET_FILE": os.path.join(self.dir, "secret")}
        self.args = ["-c", storage, "-f", hostfile]
        r = self._chfsctl("start", *self.args)
        m = re.search(r'CHFS_SERVER="([^"]+)"', r.stdout)
        if r.returncode != 0 or not m:
            self.stop()
            raise PoolError("chfsctl start failed: " + (r.stderr.strip() or r.stdout.strip()))
        self.env["CHFS_SERVER"] = m.group(1)

    def stop(self):
        if self.dir is None:
            return
        if "CHFS_SERVER" in self.env:
            r = self._chfsctl("stop", *self.args)
            if r.returncode != 0:
                self._chfsctl("kill", *self.args)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None
        self.env = {}
