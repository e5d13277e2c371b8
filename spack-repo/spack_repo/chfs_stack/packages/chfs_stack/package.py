# chfs-stack — the whole stack in one `spack install chfs-stack`.
#
# Design: a bundle (nothing of its own to build) that pulls in every component of chfs-stack —
# CHFS (ours by default; `^chfs implementation=upstream` swaps in the Mochi-based server), the
# four access paths (chfs.h via chfs itself, MPI-IO via mpich-chfs, the syscall hook, FUSE with
# passthrough), Gfarm with the cooperative cache and gfarm2fs, Pwrake — plus the workload from builtin:
# parallel HDF5, IOR and Montage. MPI users (hdf5, ior) get mpich-chfs as their MPI, so parallel
# HDF5 and IOR's MPIIO backend reach CHFS through ad_chfs. Variants leave out the parts a site
# cannot use (FUSE passthrough needs Linux >= 6.9, the hook x86-64 Linux).
from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import *


class ChfsStack(BundlePackage):
    """chfs-stack: the CHFS ad-hoc parallel file system with its access paths (native chfs.h,
    MPI-IO through ROMIO ad_chfs, a syscall hook, FUSE with kernel passthrough), Gfarm with
    cooperative caching, Pwrake, and the HDF5/IOR/Montage workload."""

    homepage = "https://github.com/otatebe/chfs"

    maintainers("chfs-stack")
    license("LicenseRef-chfs-stack")

    version("develop")

    variant("mpiio", default=True, description="MPI-IO access path (MPICH with ad_chfs)")
    variant("hook", default=True, description="syscall-hook access path (chfs-hook)")
    variant("fuse", default=True, description="FUSE access path with passthrough (chfuse)")
    variant("gfarm", default=True, description="Gfarm with the cooperative cache")
    variant("workflow", default=True, description="Pwrake and Montage")

    depends_on("chfs@develop", type="run")
    depends_on("hdf5+mpi", type="run")
    depends_on("ior+hdf5", type="run")
    with when("+mpiio"):
        depends_on("mpich-chfs", type="run")
        # The workload's MPI is the one with ad_chfs. A DAG may hold two MPIs (real Spack put
        # an external mpich under hdf5 next to mpich-chfs), so name the provider of each
        # direct "mpi" dependency ("%" = direct dependency; Spack 1.x rejects "^" here).
        depends_on("hdf5 %mpi=mpich-chfs", type="run")
        depends_on("ior %mpi=mpich-chfs", type="run")
    depends_on("chfs-hook", when="+hook", type="run")
    depends_on("chfuse", when="+fuse", type="run")
    with when("+gfarm"):
        depends_on("gfarm+coop-cache", type="run")
        depends_on("gfarm2fs", type="run")
    with when("+workflow"):
        depends_on("pwrake", type="run")
        depends_on("montage", type="run")
