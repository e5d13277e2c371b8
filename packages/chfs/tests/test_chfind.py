"""chfind — find evaluated on the servers: results equal GNU find's on the same tree (same
names, sizes and mtimes built in CHFS and in a local directory) for -name, -size (+/-/exact
with c/k/M units and the default blocks), -newer, -type and their combinations, on a 4-server
pool and across 4 servers in network namespaces; results larger than one reply page through
each server's session; chfindrun's ranks together give the same set; the counts of -v add up;
errors are reported."""
import os
import re
import subprocess

import pytest

from findtree import build_chfs, build_local, find_set, manifest

# chfs_pool: one default pool for the module's tests, emptied between them (conftest.py);
# these tests use it only through its namespace.
pytestmark = pytest.mark.module_pool

EXPRS = [
    [],
    ["-name", "*.txt"],
    ["-name", "f1*"],
    ["-name", ".*"],
    ["-name", "d*"],
    ["-name", "[fd][0-9]?"],
    ["-type", "f"],
    ["-type", "d"],
    ["-type", "l"],
    ["-type", "f", "-size", "1"],
    ["-type", "f", "-size", "-1"],
    ["-type", "f", "-size", "+1"],
    ["-type", "f", "-size", "2"],
    ["-type", "f", "-size", "512c"],
    ["-type", "f", "-size", "+512c"],
    ["-type", "f", "-size", "-513c"],
    ["-type", "f", "-size", "1k"],
    ["-type", "f", "-size", "+1k"],
    ["-type", "f", "-size", "-2k"],
    ["-type", "f", "-size", "3k"],
    ["-type", "f", "-size", "1M"],
    ["-type", "f", "-size", "-1M"],
    ["-type", "f", "-size", "+1M"],
    ["-type", "f", "-size", "2M"],
    ["-type", "f", "-size", "+0"],
    ["-newer", "REF"],
    ["-type", "f", "-newer", "REF"],
    ["-type", "d", "-newer", "REF"],
    ["-name", "*.c", "-type", "f", "-size", "-2k", "-newer", "REF"],
    ["-type", "f", "-size", "+1k", "-size", "-1025k"],
    ["-name", "*.dat", "-a", "-type", "f"],
]


def ref_file(lines):
    """A file of the tree with a mid-range mtime, as the -newer reference."""
    files = sorted((int(l.split()[3]), l.split()[1]) for l in lines if l.startswith("f "))
    return files[len(files) // 2][1]


def expand(expr, ref, root):
    return [f"{root}/{ref}" if a == "REF" else a for a in expr]


def gnu_find(local, lines, expr):
    ref = ref_file(lines)
    r = subprocess.run(["find", f"{local}/t", *expand(expr, ref, str(local))], capture_output=True,
                       text=True, timeout=60, check=True)
    return find_set(r.stdout, str(local))


def compare_all(run_chfind, local, lines):
    ref = ref_file(lines)
    for expr in EXPRS:
        want = gnu_find(local, lines, expr)
        r = run_chfind(["/t", *expand(expr, ref, "")])
        assert r.returncode == 0, (expr, r.stderr)
        got = find_set(r.stdout, "/")
        assert len(r.stdout.splitlines()) == len(got), f"{expr}: duplicates"
        assert got == want, f"{expr}: only chfind {sorted(got - want)[:5]}, only find {sorted(want - got)[:5]}"


@pytest.fixture
def tree(tmp_path):
    lines = manifest(600, seed=7)
    build_local(lines, tmp_path / "local")
    return lines, tmp_path / "local"


@pytest.mark.timeout(300)
def test_chfind_equals_gnu_find_on_four_servers(chfs_pool, tree):
    lines, local = tree
    build_chfs(lines, chfs_pool.env)
    # the expressions are not vacuous: each kind of test selects a proper, non-empty subset
    everything = gnu_find(local, lines, [])
    assert len(everything) == len(lines)
    for expr in (["-name", "*.txt"], ["-type", "f", "-size", "-2k"], ["-newer", "REF"], ["-type", "d"],
                 ["-type", "f", "-size", "1M"], ["-type", "f", "-size", "+1M"]):
        assert 0 < len(gnu_find(local, lines, expr)) < len(everything), expr
    compare_all(lambda a: chfs_pool.run(["chfind", *a], check=False, capture_output=True), local, lines)
    # the client-side walk (upstream's method) agrees too
    compare_all(lambda a: chfs_pool.run(["chfind", "--walk", *a], check=False, capture_output=True),
                local, lines)


@pytest.mark.timeout(300)
def test_chfind_start_paths_and_errors(chfs_pool, tree):
    lines, local = tree
    build_chfs(lines, chfs_pool.env)
    run = lambda *a: chfs_pool.run(["chfind", *a], check=False, capture_output=True)
    sub = next(l.split()[1] for l in lines if l.startswith("d t/"))
    for start in (sub, sub + "/"):
        want = subprocess.run(["find", f"{local}/{start}"], capture_output=True, text=True,
                              check=True).stdout.replace(str(local), "")
        got = run(f"/{start}").stdout
        assert sorted(got.splitlines()) == sorted(want.splitlines())
    # a file as the start: itself if it matches
    f = next(l.split()[1] for l in lines if l.startswith("f "))
    assert run(f"/{f}").stdout == f"/{f}\n"
    assert run(f"/{f}", "-type", "d").stdout == ""
    # the whole pool from the root, and several starts
    assert len(run().stdout.splitlines()) == len(lines) + 1
    below_sub = subprocess.run(["find", f"{local}/{sub}"], capture_output=True, text=True).stdout
    assert len(run("/t", f"/{sub}").stdout.splitlines()) == len(lines) + len(below_sub.splitlines())
    r = run("/nosuch")
    assert r.returncode == 1 and "/nosuch" in r.stderr and "No such file" in r.stderr
    for bad in (["-o"], ["-size", "1x"], ["-type", "q"], ["-name"], ["-newer", "/nosuch-ref"]):
        r = run("/t", *bad)
        assert r.returncode == 1 and r.stdout == "" and r.stderr.strip(), bad
    r = run("-v", "/t", "-type", "f")
    counts = [tuple(map(int, m)) for m in re.findall(r"server \d+: (\d+) matched of (\d+) examined", r.stderr)]
    assert len(counts) == 4
    nfiles = sum(1 for l in lines if l.startswith("f "))
    assert sum(c[0] for c in counts) == nfiles == len(r.stdout.splitlines())
    assert sum(c[1] for c in counts) == len(lines) - 1  # every entry below /t examined once
    assert all(c[1] > 0 for c in counts)  # the tree is spread over all servers
    assert f"MATCHED {nfiles}/{len(lines) - 1}" in r.stderr


@pytest.mark.timeout(300)
def test_chfindrun_ranks_together_equal_chfind(chfs_pool, tree, tmp_path):
    lines, local = tree
    build_chfs(lines, chfs_pool.env)
    want = gnu_find(local, lines, ["-name", "*.txt"])
    for n in ("1", "2", "3", "4"):
        r = chfs_pool.run(["chfindrun", "-n", n, "-v", "--", "/t", "-name", "*.txt"], check=False,
                          capture_output=True)
        assert r.returncode == 0, r.stderr
        assert find_set(r.stdout, "/") == want and len(r.stdout.splitlines()) == len(want)
        assert f"MATCHED {len(want)}/{len(lines) - 1}" in r.stderr
    out = tmp_path / "out"
    r = chfs_pool.run(["chfindrun", "-n", "2", "-output_dir", str(out), "--", "/t", "-type", "d"],
                      check=False, capture_output=True)
    assert r.returncode == 0 and r.stdout == ""
    got = set()
    for rank in (0, 1):
        got |= find_set((out / f"{rank}.out").read_text(), "/")
    assert got == gnu_find(local, lines, ["-type", "d"])


@pytest.mark.timeout(600)
def test_chfind_results_larger_than_a_reply_page_through(chfs_pool, tmp_path):
    """4,000 entries with ~200-byte names: each server's matches need several replies (at
    most 120,000 bytes each), served from its session in path order."""
    lines = manifest(4000, seed=3, name_pad=190)
    build_chfs(lines, chfs_pool.env)
    build_local(lines, tmp_path / "local")
    sizes = []
    for expr in ([], ["-type", "f"], ["-name", "*.txt"]):
        r = chfs_pool.run(["chfind", "-v", "/t", *expr], check=False, capture_output=True)
        assert r.returncode == 0, r.stderr
        got = find_set(r.stdout, "/")
        # bytes of the replies: str path below t/, mode, size, mtime per entry
        sizes.append(sum(len(p) - 2 + 24 for p in got if p != "t"))
        assert len(got) == len(r.stdout.splitlines())
        want = gnu_find(tmp_path / "local", lines, expr)
        assert got == want
    per_server = [int(m) for m in re.findall(r"server \d+: (\d+) matched", r.stderr)]
    assert sum(per_server) == len(want)
    assert sizes[0] / 4 > 3 * 120000, sizes  # several pages per server on average


@pytest.mark.timeout(300)
def test_chfind_equals_gnu_find_across_namespaced_nodes(netns_cluster, tree):
    """4 servers, each in its own network namespace, and the client on a fifth node."""
    lines, local = tree
    c = netns_cluster
    pool = c.start_chfs(servers=[0, 1, 2, 3])
    runner = lambda argv, **kw: c.run(4, argv, **kw)
    build_chfs(lines, pool.env, runner=runner)
    compare_all(lambda a: c.run(4, ["chfind", *a], env=pool.env, check=False), local, lines)
    r = c.run(4, ["chfindrun", "-n", "4", "-v", "--", "/t", "-type", "f"], env=pool.env, check=False)
    nfiles = sum(1 for l in lines if l.startswith("f "))
    assert r.returncode == 0 and len(find_set(r.stdout, "/")) == nfiles, r.stderr
    assert f"MATCHED {nfiles}/{len(lines) - 1}" in r.stderr


@pytest.mark.parametrize("tool", ["chfind", "chfindrun"])
def test_chfind_tools_have_help(tool):
    from ci.testlib.chfs_pool import stack_env
    r = subprocess.run([tool, "--help"], env=stack_env(), capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and f"usage: {tool}" in r.stdout


@pytest.mark.timeout(300)
def test_chfind_under_mpiexec_splits_the_servers(chfs_pool, tree):
    """Under mpiexec each rank asks its share of the servers (PMI_RANK/PMI_SIZE; chfind does
    not link MPI): the ranks' outputs together are the whole result, each path once."""
    import shutil
    if not shutil.which("mpiexec", path=chfs_pool.env["PATH"]):
        pytest.skip("mpiexec not installed")
    lines, local = tree
    build_chfs(lines, chfs_pool.env)
    # Each rank's output to its own file: hydra forwards the ranks' stdout in chunks that may
    # split a line between two ranks' writes (seen: a path cut after "/t/d…/f" and "459.c").
    outdir = local.parent / "ranks"
    outdir.mkdir()
    r = chfs_pool.run(["mpiexec", "-n", "2", "sh", "-c",
                       f'exec chfind -v /t -type f > {outdir}/out.$PMI_RANK 2> {outdir}/err.$PMI_RANK'],
                      check=False, capture_output=True)
    assert r.returncode == 0, r.stderr
    stdout = "".join((outdir / f"out.{i}").read_text() for i in range(2))
    stderr = "".join((outdir / f"err.{i}").read_text() for i in range(2))
    got = stdout.splitlines()
    nfiles = sum(1 for l in lines if l.startswith("f "))
    assert len(got) == len(set(got)) == nfiles
    assert find_set(stdout, "/") == gnu_find(local, lines, ["-type", "f"])
    assert len(re.findall(r"^MATCHED \d+/\d+$", stderr, re.M)) == 2  # one line per rank
