"""A live local CHFS pool for tests of any component.

Usage (the `chfs_pool` fixture in the repo-root conftest.py builds one per test):

    def test_something(chfs_pool):            # 4 servers over tcp on 127.0.0.1
        out = chfs_pool.run(["chfs-io", "ls", "/"])   # runs with chfs_pool.env
        subprocess.run(my_cmd, env=chfs_pool.env)     # or use the env dict yourself

    @pytest.mark.parametrize("chfs_pool", [{"servers": 2, "proto": "shm"}], indirect=True)
    def test_over_shm(chfs_pool): ...

Attributes: `.env` (os.environ plus CHFS_SERVER, CHFS_SECRET_FILE, CHFS_RPC_TIMEOUT_MSEC,
CHFS_LOCAL_FASTPATH=0 (data over RPC, as on multi-node pools; override with
extra_env={"CHFS_LOCAL_FASTPATH": "1"}), PATH and LD_LIBRARY_PATH pointing at the installed build), `.dirs` (storage directory per server),
`.addrs` (server addresses), `.pids`, `.secret_file`, `.tmp`. Methods: `.kill(i, sig=9)`,
`.restart(i)` (same storage dir and address; `.restart(i, host="127.0.0.1:PORT")` on another
address), `.add()` (one more server joins; returns its index; `launcher=[...]` prefixes
every chfsd command, e.g. ci/testlib/no_io_uring.launcher()), `.wipe()` (empty the namespace for the next test; False if it could not), `.run(argv, **kw)` (subprocess.run with .env,
text output, check=True by default, 120 s timeout), `.stop()` (always called by the fixture).

The build is taken from $CHFS_STACK_PREFIX (default ~/.cache/chfs-stack/prefix), so
`ci/test --asan` / `--tsan` run the same tests against a sanitizer build by pointing it elsewhere.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings


def stack_prefix():
    cache = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
    return os.environ.get("CHFS_STACK_PREFIX", os.path.join(cache, "prefix"))


def stack_env(base=None):
    """os.environ with the installed build first on PATH/LD_LIBRARY_PATH."""
    env = dict(base if base is not None else os.environ)
    p = stack_prefix()
    env["PATH"] = f"{p}/bin:{p}/sbin:" + env.get("PATH", "/usr/bin:/bin")
    libs = f"{p}/lib:{p}/lib/x86_64-linux-gnu"
    env["LD_LIBRARY_PATH"] = libs + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["PKG_CONFIG_PATH"] = f"{p}/lib/pkgconfig:" + env.get("PKG_CONFIG_PATH", "")
    if "asan" in p:
        # Sanitizer reports of daemons (stderr is /dev/null) go to files: CHFS_STACK_CACHE/asan-logs.
        cache = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
        logs = os.path.join(cache, "asan-logs")
        os.makedirs(logs, exist_ok=True)
        env.setdefault("ASAN_OPTIONS", f"detect_leaks=0:log_path={logs}/asan")
        env.setdefault("UBSAN_OPTIONS", f"print_stacktrace=1:log_path={logs}/ubsan")
    if "tsan" in p:
        env.update(tsan_env())
    return env


def tsan_env():
    """Variables for programs of the ThreadSanitizer build (ci/test --tsan sets the same for
    ctest): reports to files in CHFS_STACK_CACHE/tsan-logs (daemons have no stderr), the
    commented suppressions of ci/tsan.supp, and two work-arounds that are not about races:
    die_after_fork=0 (libchfs and chfsd start threads in forked children: TSan refuses that by
    default) and UCX_MEM_EVENTS=no (MPICH's UCX hooks madvise at thread exit, which crashes
    inside TSan's rwlock interceptor)."""
    cache = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
    logs = os.path.join(cache, "tsan-logs")
    os.makedirs(logs, exist_ok=True)
    supp = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tsan.supp")
    return {"TSAN_OPTIONS": f"die_after_fork=0:log_path={logs}/tsan:suppressions={supp}",
            "UCX_MEM_EVENTS": "no"}


def make_secret(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return path


def _running(pid):
    """True while pid exists and is not a zombie. A daemonised chfsd is reparented to PID 1,
    which in some containers reaps only every couple of seconds: counting zombies as alive made
    every stop/restart look ~2 s slow."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_gone(pid, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if not _running(pid):
            return True
        time.sleep(0.01)
    return False


def stop_all(pids):
    """SIGTERM every live pid of the list at once, then wait for each (SIGKILL after 10 s), and
    clear the list's entries: servers shut down in parallel."""
    for pid in filter(None, pids):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for i, pid in enumerate(pids):
        if pid and not wait_gone(pid, 10):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            wait_gone(pid, 5)
        pids[i] = None


class ChfsPool:
    def __init__(self, servers=4, proto="tcp", rpc_timeout_ms=5000, tmp=None, host=None,
                 extra_env=None, chfsd_args=(), start_timeout=60, launcher=()):
        self.n = servers
        self.servers = servers  # as started (.add() adds to .n)
        self.launcher = list(launcher)  # argv prefix for chfsd (e.g. ci/no-io-uring)
        self.proto = proto
        self.host = host
        self.chfsd_args = list(chfsd_args)
        self.start_timeout = start_timeout
        self._own_tmp = tmp is None
        self.tmp = tmp or tempfile.mkdtemp(prefix="chfs-pool-")
        self.secret_file = make_secret(os.path.join(self.tmp, "secret"))
        self.dirs = [os.path.join(self.tmp, f"srv{i}") for i in range(servers)]
        self.addrs = [None] * servers
        self.pids = [None] * servers
        self.env = stack_env()
        # All servers run on this host, so libchfs's local fast path would move every chunk by
        # pread/pwrite on the backing files; tests exercise the RPC data path (what multi-node
        # pools use) unless they ask for the fast path with extra_env={"CHFS_LOCAL_FASTPATH": "1"}.
        self.env.update({"CHFS_SECRET_FILE": self.secret_file,
                         "CHFS_RPC_TIMEOUT_MSEC": str(rpc_timeout_ms),
                         "CHFS_LOCAL_FASTPATH": "0"})
        self.env.update(extra_env or {})
        self.env.pop("CHFS_PLACEMENT", None)
        try:
            for i in range(servers):
                self._start(i)
            self.env["CHFS_SERVER"] = ",".join(self.addrs)
        except Exception:
            self.stop()
            raise

    def _start(self, i, host=None):
        d = self.dirs[i]
        os.makedirs(d, exist_ok=True)
        argv = ["chfsd", "-c", d, "-p", self.proto, "-k", self.secret_file, "-S", f"{d}/info",
                "-P", f"{d}/chfsd.pid", "-l", f"{d}/chfsd.log", "-t", "5000"] + self.chfsd_args
        if host or self.host:
            argv += ["-h", host or self.host]
        boot = next((a for j, a in enumerate(self.addrs) if a and j != i), None)
        if boot:
            argv.append(boot)
        subprocess.run(self.launcher + argv, env=self.env, check=True, timeout=self.start_timeout)
        with open(f"{d}/info") as f:
            self.addrs[i] = f.read().strip()
        with open(f"{d}/chfsd.pid") as f:
            self.pids[i] = int(f.read().strip())

    def log(self, i):
        try:
            with open(f"{self.dirs[i]}/chfsd.log") as f:
                return f.read()
        except OSError:
            return ""

    def kill(self, i, sig=signal.SIGKILL):
        if self.pids[i]:
            try:
                os.kill(self.pids[i], sig)
            except ProcessLookupError:
                pass
            wait_gone(self.pids[i])
            self.pids[i] = None

    def restart(self, i, host=None):
        self.kill(i, signal.SIGTERM)
        old = self.addrs[i]
        self._start(i, host)
        if host is None:
            assert self.addrs[i] == old, f"server {i} came back as {self.addrs[i]}, not {old}"
        self.env["CHFS_SERVER"] = ",".join(a for a in self.addrs if a)

    def add(self):
        i = self.n
        self.n += 1
        self.dirs.append(os.path.join(self.tmp, f"srv{i}"))
        self.addrs.append(None)
        self.pids.append(None)
        self._start(i)
        self.env["CHFS_SERVER"] = ",".join(a for a in self.addrs if a)
        return i

    def wipe(self):
        """Empty the namespace (ci/testlib/chfs_wipe.py, one client process) so that the pool can
        serve the next test as a fresh one. False, with the reason in .wipe_error, if a server
        is gone (a test killed or stopped it) or the wipe failed: then use a new pool."""
        self.wipe_error = next((f"server {i} is not running" for i, pid in enumerate(self.pids)
                                if not pid or not _running(pid)), None)
        if self.wipe_error is None and len(self.pids) != self.servers:
            self.wipe_error = f"{len(self.pids)} servers, started with {self.servers}"
        if self.wipe_error is None and self.env.get("CHFS_SERVER") != ",".join(self.addrs):
            self.wipe_error = "a server's address changed"  # restart(i, host=...)
        if self.wipe_error is None:
            env = dict(self.env, CHFS_XPRT_LOCAL="1")  # no libfabric load
            for san, lib in (("tsan", "libtsan.so"), ("asan", "libasan.so")):
                if san in stack_prefix():  # python is not instrumented: its runtime goes first
                    env["LD_PRELOAD"] = subprocess.run(["gcc", f"-print-file-name={lib}"],
                                                       capture_output=True, text=True).stdout.strip()
            r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "chfs_wipe.py")],
                               env=env, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                self.wipe_error = (r.stderr or r.stdout).strip()[-500:]
        end = time.time() + 2
        while self.wipe_error is None and (left := self._data_files()):
            if time.time() > end:  # tests look at the storage directories: they start empty
                self.wipe_error = f"backing files left: {left[:3]}"
            time.sleep(0.05)
        return self.wipe_error is None

    def _data_files(self):
        return [os.path.join(r, f) for d in self.dirs for r, _, fs in os.walk(os.path.join(d, "data"))
                for f in fs]

    def run(self, argv, check=True, timeout=120, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(argv, env=kw.pop("env", self.env), check=check, timeout=timeout, **kw)

    def stop(self):
        stop_all(self.pids)
        if self._own_tmp:
            subprocess.run(["rm", "-rf", self.tmp], check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def lend_module_pool(request, module_chfs_pool):
    """Generator for a module's own `chfs_pool` fixture: the module's shared default pool,
    emptied after each test (ChfsPool.wipe: a fresh namespace, as isolating as a new pool for
    tests that only use the namespace) and replaced by a new one when a test left a server
    down or the wipe failed. A test that parametrizes chfs_pool indirectly (another shape)
    gets a pool of its own, as with the root fixture. Starting 4 servers per test was ~2-3 s."""
    params = dict(getattr(request, "param", {}) or {})
    if params:
        pool = ChfsPool(tmp=str(module_chfs_pool["tmp"].mktemp("pool")), **params)
        try:
            yield pool
        finally:
            pool.stop()
        return
    pool = module_chfs_pool["pool"]
    if pool is None:
        pool = module_chfs_pool["pool"] = ChfsPool(tmp=str(module_chfs_pool["tmp"].mktemp("pool")))
    env, pids = dict(pool.env), list(pool.pids)
    try:
        yield pool
    finally:
        pool.env.clear()
        pool.env.update(env)
        # A server restarted (same address) or killed: not the pool as started, use a new one.
        # A failed wipe of an intact pool is worth a warning (the test passed, though).
        intact = pool.pids == pids
        if not intact or not pool.wipe():
            if intact:
                warnings.warn(f"module pool replaced after {request.node.name}: {pool.wipe_error}")
            pool.stop()
            module_chfs_pool["pool"] = None
