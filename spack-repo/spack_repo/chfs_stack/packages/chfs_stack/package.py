# chfs-stack — the whole stack in one `spack install chfs-stack`.
#
# Design: a bundle (nothing of its own to build) that pulls in every component of chfs-stack —
# CHFS, the four access paths (chfs.h via chfs itself, MPI-IO via mpich-chfs, the syscall hook,
# FUSE with passthrough), Gfarm with the cooperative cache and gfarm2fs, Pwrake — plus the
# workload: parallel HDF5 and IOR from builtin (IOR as ior-chfs, so that `ior -a CHFS` is
# installed too) and Montage. MPI users (hdf5, ior-chfs) get mpich-chfs as their MPI, so parallel
# HDF5 and IOR's MPIIO backend reach CHFS through ad_chfs; ~mpiio leaves out MPICH and the MPI
# workload with it. Variants leave out the parts a site cannot use (FUSE passthrough needs
# Linux >= 6.9, the hook x86-64 Linux).
#
# Which CHFS is a variant of the bundle: implementation=chfs-stack (ours, default) or
# implementation=upstream (otatebe/chfs on Mochi):
#   spack install chfs-stack implementation=upstream ~mpiio ~hook ~fuse
# The access paths call chfs.h extensions upstream lacks, so they need ours; a DAG holds one chfs,
# hence the conflicts. (A `^chfs implementation=upstream` on the bundle cannot work: the bundle
# has to leave the chfs version open for it, and that is what this variant does.)
import os

from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import *

# The chfs-stack checkout that contains this recipe.
CHFS_STACK_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


class ChfsStack(BundlePackage):
    """chfs-stack: the CHFS ad-hoc parallel file system with its access paths (native chfs.h,
    MPI-IO through ROMIO ad_chfs, a syscall hook, FUSE with kernel passthrough), Gfarm with
    cooperative caching, Pwrake, and the HDF5/IOR/Montage workload."""

    homepage = "file://" + CHFS_STACK_CHECKOUT

    maintainers("chfs-stack")
    license("LicenseRef-chfs-stack")

    version("develop")

    variant(
        "implementation",
        default="chfs-stack",
        values=("chfs-stack", "upstream"),
        multi=False,
        description="Which CHFS (the chfs package's implementation variant)",
    )
    variant("mpiio", default=True, description="MPI-IO access path (MPICH with ad_chfs)")
    variant("hook", default=True, description="syscall-hook access path (chfs-hook)")
    variant("fuse", default=True, description="FUSE access path with passthrough (chfuse)")
    variant("gfarm", default=True, description="Gfarm with the cooperative cache")
    variant("workflow", default=True, description="Pwrake and Montage")

    depends_on("chfs implementation=chfs-stack", when="implementation=chfs-stack", type="run")
    depends_on("chfs implementation=upstream", when="implementation=upstream", type="run")
    # Each access path uses chfs.h calls upstream CHFS lacks (see the chfs recipe).
    conflicts("+mpiio", when="implementation=upstream", msg="ad_chfs needs our chfs: add ~mpiio")
    conflicts("+hook", when="implementation=upstream", msg="chfs-hook needs our chfs: add ~hook")
    conflicts("+fuse", when="implementation=upstream", msg="chfuse needs our chfs: add ~fuse")
    with when("+mpiio"):
        depends_on("mpich-chfs", type="run")
        # The workload's MPI is the one with ad_chfs. A DAG may hold two MPIs (real Spack put
        # an external mpich under hdf5 next to mpich-chfs), so name the provider of each
        # direct "mpi" dependency ("%" = direct dependency; Spack 1.x rejects "^" here).
        depends_on("hdf5+mpi %mpi=mpich-chfs", type="run")
        depends_on("ior-chfs+hdf5 %mpi=mpich-chfs", type="run")
    depends_on("chfs-hook", when="+hook", type="run")
    depends_on("chfuse", when="+fuse", type="run")
    with when("+gfarm"):
        depends_on("gfarm+coop-cache", type="run")
        depends_on("gfarm2fs", type="run")
    with when("+workflow"):
        depends_on("pwrake", type="run")
        depends_on("montage", type="run")
