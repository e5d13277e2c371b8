# mpich-chfs — MPICH with the ROMIO ad_chfs driver of chfs-stack (MPI-IO on CHFS).
#
# Design: derive from builtin Mpich so every variant, dependency and configure option of the
# builtin recipe stays available (device/netmod, hwloc, fortran, datatype engine, ...), and add
# only what the driver needs: the patch (our ROMIO edits + the driver sources, generated from
# romio-adio-chfs/ by romio-adio-chfs/make-spack-patch), a regeneration of ROMIO's build system
# (the patch edits its configure.ac and Makefile.mk), --with-file-system=...+chfs, and a link
# dependency on chfs (found through pkg-config, which Spack points at the chfs prefix).
#
# It provides "mpi" like mpich, so HDF5 and other MPI users build against it unchanged:
#   spack install hdf5+mpi %mpi=mpich-chfs
# (in an environment, name it on each MPI user's spec as environments/mpiio does: `packages: mpi:
# require: mpich-chfs` alone does not reach a package Spack takes as an external).
# Programs then reach CHFS through MPI-IO with "chfs:" file names or ROMIO_FSTYPE_FORCE=chfs:.

from spack_repo.builtin.packages.mpich.package import Mpich

from spack.package import *


class MpichChfs(Mpich):
    """MPICH with the ROMIO ad_chfs driver: MPI-IO (and parallel HDF5) on the CHFS ad-hoc
    parallel file system through "chfs:" file names."""

    homepage = "https://www.mpich.org"

    # Detection of system MPICH installations stays with the builtin mpich recipe.
    executables = []

    variant(
        "file-systems",
        default="ufs,nfs",
        values=("ufs", "nfs", "lustre", "gpfs", "pvfs2", "daos"),
        multi=True,
        description="ROMIO drivers to build besides chfs",
    )

    # ad_chfs uses chfs.h calls that upstream CHFS lacks (chfs_fstat, chfs_ftruncate), so it
    # needs our implementation.
    depends_on("chfs implementation=chfs-stack")
    depends_on("pkgconfig", type="build")
    # ROMIO's configure and Makefile.in are regenerated after patching.
    depends_on("autoconf@2.67:", type="build")
    depends_on("automake@1.15:", type="build")
    depends_on("libtool@2.4.4:", type="build")
    depends_on("m4", type="build")

    # The patch is written against MPICH 4.0.2 (the version Debian 12 ships).
    conflicts("@:4.0.1", msg="mpich-chfs: the ad_chfs patch targets MPICH 4.0.2")
    conflicts("@4.0.3:", msg="mpich-chfs: the ad_chfs patch targets MPICH 4.0.2")
    conflicts("~romio", msg="mpich-chfs: ad_chfs is a ROMIO driver")

    patch("mpich-4.0.2-ad_chfs.patch", when="@4.0.2")

    @run_before("configure")
    def regenerate_romio(self):
        with working_dir(join_path("src", "mpi", "romio")):
            which("autoreconf", required=True)("-if", "-I", "confdb")

    def configure_args(self):
        args = super().configure_args()
        fs = sorted(self.spec.variants["file-systems"].value) + ["chfs"]
        args.append("--with-file-system=" + "+".join(fs))
        return args
