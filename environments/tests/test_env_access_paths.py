"""For each environment, activation without Spack runs a small program through that access path
against a live pool: write, read back, checksum.

Each test brings its environment up with `environments/stack up ENV` (pool of 2 servers over
tcp on loopback; for fuse also the chfuse mount), builds its program with the compiler the
activated environment provides (cc + `pkg-config chfs`; mpicc of MPICH with ad_chfs), runs it,
compares the checksums of what was written and read back with the input's, and then reads the
file again with the native tool (chfs-io get) to prove the bytes are in CHFS — not in a local
directory of the same name. `stack down` always runs. A component that is missing (not built,
not installed) fails the test with the reason; nothing here is skipped.
"""
import os
import shlex

from envlib import PROGRAMS, chfs_sha256, live, make_input, parse_rw


def check_roundtrip(output, want_fnv, size):
    written, read, n_w, n_r = parse_rw(output)
    assert (n_w, n_r) == (size, size), f"sizes written/read {n_w}/{n_r}, input {size}"
    assert written == want_fnv, f"program wrote {written}, input is {want_fnv}"
    assert read == want_fnv, f"read back {read}, written {want_fnv}"


def test_native_program_through_chfs_api(tmp_path):
    inp, want, sha = make_input(tmp_path)
    with live("native", tmp_path) as s:
        prog = tmp_path / "native_rw"
        s.sh(f"cc -O2 -o {prog} {PROGRAMS}/native_rw.c $(pkg-config --cflags --libs chfs)")
        out = s.sh(f"{prog} {inp} /native-data.bin").stdout
        check_roundtrip(out, want, os.path.getsize(inp))
        assert chfs_sha256(s, "/native-data.bin") == sha


def test_mpiio_program_through_ad_chfs(tmp_path):
    inp, want, sha = make_input(tmp_path)
    with live("mpiio", tmp_path) as s:
        p = s.sh("command -v mpicc; mpichversion 2>/dev/null | head -1; echo ROMIO=$ROMIO_FSTYPE_FORCE")
        mpicc = p.stdout.split()[0]
        assert "/mpich/prefix/" in mpicc, (
            f"mpicc of the mpiio environment is {mpicc}, not MPICH with ad_chfs "
            f"(romio-adio-chfs/build-mpich has not installed ~/.cache/chfs-stack/mpich/prefix)")
        assert "ROMIO=chfs:" in p.stdout
        prog = tmp_path / "mpiio_rw"
        s.sh(f"mpicc -O2 -o {prog} {PROGRAMS}/mpiio_rw.c")
        # An ordinary file name: ROMIO_FSTYPE_FORCE=chfs: (from spack.yaml) routes it to CHFS.
        out = s.sh(f"mpiexec -n 2 {prog} {inp} /mpiio-data.bin", timeout=180).stdout
        check_roundtrip(out, want, os.path.getsize(inp))
        assert not os.path.exists("/mpiio-data.bin"), "MPI-IO wrote to the local file system"
        assert chfs_sha256(s, "/mpiio-data.bin") == sha


def test_hook_program_under_chfs_run(tmp_path):
    inp, want, sha = make_input(tmp_path)
    mount = str(tmp_path / "chfs-hook-mnt")   # virtual: exists only inside chfs-run
    with live("hook", tmp_path, {"CHFS_STACK_MOUNT": mount}) as s:
        prog = tmp_path / "posix_rw"
        s.sh(f"cc -O2 -o {prog} {PROGRAMS}/posix_rw.c")
        out = s.sh(f'chfs-run --mount "$CHFS_STACK_MOUNT" -- {prog} {inp} '
                   f'"$CHFS_STACK_MOUNT/hook-data.bin"', timeout=120).stdout
        check_roundtrip(out, want, os.path.getsize(inp))
        assert not os.path.exists(mount), "the hook's mount point appeared on the local disk"
        assert chfs_sha256(s, "/hook-data.bin") == sha


def test_fuse_program_on_chfuse_mount(tmp_path):
    inp, want, sha = make_input(tmp_path)
    mount = str(tmp_path / "chfs-fuse-mnt")
    with live("fuse", tmp_path, {"CHFS_STACK_MOUNT": mount}) as s:
        assert os.path.ismount(mount), f"stack up fuse did not mount {mount}"
        prog = tmp_path / "posix_rw"
        s.sh(f"cc -O2 -o {prog} {PROGRAMS}/posix_rw.c")
        out = s.sh(f"{prog} {inp} {shlex.quote(mount)}/fuse-data.bin").stdout
        check_roundtrip(out, want, os.path.getsize(inp))
        assert chfs_sha256(s, "/fuse-data.bin") == sha
    assert not os.path.ismount(mount), f"stack down fuse left {mount} mounted"
