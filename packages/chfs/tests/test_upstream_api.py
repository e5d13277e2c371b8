"""Upstream `chfs.h` compatibility, tested the way upstream's users call it.

ior_shaped.c repeats IOR's CHFS backend (hpc/ior aiori-CHFS.c) call for call — IOR's own flag
words passed to chfs_create/chfs_open, pwrite/fsync/close, stat, pread with every byte
verified, unlink — under MPICH at 1 and 4 ranks, file-per-process and shared file. The other
tests pin down single behaviours: chfs_open ignores the access mode as upstream's does,
chfs_create never truncates without O_TRUNC, chfs_create makes missing parents (visible in
listings) while the POSIX open call keeps returning ENOENT.

The MPI programs link Debian's mpicc against our MPICH (romio-adio-chfs/build-mpich, found
through LD_LIBRARY_PATH as the MPI-IO tests do); a missing MPICH is a failure, not a skip.
"""
import os
import subprocess
from pathlib import Path

import pytest

from chfsutil import io

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("CHFS_STACK_CACHE", Path.home() / ".cache" / "chfs-stack"))
MPICH_LIB = CACHE / "mpich" / "prefix" / "lib"


def _cflags():
    return subprocess.run(["pkg-config", "--cflags", "--libs", "chfs"], capture_output=True,
                          text=True, check=True).stdout.split()


def _san():
    # Against a sanitizer build (ci/test --asan/--tsan) the program must carry the runtime too.
    prefix = os.environ["CHFS_STACK_PREFIX"]
    return (["-fsanitize=address,undefined"] if "asan" in prefix else
            ["-fsanitize=thread"] if "tsan" in prefix else [])


@pytest.fixture(scope="module")
def ior_shaped(tmp_path_factory):
    if not (MPICH_LIB / "libmpich.so.12").exists():
        pytest.fail(f"{MPICH_LIB}/libmpich.so.12 missing: run romio-adio-chfs/build-mpich")
    out = tmp_path_factory.mktemp("ior-shaped") / "ior_shaped"
    prefix = os.environ["CHFS_STACK_PREFIX"]
    subprocess.run(["mpicc", "-O2", "-Wall", "-o", str(out), str(HERE / "ior_shaped.c"),
                    *_san(), *_cflags(), "-Wl,-rpath," + prefix + "/lib"], check=True)
    return out


def run_mpi(pool, prog, n, *args, timeout=120):
    env = dict(pool.env)
    env["LD_LIBRARY_PATH"] = ":".join(
        p for p in (str(MPICH_LIB), env.get("LD_LIBRARY_PATH")) if p)
    cmd = ["mpiexec", "-launcher", "fork", "-n", str(n), str(prog), *map(str, args)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                       start_new_session=True)
    assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.startswith("ok "), r.stdout
    return r


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ranks", [1, 4])
@pytest.mark.parametrize("layout", ["fpp", "shared"])
def test_ior_shaped_client_writes_reads_and_verifies_every_byte(chfs_pool, ior_shaped, ranks,
                                                                layout):
    """IOR's flags (0x01 = read-only to IOR, O_WRONLY to POSIX) must not make reads fail, and
    create on every rank of a shared file must not wipe another rank's bytes."""
    io(chfs_pool, "mkdir", "/ior")
    for rep in range(3):   # the create race of the shared layout is timing-dependent: repeat
        run_mpi(chfs_pool, ior_shaped, ranks, f"/ior/{layout}{rep}", layout, 1 << 20, 65536, 2)
    # the deterministic form of that race: rank 0 writes before the others create
    run_mpi(chfs_pool, ior_shaped, ranks, f"/ior/{layout}-st", layout, 1 << 20, 65536, 2,
            "stagger")
    # -o /bw/f with /bw missing: upstream creates the parents implicitly
    run_mpi(chfs_pool, ior_shaped, ranks, f"/bw{layout}{ranks}/sub/f", layout, 256 << 10,
            65536, 1)
    assert io(chfs_pool, "stat", f"/bw{layout}{ranks}/sub").stdout.split()[0].startswith(b"4")


@pytest.fixture(scope="module")
def api_cases(tmp_path_factory):
    out = tmp_path_factory.mktemp("api-cases") / "api_cases"
    prefix = os.environ["CHFS_STACK_PREFIX"]
    subprocess.run(["cc", "-O2", "-Wall", "-o", str(out), str(HERE / "api_cases.c"), *_san(),
                    *_cflags(), "-Wl,-rpath," + prefix + "/lib"], check=True)
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["recreate-dirty", "create-keeps", "open-any-mode",
                                  "missing-parents", "posix-create", "rename-while-writing",
                                  "ftruncate-after-rename", "fstat-after-rename"])
def test_open_and_create_semantics(chfs_pool, api_cases, case):
    """recreate-dirty: an O_TRUNC create over a file this process still has dirty is empty
    (was 1 MiB of zeros). create-keeps: create without O_TRUNC keeps the bytes. open-any-mode:
    chfs_open ignores the access mode. missing-parents: chfs_create makes them, listed;
    chfs_open_posix says ENOENT. posix-create: a second O_CREAT opener keeps the first's bytes.
    rename-while-writing: another process renames a file being written; after close the new
    name has the full size and bytes (was size 0), an unlinked one does not come back.
    ftruncate-after-rename: ftruncate of an open file renamed by another process reaches it
    by file id (was ENOENT). fstat-after-rename: fstat of an open file another process renamed
    and grew gives the grown size (was 0: the old name was looked up)."""
    r = subprocess.run([str(api_cases), case, f"/{case}"], env=chfs_pool.env,
                       capture_output=True, text=True, timeout=50)
    assert r.returncode == 0 and r.stdout == "ok\n", f"{case}: {r.stdout}{r.stderr}"
