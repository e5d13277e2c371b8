"""Parallel HDF5 on CHFS: Debian's libhdf5-mpich (unmodified) over our MPICH's ad_chfs.

h5_2d writes a 2-D dataset collectively with 4 ranks (row blocks), reads it back collectively
in column blocks (every value crosses ranks) and independently as a whole, checking each value.
The file is then checked through the native API: it exists under the CHFS path and is an HDF5
file (superblock signature at offset 0).
"""

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def test_hdf5_2d_dataset_collective_write_and_read_on_chfs(shared_mpi):
    mpi = shared_mpi
    r = mpi.run("h5_2d", "chfs:/h5/a2d.h5", 256, 192)
    assert "ok (0 bad values)" in r.stdout, r.stdout
    native = mpi.native("/h5/a2d.h5")
    assert native.returncode == 0, native.stderr.decode()
    assert native.stdout.startswith(HDF5_SIGNATURE)
    assert len(native.stdout) >= 256 * 192 * 8


def test_hdf5_with_fstype_force_and_unprefixed_name(shared_mpi):
    mpi = shared_mpi
    r = mpi.run("h5_2d", "/h5/forced.h5", 128, 64, env={"ROMIO_FSTYPE_FORCE": "chfs:"})
    assert "ok (0 bad values)" in r.stdout, r.stdout
    assert mpi.native("/h5/forced.h5").stdout.startswith(HDF5_SIGNATURE)
