"""Helpers of the ad_chfs integration tests: MPI job runner, native checks, expected bytes.

Named uniquely (not "helpers") because pytest puts every tests directory on sys.path.
"""
import os
import subprocess
from pathlib import Path

CACHE = Path(os.environ.get("CHFS_STACK_CACHE", Path.home() / ".cache" / "chfs-stack"))
CHFS_PREFIX = Path(os.environ.get("CHFS_STACK_PREFIX", CACHE / "prefix"))
MPICH_PREFIX = CACHE / "mpich" / "prefix"
MPI_TIMEOUT = 120  # seconds per MPI job; the jobs here take a few seconds


def pkg_config(*args):
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = ":".join(
        [str(CHFS_PREFIX / "lib" / "pkgconfig"), env.get("PKG_CONFIG_PATH", "")])
    return subprocess.run(["pkg-config", *args, "chfs"], check=True, env=env,
                          capture_output=True, text=True).stdout.split()


def client_env(pool_env, mpich_lib, extra=None):
    """Environment of an MPI job on the pool: our libmpich first, then libchfs."""
    env = dict(os.environ)
    env.update(pool_env)
    env["LD_LIBRARY_PATH"] = ":".join(
        p for p in (str(mpich_lib), str(CHFS_PREFIX / "lib"), env.get("LD_LIBRARY_PATH"))
        if p)
    env.pop("ROMIO_FSTYPE_FORCE", None)
    env.update(extra or {})
    return env


class Mpi:
    """Runs MPI jobs and native checks against one pool."""

    def __init__(self, progs, env):
        self.progs = progs
        self.env = env

    def run(self, prog, *args, n=4, env=None, check=True, launcher=("-launcher", "fork"),
            hosts=None, timeout=MPI_TIMEOUT):
        cmd = ["mpiexec", *launcher]
        if hosts:
            cmd += ["-hosts", ",".join(hosts)]
        cmd += ["-n", str(n), str(self.progs / prog), *map(str, args)]
        full_env = dict(self.env)
        full_env.update(env or {})
        try:
            r = subprocess.run(cmd, env=full_env, capture_output=True, text=True,
                               timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{' '.join(cmd)} did not finish in {timeout} s:\n"
                                 f"{e.stdout}\n{e.stderr}") from None
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}\n"
                                 f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        return r

    def mkdir(self, *dirs):
        """Create CHFS directories (with parents) through the core's chmkdir tool."""
        subprocess.run(["chmkdir", "-p", *dirs], env=self.env, check=True, timeout=60)

    def native(self, *args):
        """chfs_cat through the native API: bytes of a file, or --size/--chunk-size."""
        r = subprocess.run([str(self.progs / "chfs_cat"), *args], env=self.env,
                           capture_output=True, timeout=60)
        return r


def pool_client_env(pool):
    """Client environment of the core's pool fixture (CHFS_SERVER, CHFS_SECRET_FILE, ...)."""
    env = getattr(pool, "env", None)
    if callable(env):
        env = env()
    if not isinstance(env, dict):
        raise TypeError(f"chfs_pool fixture has no client environment dict: {pool!r}")
    return {k: str(v) for k, v in env.items()}


def pattern(size):
    """Byte i of every file mpiio_pattern writes: (i*131 + 7) % 251 (period 251)."""
    cycle = bytes((i * 131 + 7) % 251 for i in range(251))
    return (cycle * (size // 251 + 1))[:size]
