"""A mapped open follows the path, not a directory met on an earlier open (issue 13).

The seccomp supervisor keeps a descriptor of each mapping target's directory so that a long
target is not walked at every open (src/target_dir.c). A descriptor follows its directory where a
path does not: these tests rotate the directories on the way during the job (`mv out out.1;
mkdir out`, at two depths, and a symbolic link switched) and check that every later open through
the mapping reads the file the path names now, as ptrace (which rewrites the path) does.
"""
import os
import subprocess

import pytest

from ci.testlib.chfs_pool import stack_env, stack_prefix

JOB = os.path.join(stack_prefix(), "bin", "chfs-job")
ROTATE = """set -e
cat m; cat m2
mv a/b/out a/b/out.1; mkdir a/b/out; echo NEW > a/b/out/f
cat m
mv a a.1; mkdir -p a/b/out; echo NEWER > a/b/out/f
cat m
chmod 0 a/b; cat m 2>/dev/null || echo DENIED; chmod 755 a/b
ln -sfn a.1 l.new; mv -T l.new l
cat m2
"""


@pytest.mark.parametrize("method", ["seccomp", "ptrace"])
def test_mapped_open_follows_renamed_and_replaced_directories(tmp_path, method):
    # a way long enough to be kept (target_dir.c keeps directories of 256 characters and more)
    top = tmp_path / ("L" * 200) / ("M" * 60)
    out = top / "a" / "b" / "out"
    out.mkdir(parents=True)
    (out / "f").write_text("OLD\n")
    os.symlink("a", top / "l")
    pol = tmp_path / "p.yaml"
    pol.write_text(f"paths:\n  {top}/m: {out}/f\n  {top}/m2: {top}/l/b/out/f\n")
    r = subprocess.run([JOB, "-m", method, "-p", str(pol), "--", "sh", "-c", ROTATE], cwd=top,
                       capture_output=True, text=True, timeout=60, env=stack_env())
    assert r.returncode == 0, r.stderr
    # root reads through a mode of 0, so DENIED shows only for other users
    denied = "DENIED\n" if os.geteuid() != 0 else "NEWER\n"
    assert r.stdout == "OLD\nOLD\nNEW\nNEWER\n" + denied + "NEW\n", r.stdout
