"""The rebuilt MPICH is a drop-in for Debian's: same exported ABI, plus the chfs driver.

These checks need no pool: they compare our libmpich.so.12 with Debian's (SONAME, exported
symbols, installed mpi.h) and check that the Spack recipe's patch is generated from the driver
sources in this directory (romio-adio-chfs/make-spack-patch --check).
"""
import subprocess
from pathlib import Path

from adchfs_testlib import MPICH_PREFIX

DEBIAN_LIB = Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12")
DEBIAN_INCLUDE = Path("/usr/include/x86_64-linux-gnu/mpich")
HERE = Path(__file__).resolve().parent


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def soname(lib):
    out = subprocess.run(["readelf", "-d", str(lib)], check=True, capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if "SONAME" in line][0].split("[")[1].rstrip("]")


def test_libmpich_has_debians_soname_and_every_exported_symbol(mpich_lib):
    ours = mpich_lib / "libmpich.so.12"
    assert soname(ours) == soname(DEBIAN_LIB) == "libmpich.so.12"
    missing = exported(DEBIAN_LIB) - exported(ours)
    assert not missing, f"{len(missing)} of Debian's exports missing: {sorted(missing)[:20]}"


def test_mpi_headers_match_debian(mpich_lib):
    for header in ("mpi.h", "mpio.h"):
        ours = (MPICH_PREFIX / "include" / header).read_bytes()
        theirs = (DEBIAN_INCLUDE / header).read_bytes()
        assert ours == theirs, f"{header} differs from Debian's"


def test_driver_is_built_in_with_its_prefixes(mpich_lib):
    data = (mpich_lib / "libmpich.so.12").read_bytes()
    for s in (b"chfs:", b"ad_chfs:", b"ufs:", b"nfs:"):
        assert s + b"\0" in data, f"prefix {s!r} not in libmpich"


def test_spack_patch_is_generated_from_the_driver_sources():
    r = subprocess.run([str(HERE.parent / "make-spack-patch"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
