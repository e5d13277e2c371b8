"""Renaming an empty directory is one atomic request when one server owns both names: a RENAME
at that server, as for a file (lib/dir_rename.c dir_rename). The walk that moves a non-empty
directory's entries (make the target, list, move, check empty, remove the source, set the
times back) is only for directories with entries; it used to be taken for every directory, so
an empty one cost a dozen requests and other clients could list both names, or neither."""
import subprocess

import pytest

from chfsutil import err_name, io, owner
from poolstatus import ops, ops_delta

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool

# The walk's own requests: none of them may be sent for an empty directory. (SETATTRs are
# the parent's mtime when another server owns it, as for a file rename.) One DIR_EMPTY per
# server is: the check that fences the directory before it moves (server/fence.c), so that a
# create in it by another client is refused rather than left under the old name.
WALK_OPS = ("insert", "remove_if", "rmdir")


def same_owner_names(pool, top, tries=200):
    """Two names under top whose entries one server owns (a RENAME there moves the directory)."""
    a = f"{top}/x0"
    own = owner(pool, a)
    for k in range(1, tries):
        if owner(pool, f"{top}/x{k}") == own:
            return a, f"{top}/x{k}"
    pytest.fail(f"no name with the owner of {a} among {tries}")


@pytest.mark.timeout(120)
def test_an_empty_directory_renames_in_one_request(chfs_pool):
    io(chfs_pool, "mkdir", "/d")
    a, b = same_owner_names(chfs_pool, "/d")
    io(chfs_pool, "mkdir", a)
    before = ops(chfs_pool.env)
    io(chfs_pool, "rename", a, b)
    d = ops_delta(before, ops(chfs_pool.env))
    assert d.get("rename") == 1, d
    assert not [op for op in WALK_OPS if op in d], d
    assert d.get("dir_empty") == len(chfs_pool.addrs), d  # the fence: one fan-out
    assert d.get("setattr", 0) <= 2, d  # /d's mtime, for the removal and the addition
    assert io(chfs_pool, "stat", b).stdout.split()[0].startswith(b"40")
    assert err_name(io(chfs_pool, "stat", a, check=False)) == "ENOENT"


OBSERVER = """
import os, sys
names = {sys.argv[1], sys.argv[2]}
seen, bad = 0, []
while True:
    listed = set(os.listdir('/chfs/d'))
    if 'stop' in listed:
        break
    seen += 1
    if len(listed & names) != 1:
        bad.append(sorted(listed & names))
print(seen, len(bad), bad[:5])
"""

RENAMER = """
import os, sys
a, b = '/chfs/d/' + sys.argv[1], '/chfs/d/' + sys.argv[2]
for _ in range(int(sys.argv[3])):
    os.rename(a, b)
    os.rename(b, a)
os.mkdir('/chfs/d/stop')
"""


@pytest.mark.hook
@pytest.mark.timeout(300)
def test_a_concurrent_lister_sees_exactly_one_name_of_a_renamed_empty_directory(chfs_pool):
    io(chfs_pool, "mkdir", "/d")
    a, b = same_owner_names(chfs_pool, "/d")
    io(chfs_pool, "mkdir", a)
    na, nb = a.rsplit("/", 1)[1], b.rsplit("/", 1)[1]
    run = ["chfs-run", "--", "/usr/bin/python3", "-c"]
    obs = subprocess.Popen(run + [OBSERVER, na, nb], env=chfs_pool.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        r = subprocess.run(run + [RENAMER, na, nb, "150"], env=chfs_pool.env, capture_output=True,
                           text=True, timeout=200)
        assert r.returncode == 0, r.stderr
        out, err = obs.communicate(timeout=60)
    finally:
        obs.kill()
        obs.wait()
    assert obs.returncode == 0, err
    seen, nbad, examples = out.split(" ", 2)
    assert int(seen) > 0, out
    assert int(nbad) == 0, f"{nbad} of {seen} listings did not show exactly one name: {examples}"
