"""Integration tests of the syscall hook (chfs-run) against a live local CHFS pool.

Every test runs unmodified programs — coreutils, tar, bash, dash, make, python3, Montage, and
chfs-hook-testprog for vfork/threads/fork/signals — under chfs-run with the pool's
environment, and checks what they wrote through the native API's tool (chfs-io), not through
the hook. Error numbers are compared with the same operations on a local directory.
"""
import errno
import hashlib
import os
import shutil
import subprocess
import sys
import time

import pytest

from ci.testlib.chfs_pool import ChfsPool, stack_prefix

TESTPROG = os.path.join(stack_prefix(), "libexec", "chfs-hook", "chfs-hook-testprog")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """One pool (2 servers) for the whole module: each test works in its own directory, and
    starting and stopping servers would otherwise dominate the run time."""
    with ChfsPool(servers=2, tmp=str(tmp_path_factory.mktemp("hookpool"))) as p:
        yield p


@pytest.fixture
def chfs_pool(pool):
    return pool


def hook(pool, argv, mounts=(), env=None, timeout=120, check=True, binary=False, cwd=None):
    """argv under chfs-run, on the RPC data path (CHFS_HOOK_LOCAL=0) unless the test passes
    CHFS_HOOK_LOCAL=1 (the fast-path, tar and Montage tests; the fast path serves only files
    created with local placement)."""
    env = {"CHFS_HOOK_LOCAL": "0", **(env or {})}
    cmd = ["chfs-run"]
    for m in mounts:
        cmd += ["--mount", m]
    r = subprocess.run(cmd + ["--"] + list(argv), env={**pool.env, **env},
                       capture_output=True, text=not binary, timeout=timeout, cwd=cwd)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} failed ({r.returncode}): {r.stderr}")
    return r


def sh(pool, script, shell="bash", **kw):
    return hook(pool, [shell, "-c", script], **kw)


def native_get(pool, path):
    return subprocess.run(["chfs-io", "get", path], env=pool.env, capture_output=True,
                          check=True, timeout=60).stdout


def native_ls(pool, path):
    out = pool.run(["chfs-io", "ls", path]).stdout.split()
    return sorted(n for n in out if n not in (".", ".."))


def native_stat(pool, path):
    mode, size, nlink, mtime = pool.run(["chfs-io", "stat", path]).stdout.split()
    return int(mode, 8), int(size)


def python3():
    return sys.executable


def test_rewritten_programs_run_unchanged_off_chfs(chfs_pool, tmp_path):
    d = str(tmp_path)
    out = sh(chfs_pool, f"cd {d} && seq 1 500 | sort -n | tail -n 1 > last && cat last && "
                        "(echo sub; echo two) | wc -l && sh -c 'echo $((6*7))'").stdout
    assert out.split() == ["500", "2", "42"]
    assert hook(chfs_pool, ["dash", "-c", "x=$(echo a | tr a b); echo $x"]).stdout == "b\n"
    assert hook(chfs_pool, [python3(), "-c", "import os, subprocess; "
                            "print(subprocess.run(['echo', str(os.getpid() > 0)], "
                            "capture_output=True, text=True).stdout.strip())"]).stdout == "True\n"
    for args in (["vfork", d], ["threads", d, "4"], ["forks", d, "8"], ["signals"]):
        assert hook(chfs_pool, [TESTPROG] + args).stdout == "ok\n", args


def test_coreutils_on_chfs(chfs_pool, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    nums = "".join(f"{i}\n" for i in range(1, 100001)).encode()
    (src / "nums").write_bytes(nums)
    (src / "sub" / "y").write_text("y\n")
    sh(chfs_pool, f"mkdir -p /chfs/a/b/c && cp -r {src} /chfs/a/src")
    assert native_get(chfs_pool, "/a/src/nums") == nums
    assert native_ls(chfs_pool, "/a") == ["b", "src"]
    listing = hook(chfs_pool, ["ls", "-l", "/chfs/a/src"]).stdout
    assert "nums" in listing and "sub" in listing and listing.splitlines()[-1].startswith("d")
    assert hook(chfs_pool, ["cat", "/chfs/a/src/sub/y"]).stdout == "y\n"
    assert hook(chfs_pool, ["wc", "-l", "/chfs/a/src/nums"]).stdout.split()[0] == "100000"
    digest = hook(chfs_pool, ["sha256sum", "/chfs/a/src/nums"]).stdout.split()[0]
    assert digest == hashlib.sha256(nums).hexdigest()
    hook(chfs_pool, ["cp", "/chfs/a/src/nums", str(tmp_path / "back")])
    assert (tmp_path / "back").read_bytes() == nums
    hook(chfs_pool, ["mv", "/chfs/a/src/nums", "/chfs/a/b/moved"])
    assert native_ls(chfs_pool, "/a/src") == ["sub"]
    assert native_get(chfs_pool, "/a/b/moved") == nums
    hook(chfs_pool, ["mv", "/chfs/a/b/moved", str(tmp_path / "moved-out")])  # EXDEV -> copy
    assert (tmp_path / "moved-out").read_bytes() == nums
    found = hook(chfs_pool, ["find", "/chfs/a"]).stdout.split()
    assert sorted(found) == ["/chfs/a", "/chfs/a/b", "/chfs/a/b/c", "/chfs/a/src",
                             "/chfs/a/src/sub", "/chfs/a/src/sub/y"]
    hook(chfs_pool, ["dd", "if=/dev/urandom", "of=/chfs/a/rand", "bs=1M", "count=5",
                     "status=none"])
    assert native_stat(chfs_pool, "/a/rand")[1] == 5 << 20
    hook(chfs_pool, ["dd", "if=/chfs/a/rand", f"of={tmp_path}/rand", "bs=1M", "status=none"])
    assert (tmp_path / "rand").read_bytes() == native_get(chfs_pool, "/a/rand")
    hook(chfs_pool, ["truncate", "-s", "1000", "/chfs/a/rand"])
    assert native_stat(chfs_pool, "/a/rand")[1] == 1000
    hook(chfs_pool, ["ln", "-s", "src/sub/y", "/chfs/a/link"])
    assert hook(chfs_pool, ["readlink", "/chfs/a/link"]).stdout == "src/sub/y\n"
    assert hook(chfs_pool, ["cat", "/chfs/a/link"]).stdout == "y\n"
    assert hook(chfs_pool, ["stat", "-c", "%s %F", "/chfs/a/src/sub/y"]).stdout == \
        "2 regular file\n"
    hook(chfs_pool, ["rm", "-r", "/chfs/a"])
    assert "a" not in native_ls(chfs_pool, "/")


def test_tar_create_and_extract_inside_chfs(chfs_pool, tmp_path):
    src = tmp_path / "tree"
    (src / "d1" / "d2").mkdir(parents=True)
    for i in range(20):
        (src / "d1" / f"f{i}").write_bytes(os.urandom(1000 * i + 1))
    (src / "d1" / "d2" / "exe").write_text("#!/bin/sh\n")
    (src / "d1" / "d2" / "exe").chmod(0o755)
    sh(chfs_pool, f"cp -r {src} /chfs/tree && cd /chfs && tar -cf /chfs/t.tar tree && "
                  "mkdir /chfs/x && tar -C /chfs/x -xf /chfs/t.tar",
       env={"CHFS_HOOK_LOCAL": "1", "CHFS_PLACEMENT": "local"})  # via the fast path
    for i in range(20):
        assert native_get(chfs_pool, f"/x/tree/d1/f{i}") == (src / "d1" / f"f{i}").read_bytes()
    assert native_stat(chfs_pool, "/x/tree/d1/d2/exe")[0] & 0o777 == 0o755
    assert native_stat(chfs_pool, "/x/tree/d1/d2")[0] & 0o777 == 0o755
    subprocess.run(["tar", "-tf", "-"], input=native_get(chfs_pool, "/t.tar"), check=True,
                   capture_output=True, timeout=60)


def test_bash_and_dash_scripts_with_pipelines_redirections_subshells(chfs_pool):
    for shell in ("bash", "dash"):
        d = f"/chfs/{shell}"
        sh(chfs_pool, f"""set -e
mkdir -p {d}/w && cd {d}/w
seq 1 1000 > nums
sort -rn < nums | head -n 3 > top
{{ echo first; cat top; echo last; }} > block
(cd ..; pwd > w/sub_pwd)
sh -c 'echo from-sh-c >> block'
cat nums | grep -c 7 > count
echo appended >> nums
ls > listing
test -f top && test ! -e nothing
""", shell=shell)
        assert native_get(chfs_pool, f"/{shell}/w/block").decode().split() == \
            ["first", "1000", "999", "998", "last", "from-sh-c"]
        assert native_get(chfs_pool, f"/{shell}/w/sub_pwd") == f"{d}\n".encode()
        assert native_get(chfs_pool, f"/{shell}/w/count") == b"271\n"
        assert native_get(chfs_pool, f"/{shell}/w/nums").decode().split()[-2:] == \
            ["1000", "appended"]
        assert native_get(chfs_pool, f"/{shell}/w/listing").decode().split() == \
            ["block", "count", "listing", "nums", "sub_pwd", "top"]


def test_make_builds_in_chfs(chfs_pool):
    sh(chfs_pool, "mkdir -p /chfs/mk && cd /chfs/mk && echo data > in.txt && "
                  "printf 'all: out.txt\\nout.txt: in.txt\\n\\tcat in.txt in.txt > out.txt\\n' "
                  "> Makefile")
    r = hook(chfs_pool, ["make", "-C", "/chfs/mk"])
    assert "cat in.txt in.txt" in r.stdout
    assert native_get(chfs_pool, "/mk/out.txt") == b"data\ndata\n"
    assert "Nothing to be done" in hook(chfs_pool, ["make", "-C", "/chfs/mk"]).stdout


def test_python_reads_writes_walks_and_copies_trees(chfs_pool, tmp_path):
    script = f"""
import os, shutil
os.makedirs('/chfs/py/a/b')
for i in range(5):
    with open(f'/chfs/py/a/b/f{{i}}', 'w') as f:
        f.write(str(i) * (i * 10000 + 1))
walk = sorted((r, sorted(d), sorted(f)) for r, d, f in os.walk('/chfs/py'))
print(walk)
shutil.copytree('/chfs/py', '/chfs/py2')
shutil.copytree('/chfs/py', '{tmp_path}/out')
os.chdir('/chfs/py/a')
print(os.getcwd(), sorted(os.listdir('b')))
with open('b/f3') as f:
    f.seek(5)
    print(len(f.read()))
"""
    out = hook(chfs_pool, [python3(), "-c", script]).stdout.splitlines()
    assert out[0] == str([("/chfs/py", ["a"], []), ("/chfs/py/a", ["b"], []),
                          ("/chfs/py/a/b", [], [f"f{i}" for i in range(5)])])
    assert out[1] == "/chfs/py/a " + str([f"f{i}" for i in range(5)])
    assert out[2] == str(30001 - 5)
    for i in range(5):
        want = (str(i) * (i * 10000 + 1)).encode()
        assert native_get(chfs_pool, f"/py2/a/b/f{i}") == want
        assert (tmp_path / "out" / "a" / "b" / f"f{i}").read_bytes() == want


def test_montage_tools_on_fits_files_in_chfs(chfs_pool, tmp_path):
    for tool in ("mImgtbl", "mMakeHdr", "mProjectPP", "mAdd"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (Debian package montage)")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    raw = tmp_path / "raw"
    subprocess.run([python3(), os.path.join(repo, "workflows", "gen-tiles"), "-n", "2", "-s",
                    "80", str(raw)], check=True, capture_output=True, timeout=120)
    steps = """set -e
mImgtbl {b}/raw {b}/images.tbl
mMakeHdr {b}/images.tbl {b}/template.hdr
mkdir -p {b}/proj
for t in tile_000 tile_001; do mProjectPP {b}/raw/$t.fits {b}/proj/p_$t.fits {b}/template.hdr; done
mImgtbl {b}/proj {b}/proj.tbl
mAdd -p {b}/proj {b}/proj.tbl {b}/template.hdr {b}/mosaic.fits
"""
    local = subprocess.run(["bash", "-c", steps.format(b=tmp_path)], capture_output=True,
                           text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    sh(chfs_pool, f"mkdir -p /chfs/m && cp -r {raw} /chfs/m/raw")
    r = sh(chfs_pool, steps.format(b="/chfs/m"), timeout=300,
           env={"CHFS_HOOK_LOCAL": "1", "CHFS_PLACEMENT": "local"})
    assert r.stdout.count('stat="OK"') == 6, r.stdout
    assert native_get(chfs_pool, "/m/mosaic.fits") == (tmp_path / "mosaic.fits").read_bytes()
    assert native_get(chfs_pool, "/m/proj/p_tile_001.fits") == \
        (tmp_path / "proj" / "p_tile_001.fits").read_bytes()


def test_four_threads_and_eight_forked_children_write_through_the_hook(chfs_pool):
    sh(chfs_pool, "mkdir -p /chfs/t")
    assert hook(chfs_pool, [TESTPROG, "threads", "/chfs/t", "4"]).stdout == "ok\n"
    assert hook(chfs_pool, [TESTPROG, "forks", "/chfs/t", "8"]).stdout == "ok\n"
    assert hook(chfs_pool, [TESTPROG, "vfork", "/chfs/t"]).stdout == "ok\n"
    names = native_ls(chfs_pool, "/t")
    assert names == sorted([f"thread-{i}" for i in range(4)] + [f"child-{i}" for i in range(8)]
                           + ["vfork.txt"])
    for i in range(4):
        data = native_get(chfs_pool, f"/t/thread-{i}")
        assert len(data) == 1 << 20 and data[:3] == bytes([i, 7 + i, 14 + i])
    pids = {native_get(chfs_pool, f"/t/child-{i}").split()[3] for i in range(8)}
    assert len(pids) == 8


ERROR_SCRIPT = """
import errno, os, sys
base = sys.argv[1]
def err(fn, *a):
    try:
        fn(*a)
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
os.mkdir(base)
open(base + '/file', 'w').close()
fd = os.open(base + '/file', os.O_RDONLY)
print(' '.join([
    err(open, base + '/nope'), err(os.stat, base + '/nope'), err(os.mkdir, base + '/file'),
    err(os.mkdir, base), err(os.open, base + '/file', os.O_CREAT | os.O_EXCL | os.O_WRONLY),
    err(open, base, 'w'), err(os.unlink, base), err(os.read, os.open(base, os.O_RDONLY), 1),
    err(os.listdir, base + '/file'), err(open, base + '/file/x'), err(os.stat, base + '/file/'),
    err(os.mkdir, base + '/file/d'), err(os.chdir, base + '/file'), err(os.rmdir, base + '/file'),
    err(os.rmdir, base), err(os.rename, base + '/nope', base + '/n2'),
    err(os.write, fd, b'x'), err(os.read, 999, 1), err(os.close, 999), err(os.fstat, 999),
    err(os.lseek, fd, -5, os.SEEK_SET), err(os.symlink, 'x', base + '/file'),
    err(os.readlink, base + '/file'), err(os.open, base + '/file', os.O_RDONLY | os.O_DIRECTORY),
    err(open, base + '/nodir/f', 'w'), err(os.read, os.open(base + '/file', os.O_WRONLY), 1),
    err(os.ftruncate, os.open(base + '/file', os.O_RDONLY), 0),
]))
print(os.readlink(f'/proc/self/fd/{fd}') == os.path.realpath(base + '/file'))
os.close(fd)
print(err(os.close, fd))
"""


def test_errors_are_the_local_file_systems(chfs_pool, tmp_path):
    local = subprocess.run([python3(), "-c", ERROR_SCRIPT, str(tmp_path / "e")],
                           capture_output=True, text=True, check=True, timeout=60).stdout
    viahook = hook(chfs_pool, [python3(), "-c", ERROR_SCRIPT, "/chfs/e"]).stdout
    assert "ENOENT" in local and "EEXIST" in local and "EISDIR" in local
    assert "ENOTDIR" in local and "EBADF" in local
    assert viahook == local


def test_mmap_private_is_emulated_shared_is_refused(chfs_pool):
    script = """
import mmap, os
with open('/chfs/m.bin', 'wb') as f:
    f.write(bytes(range(256)) * 64)
with open('/chfs/m.bin', 'rb') as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    print(m[255], m[256], len(m))
    try:
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        print(e.errno)
"""
    assert hook(chfs_pool, [python3(), "-c", script]).stdout.split() == \
        ["255", "0", "16384", str(errno.ENODEV)]


def test_exec_of_a_chfs_file_fails_with_eacces(chfs_pool):
    sh(chfs_pool, "printf '#!/bin/sh\\necho hi\\n' > /chfs/s.sh && chmod 755 /chfs/s.sh")
    r = hook(chfs_pool, [python3(), "-c", "import os\ntry:\n os.execv('/chfs/s.sh', ['s'])\n"
                         "except OSError as e:\n print(e.errno)"])
    assert r.stdout.strip() == str(errno.EACCES)
    assert sh(chfs_pool, "sh /chfs/s.sh").stdout == "hi\n"  # a shell can still read it


def test_several_mount_points_and_subdirectory_mounts(chfs_pool, tmp_path):
    m1, m2 = tmp_path / "m1", tmp_path / "m2"
    mounts = [f"{m1}=/mt", f"{m2}=/mt/proj"]
    sh(chfs_pool, f"mkdir {m1} {m1}/proj && echo one > {m2}/f && cat {m1}/proj/f",
       mounts=mounts)
    assert native_get(chfs_pool, "/mt/proj/f") == b"one\n"
    r = sh(chfs_pool, f"mv {m2}/f {m1}/g && ls {m1} && cat /chfs/mt/g", mounts=mounts,
           check=False)
    assert r.stdout.split() == ["g", "proj"]  # /chfs is not a mount point here
    assert native_ls(chfs_pool, "/mt") == ["g", "proj"]
    assert not os.path.exists(m1)  # nothing was created on the local disk


def test_node_local_fast_path_reads_and_writes_the_backing_file(chfs_pool):
    env = {"CHFS_PLACEMENT": "local", "CHFS_HOOK_LOCAL": "1"}
    sh(chfs_pool, "seq 1 20000 > /chfs/local.txt && echo tail >> /chfs/local.txt && "
                  "ls -l /proc/self/fd/ > /chfs/fds.txt < /chfs/local.txt", env=env)
    backing = chfs_pool.run(["chfs-io", "localpath", "/local.txt"]).stdout.strip()
    want = "".join(f"{i}\n" for i in range(1, 20001)).encode() + b"tail\n"
    assert native_get(chfs_pool, "/local.txt") == want
    assert native_stat(chfs_pool, "/local.txt")[1] == len(want)
    assert backing in native_get(chfs_pool, "/fds.txt").decode()  # stdin was the backing file
    r = sh(chfs_pool, "wc -c < /chfs/local.txt; tail -n 1 /chfs/local.txt", env=env)
    assert r.stdout.split() == [str(len(want)), "tail"]
    r = sh(chfs_pool, "wc -c < /chfs/local.txt", env={**env, "CHFS_HOOK_LOCAL": "0"})
    assert r.stdout.strip() == str(len(want))


FDS_SCRIPT = """
import os
with open('/chfs/nl.bin', 'wb') as f:
    f.write(os.urandom(300000))
with open('/chfs/nl.bin', 'rb') as f:   # the backing files exist now
    assert len(f.read()) == 300000
    for d in os.listdir('/proc/self/fd'):
        try:
            print(os.readlink('/proc/self/fd/' + d))
        except OSError:
            pass   # the listing's own descriptor
"""


def test_no_local_means_rpcs_only_even_inside_libchfs(chfs_pool):
    """--no-local must also switch off libchfs's own fast path (CHFS_LOCAL_FASTPATH): a
    hash-placed file written through the hook leaves no server backing file open in the
    process. Without --no-local the same write does open them (the check can see them)."""
    def backing_fds(*opts):
        r = subprocess.run(["chfs-run", *opts, "--", python3(), "-c", FDS_SCRIPT],
                           env={**chfs_pool.env, "CHFS_LOCAL_FASTPATH": "1"},
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [p for p in r.stdout.split() if any(p.startswith(d) for d in chfs_pool.dirs)]
    assert backing_fds(), "control: the libchfs fast path should open backing files"
    assert backing_fds("--no-local") == []


CREAT_WRITER = """
import os, sys
path, i = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
os.pwrite(fd, bytes([i + 1]) * 65536, i * 65536)
os.close(fd)
"""


def test_concurrent_o_creat_of_one_new_file_loses_no_byte(chfs_pool):
    """Four hooked processes open one new file with O_CREAT at once and write disjoint blocks:
    the later creators open the file (libchfs's open-or-create-exclusive), never reset it."""
    want = b"".join(bytes([i + 1]) * 65536 for i in range(4))
    for it in range(10):
        procs = [subprocess.Popen(["chfs-run", "--", python3(), "-c", CREAT_WRITER,
                                   f"/chfs/creat{it}", str(i)],
                                  env={**chfs_pool.env, "CHFS_HOOK_LOCAL": "0"})
                 for i in range(4)]
        assert all(p.wait(timeout=60) == 0 for p in procs)
        assert native_get(chfs_pool, f"/creat{it}") == want, f"round {it}"


def start_with_secret_until_main(pool, argv, secret, env=None):
    """Starts argv under chfs-run with a private copy of the pool secret, waits until the
    program's main has printed "ready", removes the secret and lets the program go on (it
    reads a line): what it can still do in CHFS then, it can only do if it joined the pool
    (libchfs reads the secret at chfs_init) before main. chfs-run's hand-down of the secret
    as an open descriptor (CHFS_SECRET_FD) is defeated with a descriptor number that is not
    open: this is about when the file is read. Returns (returncode, stderr)."""
    shutil.copy(pool.secret_file, secret)
    os.chmod(secret, 0o600)
    p = subprocess.Popen(["chfs-run", "--"] + argv, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**pool.env, "CHFS_HOOK_LOCAL": "0", "CHFS_SECRET_FILE": str(secret),
                              "CHFS_SECRET_FD": "1000", **(env or {})})
    try:
        assert p.stdout.readline() == "ready\n"
        os.unlink(secret)
        _, err = p.communicate("go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err


WRITE_AFTER_READY = ("import sys; print('ready', flush=True); sys.stdin.readline(); "
                     "open(sys.argv[1], 'w').write('joined before main\\n')")


def test_an_mpi_rank_whose_command_line_names_a_chfs_path_joins_the_pool_before_main(
        chfs_pool, tmp_path):
    """Issue 18: IOR on one shared file (2 ranks, -t 1m -b 8m -s 4) wrote at 193 MiB/s through
    the hook against 768 MiB/s through chfs.h, because only rank 0 touches the file before the
    timed phase: rank 1 loaded the hook library and joined the pool (0.26-0.30 s) inside its
    timed create, where IOR's CHFS backend had called chfs_init before timing. An MPI rank
    whose command line names a path under a mount point now joins while it starts."""
    rc, err = start_with_secret_until_main(
        chfs_pool, ["mpiexec", "-n", "1", python3(), "-c", WRITE_AFTER_READY,
                    "/chfs/joined-early"], tmp_path / "secret")
    assert rc == 0, err
    assert native_get(chfs_pool, "/joined-early") == b"joined before main\n"


@pytest.mark.parametrize("case", ["not-mpi", "mpi-eager-0"])
def test_other_processes_join_on_first_use_only(chfs_pool, tmp_path, case):
    """The same program joins at its first CHFS call, after the secret is gone, and cannot,
    when it is no MPI rank (a process that only names a CHFS path, like echo or mpiexec, must
    not pay the join) or when CHFS_HOOK_EAGER=0 (the opt-out). Also shows that the test above
    can fail."""
    argv = [python3(), "-c", WRITE_AFTER_READY, f"/chfs/joined-late-{case}"]
    env = {}
    if case == "mpi-eager-0":
        argv, env = ["mpiexec", "-n", "1"] + argv, {"CHFS_HOOK_EAGER": "0"}
    rc, err = start_with_secret_until_main(chfs_pool, argv, tmp_path / "secret", env=env)
    assert rc != 0 and "cannot join the CHFS pool" in err, err
    r = chfs_pool.run(["chfs-io", "stat", f"/joined-late-{case}"], check=False)
    assert r.returncode != 0, r.stdout


def test_ior_shaped_shared_file_segments_through_the_hook(chfs_pool):
    """IOR's shared-file write phase (2 MPI ranks, lseek + write of 64 KiB transfers into
    interleaved 256 KiB segments, every rank opening with O_CREAT) through the hook, and the
    same through chfs.h: chfs-hook-shared-bench reads every byte back and fails on any other."""
    bench = os.path.join(stack_prefix(), "bin", "chfs-hook-shared-bench")
    assert os.path.exists(bench), "chfs-hook-shared-bench not built (MPI missing at ci/build?)"
    for argv in (["chfs-run", "--", "mpiexec", "-n", "2", bench, "posix", "/chfs/ior-shared"],
                 ["mpiexec", "-n", "2", bench, "chfs", "/ior-shared-native"]):
        r = subprocess.run(argv + ["262144", "65536", "3"], env={**chfs_pool.env,
                           "CHFS_HOOK_LOCAL": "0"}, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.split()) == 3, r.stdout
    assert native_stat(chfs_pool, "/ior-shared")[1] == 2 * 3 * 262144
    assert native_stat(chfs_pool, "/ior-shared-native")[1] == 2 * 3 * 262144


def test_chfs_run_usage_and_configuration_errors(chfs_pool):
    r = subprocess.run(["chfs-run", "--help"], env=chfs_pool.env, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and "--mount" in r.stdout
    r = subprocess.run(["chfs-run", "--mount", "rel", "--", "true"], env=chfs_pool.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "not an absolute path" in r.stderr
    r = hook(chfs_pool, ["true"], env={"CHFS_HOOK_LOCAL": "maybe"}, check=False)
    assert r.returncode == 0  # the hook library (which checks it) is loaded on first use
    r = hook(chfs_pool, ["cat", "/chfs/x"], env={"CHFS_HOOK_LOCAL": "maybe"}, check=False)
    assert r.returncode != 0 and 'CHFS_HOOK_LOCAL="maybe": must be 0 or 1' in r.stderr
    r = hook(chfs_pool, ["cat", "/chfs/x"], env={"CHFS_SERVER": "tcp://127.0.0.1:1",
                                                "CHFS_RPC_TIMEOUT_MSEC": "2000"},
             check=False, timeout=60)
    assert r.returncode != 0 and "cannot join the CHFS pool" in r.stderr


def test_dead_server_gives_an_error_not_a_hang(chfs_pool):
    """Runs last in this module: it stops a server of the shared pool, then restarts it. Of
    16 small files (placed by hash) some are on the stopped server; reading stops at the
    first one, which must fail with EIO within the RPC timeout (5 s)."""
    sh(chfs_pool, "mkdir -p /chfs/dead && for i in $(seq 0 15); do echo $i > /chfs/dead/f$i; done")
    chfs_pool.kill(1)
    try:
        t0 = time.time()
        r = sh(chfs_pool, "for i in $(seq 0 15); do cat /chfs/dead/f$i || exit 1; done",
               check=False, timeout=120)
        elapsed = time.time() - t0
        assert r.returncode == 1
        assert "Input/output error" in r.stderr, r.stderr
        assert elapsed < 5 + 30  # one RPC timeout, plus process start-up on a busy machine
    finally:
        chfs_pool.restart(1)
    assert native_get(chfs_pool, "/dead/f3") == b"3\n"


def test_a_new_threads_first_path_call_never_reenters_the_hook(chfs_pool):
    """The hook's path check keeps per-thread memory; as __thread data of the hook library it
    was allocated by ld.so with malloc on a thread's first path call. When that malloc was the
    one creating glibc's ninth arena, glibc asked get_nprocs(), which opens a /sys file: the
    open re-entered the check before its memory existed, and so on until the stack overflowed
    (`rake -m -j3` under the hook died so, with Ruby's "[BUG] Segmentation fault"). 12 threads
    hold arenas, a 13th opens a local file as its first act."""
    sh(chfs_pool, "mkdir -p /chfs/arenas")
    r = hook(chfs_pool, [TESTPROG, "arenas", "/chfs/arenas", "12"], check=False, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", (r.returncode, r.stderr[-2000:])


def test_vectored_io_whose_total_length_overflows_is_einval(chfs_pool, tmp_path):
    # POSIX: EINVAL when the sum overflows ssize_t (Linux itself clamps a large sum and then
    # faults on the short buffer, so a local file is no reference for that case).
    sh(chfs_pool, "mkdir -p /chfs/iov")
    r = hook(chfs_pool, [TESTPROG, "iovmax", "/chfs/iov/f"], check=False)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    assert native_stat(chfs_pool, "/iov/f")[1] == 0

