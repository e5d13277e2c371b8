"""The POSIX conformance table (issue 16 item 6): every case of conformance_run.py — errno parity
(ELOOP, ENOTDIR, EEXIST, EINVAL, EXDEV, ENOTEMPTY, EISDIR, EFAULT for bad pointers and NULL),
names, hard links, files that outlive their name, FIFOs/sockets/devices, times and counts — runs
on tmpfs (the reference), on a chfuse mount (allow_other) and under the hook, as root and as a
second user, and every transcript must equal tmpfs's, except the cases KNOWN lists; the README's
"POSIX semantics" section names each of them with the same reason. A known case that starts to
agree fails the test too, so the list and the README stay true.

Before this change the hook crashed or answered wrongly for bad pointers (NULL gave
ENAMETOOLONG: the kernel read the trampoline in page 0), renaming a directory over a file gave
EEXIST (ENOTDIR), over a non-empty directory EEXIST (ENOTEMPTY), over an empty one EXDEV,
utimensat(AT_SYMLINK_NOFOLLOW) changed the target, and a rename left ctime alone; renaming a
non-empty directory gave EXDEV until lib/dir_rename.c (rename-nonempty-dir agrees now); a
create under the hook in the same second as another process renamed its directory landed under
the old name, where nothing listed it, until the directory fence (server/fence.c;
dir-renamed-by-other-process-at-once agrees now).
`packages/chfs/bench/run-conformance` prints the pass counts per path and writes them as CSV.
"""
import os

import pytest

from ci.testlib import conformance

# (path, case): why CHFS still differs from tmpfs there (the README's POSIX section says the same).
KNOWN = {}  # (beyond-4k-from-the-root agrees since names may be 16,383 bytes: test_long_paths.py)
PENDING = {}

README = os.path.join(conformance.ROOT, "README.md")


@pytest.mark.hook
@pytest.mark.timeout(600)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_every_case_matches_tmpfs_on_chfuse_and_under_the_hook(chfs_pool):
    assert os.geteuid() == 0, "this test acts as a second user and must run as root"
    results = conformance.run_table(chfs_pool)
    diffs = conformance.differences(results)
    expected = {**KNOWN, **PENDING}
    unexpected = {k: v for k, v in diffs.items() if (k[0], k[2]) not in expected}
    assert not unexpected, "\n".join(f"== {p} as {u}: {c}\n{conformance.show(*v)}"
                                     for (p, u, c), v in sorted(unexpected.items()))
    agreeing = sorted(k for k in expected if not any((d[0], d[2]) == k for d in diffs))
    assert not agreeing, f"these now agree with tmpfs: take them out of KNOWN/PENDING: {agreeing}"
    with open(README) as f:
        readme = f.read()
    assert all(c in readme for _, c in KNOWN), "the README's POSIX section must name every KNOWN case"


def test_the_reference_runs_every_case_cleanly():
    """On tmpfs nothing crashes and every case runs (the table itself is sound)."""
    ws = conformance.Workspace()
    try:
        got = conformance.on_tmpfs(ws, "root")
    finally:
        ws.close()
    assert "(runner)" not in got, got.get("(runner)")
    assert set(got) == {c for c, _ in conformance.load_cases()}
    assert not any("crash" in line for lines in got.values() for line in lines)
