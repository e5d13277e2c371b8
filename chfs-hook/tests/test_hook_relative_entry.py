"""Relative names that walk into a mount point from a local directory (chfs-hook/hook/enter.c).

With the working directory or a directory descriptor in the local file system, "chfs/f" from the
mount point's parent or "../chfs/f" from a sibling names a file under the mount point, as on a
kernel mount (chfuse). Before enter.c the hook handed such names to the kernel, which has no such
directory: ENOENT, or a write landed in a local directory of that name. A namesake elsewhere (a
local "other/chfs") stays local; ".." back out of the mount point reaches local files; a program
whose first CHFS name is relative loads the hook library for it (the loader's lazy gate).
"""
import os
import subprocess
import sys

import pytest

from ci.testlib.chfs_pool import ChfsPool

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with ChfsPool(servers=2, tmp=str(tmp_path_factory.mktemp("entrypool"))) as p:
        yield p


def hooked(pool, mount, argv, cwd, env=None):
    r = subprocess.run(["chfs-run", "--mount", mount, "--"] + argv, cwd=cwd,
                       env={**pool.env, "CHFS_HOOK_LOCAL": "0", **(env or {})},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout


@pytest.fixture
def job(pool, tmp_path):
    """A job directory with the mount point job/chfs (showing CHFS /rel, holding f), a local
    sibling job/sub and a local namesake job/other/chfs/f."""
    pool.run(["chfs-io", "mkdir", "/rel"], check=False)
    pool.run(["chfs-io", "put", "/rel/f", "0", "create"], input="in chfs\n", text=True)
    job = tmp_path / "job"
    (job / "sub").mkdir(parents=True)
    (job / "sub" / "local.txt").write_text("local\n")
    (job / "other" / "chfs").mkdir(parents=True)
    (job / "other" / "chfs" / "f").write_text("namesake\n")
    return job


@pytest.mark.parametrize("load", ["eager", "lazy"])
def test_relative_names_from_a_local_directory_enter_the_mount_point(pool, job, load):
    script = """
set -e
cat chfs/f
ls chfs
echo written > chfs/g
cd sub && cat ../chfs/f && cd ..
cat chfs/../sub/local.txt
cat other/chfs/f
mkdir chfs/d && test -d chfs/d && ! test -e other/chfs/d && echo mkdir-ok
"""
    env = {"CHFS_HOOK_EAGER": "1" if load == "eager" else "0"}
    out = hooked(pool, f"{job}/chfs=/rel", ["bash", "-c", script], cwd=str(job), env=env)
    assert out.splitlines() == ["in chfs", "f", "in chfs", "local", "namesake", "mkdir-ok"]
    assert pool.run(["chfs-io", "get", "/rel/g"]).stdout == "written\n"
    assert not (job / "chfs").exists()  # nothing was created in the local file system
    pool.run(["chfs-io", "unlink", "/rel/g"])
    pool.run(["chfs-io", "rmdir", "/rel/d"])


def test_a_first_chfs_name_that_is_relative_loads_the_hook(pool, job):
    """cat's only CHFS name is relative: the lazy gate must load the hook library for it."""
    out = hooked(pool, f"{job}/chfs=/rel", ["cat", "chfs/f"], cwd=str(job),
                 env={"CHFS_HOOK_EAGER": "0"})
    assert out == "in chfs\n"


def test_directory_descriptor_calls_from_the_parent_enter_the_mount_point(pool, job):
    script = f"""
import os, sys
top = os.open({str(job)!r}, os.O_RDONLY | os.O_DIRECTORY)
print(open(os.open("chfs/f", os.O_RDONLY, dir_fd=top)).read().strip())
print(os.stat("chfs", dir_fd=top).st_dev != os.fstat(top).st_dev)
os.mkdir("chfs/viafd", dir_fd=top)
print(sorted(os.listdir(os.open("chfs", os.O_RDONLY | os.O_DIRECTORY, dir_fd=top))))
os.rmdir("chfs/viafd", dir_fd=top)
print(open(os.open("other/chfs/f", os.O_RDONLY, dir_fd=top)).read().strip())
"""
    out = hooked(pool, f"{job}/chfs=/rel", [sys.executable, "-c", script], cwd="/")
    assert out.splitlines() == ["in chfs", "True", "['f', 'viafd']", "namesake"]


def test_a_local_namesake_does_not_load_the_hook(pool, job):
    """other/chfs/f has the mount point's last component but is reached elsewhere: the lazy gate
    checks the directory's identity before loading the hook library (0.2 s and a pool join)."""
    script = """
def loaded():
    return "libchfs-hook.so" in open("/proc/self/maps").read()
print(open("other/chfs/f").read().strip(), loaded())
print(open("chfs/f").read().strip(), loaded())
"""
    out = hooked(pool, f"{job}/chfs=/rel", [sys.executable, "-c", script], cwd=str(job),
                 env={"CHFS_HOOK_EAGER": "0"})
    assert out.splitlines() == ["namesake False", "in chfs True"]
