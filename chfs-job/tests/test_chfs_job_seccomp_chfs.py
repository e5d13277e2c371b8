"""chfs: mappings served by chfs-job's seccomp supervisor and ptrace tracer with libchfs
(src/chfs_route.c, src/chfs_serve.c).

A static binary and coreutils write and read CHFS files through a mapped directory under each
method; the bytes are checked with the native API (chfs-io), never through chfs-job itself. A
denial holds in the same policy; an unreachable pool gives one clear line under either method.
"""
import os
import subprocess

import pytest

from ci.testlib.chfs_pool import make_secret, stack_prefix

PREFIX = stack_prefix()
JOB = os.path.join(PREFIX, "bin", "chfs-job")
PROBE_STATIC = os.path.join(PREFIX, "libexec", "chfs-job", "chfs-job-probe-static")


def chfs_get(pool, path):
    return subprocess.run(["chfs-io", "get", path], env=pool.env, capture_output=True, check=True,
                          timeout=30).stdout


def chfs_put(pool, path, data):
    subprocess.run(["chfs-io", "put", path, "0", "create"], input=data, env=pool.env, check=True,
                   timeout=30)


METHODS = ["seccomp", "ptrace", "ptrace-plain"]


def method_args(method):
    return ["-m", "ptrace", "--ptrace-plain"] if method == "ptrace-plain" else ["-m", method]


@pytest.fixture(params=METHODS)
def method(request):
    return request.param


@pytest.fixture
def setup(chfs_pool, tmp_path, method):
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("SECRET\n")
    mnt = tmp_path / "chfs"
    pol = tmp_path / "p.yaml"
    pol.write_text(f"paths:\n  {mnt}: chfs:/\n  {tmp_path}/secret: deny\n")

    def run(argv, check=True):
        r = subprocess.run([JOB] + method_args(method) + ["-p", str(pol), "--"] + argv, env=chfs_pool.env,
                           capture_output=True, timeout=60, cwd=tmp_path)
        if check:
            assert r.returncode == 0, (argv, r.returncode, r.stderr)
        return r
    return chfs_pool, mnt, run


@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_static_binary_writes_and_reads_chfs_files(setup):
    pool, mnt, run = setup
    chfs_put(pool, "/in.txt", b"FROM-CHFS\n")
    # reads a file written natively
    assert run([PROBE_STATIC, "open", f"{mnt}/in.txt"]).stdout == b"FROM-CHFS\n"
    assert run([PROBE_STATIC, "stat", f"{mnt}/in.txt"]).stdout == b"size 10\n"
    # writes 3 MB (several staging buffers) with raw syscalls: the native API sees every byte
    assert run([PROBE_STATIC, "write", f"{mnt}/big", "3", "65536"]).returncode == 0
    assert chfs_get(pool, "/big") == b"\0" * 3000000
    assert run([PROBE_STATIC, "stat", f"{mnt}/big"]).stdout == b"size 3000000\n"
    assert run([PROBE_STATIC, "open", f"{mnt}/missing"], check=False).stdout == b"ERR ENOENT\n"


@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_coreutils_on_chfs_with_a_denial_in_force(setup, tmp_path):
    pool, mnt, run = setup
    data = os.urandom(1 << 20) + b"tail"
    (tmp_path / "local.bin").write_bytes(data)
    run(["mkdir", f"{mnt}/d"])
    run(["cp", "local.bin", f"{mnt}/d/copy.bin"])
    assert chfs_get(pool, "/d/copy.bin") == data
    assert run(["cat", f"{mnt}/d/copy.bin"]).stdout == data
    # a shell redirection: the descriptor is dup2'ed onto stdout and the original closed first
    run(["sh", "-c", f"echo hello > {mnt}/d/h.txt; echo more >> {mnt}/d/h.txt"])
    assert chfs_get(pool, "/d/h.txt") == b"hello\nmore\n"
    # the builtin's bytes are in CHFS as soon as the shell restores stdout (dup2 onto fd 1),
    # seen by a native reader started from the same job, not only at the job's end
    r = run(["sh", "-c", f"echo now > {mnt}/n.txt; chfs-io get /n.txt"])
    assert r.stdout == b"now\n"
    assert run(["ls", f"{mnt}/d"]).stdout == b"copy.bin\nh.txt\n"
    long = run(["ls", "-l", f"{mnt}/d/h.txt"]).stdout.decode()
    assert long.startswith("-rw") and " 11 " in long, long
    run(["mv", f"{mnt}/d/h.txt", f"{mnt}/d/g.txt"])
    run(["rm", f"{mnt}/d/copy.bin"])
    assert run(["ls", f"{mnt}/d"]).stdout == b"g.txt\n"
    assert chfs_get(pool, "/d/g.txt") == b"hello\nmore\n"
    # python (buffered I/O, fstat, lseek) reads and appends; find walks the staged listing
    py = f"f = open('{mnt}/d/g.txt', 'r+'); t = f.read(); f.write(t.upper()); f.close(); print(t, end='')"
    assert run(["python3", "-c", py]).stdout == b"hello\nmore\n"
    assert chfs_get(pool, "/d/g.txt") == b"hello\nmore\nHELLO\nMORE\n"
    run(["mkdir", f"{mnt}/d/sub", f"{mnt}/d/sub/deeper"])  # not -p: it changes directory
    assert run(["find", f"{mnt}/d", "-type", "d"]).stdout.decode().split() == [
        f"{mnt}/d", f"{mnt}/d/sub", f"{mnt}/d/sub/deeper"]
    listing = run(["ls", "-l", f"{mnt}/d"]).stdout.decode()
    assert " 22 " in listing and "g.txt" in listing and listing.count("\nd") == 1, listing
    # the denial in the same policy
    r = run(["cat", f"{tmp_path}/secret/key"], check=False)
    assert r.returncode != 0 and b"No such file" in r.stderr
    # the working directory cannot be a CHFS directory (chdir is EXDEV, as documented)
    r = run(["python3", "-c", f"import os; os.chdir('{mnt}/d')"], check=False)
    assert r.returncode != 0 and b"cross-device" in r.stderr
    # O_EXCL on an existing CHFS file
    r = run(["sh", "-c", f"set -C; echo x > {mnt}/d/g.txt"], check=False)
    assert r.returncode != 0 and b"exists" in r.stderr


@pytest.mark.parametrize("name", ["seccomp", "ptrace"])
def test_unreachable_pool_gives_one_line(tmp_path, name):
    pol = tmp_path / "p.yaml"
    pol.write_text(f"paths:\n  {tmp_path}/chfs: chfs:/\n")
    # a secret of its own: the default (~/.chfs/secret) need not exist, and without one libchfs
    # stops before it tries the server (EACCES)
    env = {**os.environ, "CHFS_SERVER": "ofi+tcp://127.0.0.1:9", "CHFS_RPC_TIMEOUT_MSEC": "1000",
           "CHFS_SECRET_FILE": make_secret(str(tmp_path / "secret"))}
    r = subprocess.run([JOB, "-m", name, "-p", str(pol), "--", "true"], env=env,
                       capture_output=True, text=True, timeout=60)
    # libchfs says why on its own line ("chfs: err: no CHFS server answers: ..."); chfs-job adds
    # exactly one line naming the pool, and the program never runs
    assert r.returncode == 3
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("chfs-job")]
    assert lines == [f"chfs-job: {name}: cannot reach the CHFS pool at ofi+tcp://127.0.0.1:9: "
                     "Transport endpoint is not connected"], r.stderr


@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_staged_listing_does_not_lead_outside_the_mapping(chfs_pool, tmp_path, method):
    chfs_put(chfs_pool, "/proj/in.txt", b"IN\n")
    chfs_put(chfs_pool, "/other.txt", b"OUTSIDE\n")
    mnt = tmp_path / "chfs"
    pol = tmp_path / "p.yaml"
    pol.write_text(f"paths:\n  {mnt}: chfs:/proj\n")
    # open the mapped directory, find where its staged listing lives, and try ../other.txt
    # through that local path: the CHFS path /other.txt is outside chfs:/proj
    script = (f"import os\nfd = os.open('{mnt}', os.O_RDONLY | os.O_DIRECTORY)\n"
              "stage = os.readlink(f'/proc/self/fd/{fd}')\n"
              "print(sorted(os.listdir(fd)))\n"
              "print(open(os.path.join(stage, 'in.txt')).read(), end='')\n"
              "try:\n    open(os.path.join(stage, '..', 'other.txt')).read(); print('LEAK')\n"
              "except OSError as e:\n    print(e.strerror)\n")
    r = subprocess.run([JOB] + method_args(method) + ["-p", str(pol), "--", "python3", "-c", script],
                       env=chfs_pool.env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "['in.txt']\nIN\nNo such file or directory\n", r.stdout


@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_close_writes_back_before_the_job_ends(setup):
    """A file written through the mapping reaches CHFS at its close(), seen by a native reader
    started by the same job; its descriptor was moved to the reserved range (>= 900), where the
    close is trapped, and a second open gets the next free number there."""
    pool, mnt, run = setup
    script = (f"import os, subprocess\n"
              f"fd = os.open('{mnt}/w.txt', os.O_WRONLY | os.O_CREAT, 0o644)\n"
              f"fd2 = os.open('{mnt}/w.txt', os.O_RDONLY)\n"
              "print(fd, fd2)\n"
              "os.write(fd, b'closed-bytes'); os.close(fd)\n"
              "print(os.read(fd2, 100).decode())\n"
              "print(subprocess.run(['chfs-io', 'get', '/w.txt'], capture_output=True).stdout.decode())\n")
    out = run(["python3", "-c", script]).stdout.decode().split("\n")
    assert out[0] == "900 901", out
    # fd2 was staged before the write: it keeps the bytes of its own open (close-to-open)
    assert out[1:3] == ["", "closed-bytes"], out
    assert chfs_get(pool, "/w.txt") == b"closed-bytes"


@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_low_descriptor_limit_still_reads_and_writes_chfs(setup):
    """With RLIMIT_NOFILE below the reserved range the staged descriptor stays at a low number
    (seccomp: ADDFD without SETFD; ptrace: the injected fcntl(F_DUPFD, 900) fails and the open's
    own number is kept): reads work, and the bytes written reach CHFS by the job's end."""
    pool, mnt, run = setup
    chfs_put(pool, "/r.txt", b"READ-ME\n")
    r = run(["sh", "-c", f"ulimit -n 64; cat {mnt}/r.txt; echo low > {mnt}/low.txt"])
    assert r.stdout == b"READ-ME\n", r.stderr
    assert chfs_get(pool, "/low.txt") == b"low\n"
