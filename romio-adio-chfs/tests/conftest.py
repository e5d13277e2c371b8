"""Fixtures of the MPI-IO (ad_chfs) integration tests.

The tests run real MPI jobs: small C programs compiled with Debian's `mpicc` / `h5pcc`, started
by Debian's `mpiexec` (hydra), with our MPICH (built by romio-adio-chfs/build-mpich) found first
through LD_LIBRARY_PATH — exactly how users run Debian binaries on CHFS. The CHFS pool comes
from the shared `chfs_pool` fixture (repo-root conftest.py); contents are checked through the
native API by `chfs_cat` (tests/progs/chfs_cat.c, linked with libchfs).

A missing MPICH build or compiler is a test failure with a message, never a skip: the README's
test command builds everything first.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

from adchfs_testlib import (MPICH_PREFIX, Mpi, client_env, pkg_config,
                            pool_client_env)
from ci.testlib.chfs_pool import ChfsPool

HERE = Path(__file__).resolve().parent
PROGS = HERE / "progs"


@pytest.fixture(scope="session")
def mpich_lib():
    """Directory of our libmpich.so.12 (with ad_chfs), checked to link libchfs."""
    lib = MPICH_PREFIX / "lib" / "libmpich.so.12"
    if not lib.exists():
        pytest.fail(f"{lib} missing: run romio-adio-chfs/build-mpich (ci/setup does)")
    dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    if "libchfs" not in dyn:
        pytest.fail(f"{lib} is not linked with libchfs: rerun romio-adio-chfs/build-mpich")
    return lib.parent


@pytest.fixture(scope="session")
def progs(tmp_path_factory):
    """The test programs, compiled once per session."""
    out = tmp_path_factory.mktemp("mpiio-progs")
    for tool in ("mpicc", "h5pcc", "mpiexec", "gcc"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} not found (ci/setup-deps installs it)")

    def cc(cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=out)
        if r.returncode != 0:
            pytest.fail(f"compiling failed: {' '.join(cmd)}\n{r.stderr}")

    for name in ("mpiio_pattern", "mpiio_ops"):
        cc(["mpicc", "-O2", "-Wall", "-o", str(out / name), str(PROGS / f"{name}.c")])
    cc(["h5pcc", "-O2", "-o", str(out / "h5_2d"), str(PROGS / "h5_2d.c")])
    cc(["gcc", "-O2", "-Wall", *pkg_config("--cflags"), "-o", str(out / "chfs_cat"),
        str(PROGS / "chfs_cat.c"), *pkg_config("--libs")])
    return out


def make_mpi(pool, progs, mpich_lib):
    m = Mpi(progs, client_env(pool_client_env(pool), mpich_lib))
    m.mkdir("/mpiio", "/h5")    # MPI-IO creates files, not their directories
    return m


@pytest.fixture
def mpi(chfs_pool, progs, mpich_lib):
    """MPI jobs on a pool of this test alone (for tests that harm the pool)."""
    return make_mpi(chfs_pool, progs, mpich_lib)


@pytest.fixture(scope="module")
def shared_mpi(progs, mpich_lib, tmp_path_factory):
    """MPI jobs on one pool shared by a module's tests (each uses its own file names); the
    same ChfsPool as the chfs_pool fixture, kept for the module to save start-ups."""
    pool = ChfsPool(tmp=str(tmp_path_factory.mktemp("mpiio-pool")))
    try:
        yield make_mpi(pool, progs, mpich_lib)
    finally:
        pool.stop()


