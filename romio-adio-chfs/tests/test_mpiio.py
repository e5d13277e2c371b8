"""MPI-IO through ad_chfs: 4-rank jobs on a live CHFS pool, checked through the native API.

Every pattern program leaves byte i of its file equal to (i*131 + 7) % 251, whatever the access
pattern (contiguous, vector, subarray; independent, collective, non-blocking), so each test
reads the file back with chfs_cat (libchfs, no MPI) and compares it byte for byte. The same
programs run with the "chfs:" prefix, its aliases, and unprefixed names routed by
ROMIO_FSTYPE_FORCE=chfs:. One pool serves the module; each test uses its own file names. The
pattern modes of one naming style run in one MPI job (one file per mode) to keep the suite
short; each mode is still its own test with its own native check.
"""
import pytest

from adchfs_testlib import pattern

SIZE = 1 << 20  # 1 MiB per file: 16 chunks of the default size, 4 blocks per rank

MODES = ["indep", "coll", "indiv-fp", "vector-indep", "vector-coll", "subarray",
         "nonblocking", "nonblocking-coll"]
FORCE = {"ROMIO_FSTYPE_FORCE": "chfs:"}


def check_native(mpi, path, size):
    r = mpi.native(path)
    assert r.returncode == 0, r.stderr.decode()
    data = r.stdout
    assert len(data) == size, f"{path}: {len(data)} bytes through the native API, expected {size}"
    want = pattern(size)
    if data != want:
        first = next(i for i in range(size) if data[i] != want[i])
        pytest.fail(f"{path}: byte {first} is {data[first]}, expected {want[first]}")


@pytest.fixture(scope="module")
def prefixed_job(shared_mpi):
    return shared_mpi.run("mpiio_pattern", ",".join(MODES), "chfs:/mpiio/prefix", SIZE,
                          check=False)


@pytest.fixture(scope="module")
def forced_job(shared_mpi):
    return shared_mpi.run("mpiio_pattern", ",".join(MODES), "/mpiio/force", SIZE, env=FORCE,
                          check=False)


def assert_mode_ok(job, mode, name):
    lines = [ln for ln in job.stdout.splitlines() if ln.startswith(f"{mode} {name}-{mode} ")]
    assert lines and lines[0].endswith(": ok"), \
        f"mode {mode}:\nstdout:\n{job.stdout}\nstderr:\n{job.stderr}"


@pytest.mark.parametrize("mode", MODES)
def test_pattern_with_chfs_prefix_is_byte_exact(shared_mpi, prefixed_job, mode):
    assert_mode_ok(prefixed_job, mode, "chfs:/mpiio/prefix")
    check_native(shared_mpi, f"/mpiio/prefix-{mode}", SIZE)


@pytest.mark.parametrize("mode", MODES)
def test_pattern_with_fstype_force_and_unprefixed_name(shared_mpi, forced_job, mode):
    assert_mode_ok(forced_job, mode, "/mpiio/force")
    check_native(shared_mpi, f"/mpiio/force-{mode}", SIZE)


@pytest.mark.parametrize("prefix", ["CHFS:", "ad_chfs:"])
def test_prefix_aliases_select_the_driver(shared_mpi, prefix):
    path = f"/mpiio/alias-{prefix.rstrip(':')}"
    shared_mpi.run("mpiio_pattern", "coll", f"{prefix}{path}", SIZE)
    check_native(shared_mpi, path, SIZE)


def test_set_size_and_preallocate_change_the_size_seen_natively(shared_mpi):
    shared_mpi.run("mpiio_ops", "set-size", "chfs:/mpiio/sized")
    r = shared_mpi.native("--size", "/mpiio/sized")
    assert r.returncode == 0, r.stderr.decode()
    assert int(r.stdout) == 65536
    data = shared_mpi.native("/mpiio/sized").stdout
    assert data == bytes(65536), "a file grown by set_size/preallocate must read as zeros"


def test_delete_removes_the_file_and_missing_file_errors_are_no_such_file(shared_mpi):
    r = shared_mpi.run("mpiio_ops", "delete", "chfs:/mpiio/deleted")
    assert "class" in r.stdout and "CHFS" in r.stdout
    assert shared_mpi.native("/mpiio/deleted").returncode == 2


def test_open_missing_file_without_create_fails_with_no_such_file(shared_mpi):
    r = shared_mpi.run("mpiio_ops", "open-missing", "chfs:/mpiio/never-created")
    assert "No such file" in r.stdout or "does not exist" in r.stdout, r.stdout


def test_create_in_a_missing_directory_fails_with_no_such_file(shared_mpi):
    """chfs_create makes missing parents (upstream's API); MPI-IO must not: it uses the strict
    chfs_open_posix, so the directory does not appear."""
    shared_mpi.run("mpiio_ops", "create-no-dir", "chfs:/mpiio/no-such-dir/f")
    assert shared_mpi.native("/mpiio/no-such-dir/f").returncode != 0


def test_independent_creates_of_one_new_file_lose_no_byte(shared_mpi):
    """Every rank opens the same new file with MPI_COMM_SELF and CREATE at once and writes its
    own block: whichever create comes second must open the file, not reset it."""
    for it in range(5):
        path = f"/mpiio/self-create{it}"
        shared_mpi.run("mpiio_ops", "self-create", "chfs:" + path)
        got = shared_mpi.native(path).stdout
        assert got == b"".join(bytes([r + 1]) * 65536 for r in range(4)), f"round {it}"


def test_excl_on_existing_file_fails_with_file_exists(shared_mpi):
    shared_mpi.run("mpiio_pattern", "indep", "chfs:/mpiio/existing", SIZE)
    shared_mpi.run("mpiio_ops", "excl", "chfs:/mpiio/existing")
    check_native(shared_mpi, "/mpiio/existing", SIZE)  # the failed EXCL open truncated nothing


def test_create_without_excl_keeps_existing_contents(shared_mpi):
    shared_mpi.run("mpiio_pattern", "indep", "chfs:/mpiio/kept", SIZE)
    shared_mpi.run("mpiio_ops", "rdonly", "chfs:/mpiio/kept")
    shared_mpi.run("mpiio_ops", "atomic", "chfs:/mpiio/kept")  # opens with CREATE|RDWR
    check_native(shared_mpi, "/mpiio/kept", SIZE)


def test_append_mode_starts_at_end_of_file(shared_mpi):
    shared_mpi.run("mpiio_pattern", "indep", "chfs:/mpiio/appended", SIZE)
    shared_mpi.run("mpiio_ops", "append", "chfs:/mpiio/appended")
    assert shared_mpi.native("/mpiio/appended").stdout == pattern(SIZE) + b"appended"


def test_delete_on_close_removes_the_file(shared_mpi):
    shared_mpi.run("mpiio_ops", "delete-on-close", "chfs:/mpiio/temporary")
    assert shared_mpi.native("/mpiio/temporary").returncode == 2


def test_chunk_size_hint_sets_the_chunk_size_of_new_files(shared_mpi):
    shared_mpi.run("mpiio_ops", "chunk-hint", "chfs:/mpiio/chunked", "16K")
    r = shared_mpi.native("--chunk-size", "/mpiio/chunked")
    assert r.returncode == 0, r.stderr.decode()
    assert int(r.stdout) == 16384
    assert shared_mpi.native("/mpiio/chunked").stdout == b"x" * (4 * 4096)


def test_malformed_chunk_size_hint_is_an_info_value_error(shared_mpi):
    r = shared_mpi.run("mpiio_ops", "bad-hint", "chfs:/mpiio/badhint")
    assert "chfs_chunk_size" in r.stdout
    assert shared_mpi.native("/mpiio/badhint").returncode == 2, "nothing created"


def test_atomic_mode_is_refused_as_unsupported(shared_mpi):
    r = shared_mpi.run("mpiio_ops", "atomic", "chfs:/mpiio/atomic")
    assert "locks" in r.stdout


@pytest.mark.parametrize("op", ["set-size", "delete", "append", "delete-on-close"])
def test_file_operations_with_fstype_force(shared_mpi, op):
    if op == "append":
        shared_mpi.run("mpiio_pattern", "indep", "/mpiio/force-append", SIZE, env=FORCE)
    shared_mpi.run("mpiio_ops", op, f"/mpiio/force-{op}", env=FORCE)


def test_dead_server_gives_io_error_within_the_rpc_timeout(chfs_pool, mpi):
    mpi.run("mpiio_pattern", "coll", "chfs:/mpiio/victim", SIZE)   # 16 chunks on all servers
    chfs_pool.kill(1)
    # The pool's RPC timeout is 5 s; the job must end with MPI_ERR_IO well within the bound.
    r = mpi.run("mpiio_ops", "dead-server", "chfs:/mpiio/victim", n=1, timeout=60)
    assert "read with a dead server -> class" in r.stdout
