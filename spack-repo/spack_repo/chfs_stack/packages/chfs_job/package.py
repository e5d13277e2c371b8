# chfs-job — the policy-driven launcher: runs a program under the access method its policy and
# the program call for (seccomp user-notification supervisor, ptrace tracer, chfs-run, chfuse
# mount namespace, none), with path mappings/denials, bandwidth limits and fork tracing; `auto`
# picks by the guideline `chfs-job bench` measures.
#
# Design: builds the chfs-job directory of the chfs-stack checkout (the root CMake project with
# CHFS_STACK_COMPONENTS=chfs-job). It links libchfs (the seccomp method serves chfs: mappings
# with it; found through chfs's chfsConfig.cmake); the rewrite and fuse methods exec chfs-run
# (chfs-hook) and chfuse, which are run-time dependencies.
import os

from spack_repo.builtin.build_systems import cmake

from spack.package import *

# The chfs-stack checkout that contains this recipe.
CHFS_STACK_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


class ChfsJob(cmake.CMakePackage):
    """Run a job under the interception method its policy calls for (seccomp, ptrace, binary
    rewriting, FUSE) with path mapping, bandwidth limits and fork tracing."""

    homepage = "file://" + CHFS_STACK_CHECKOUT
    git = "file://" + CHFS_STACK_CHECKOUT

    maintainers("chfs-stack")
    license("LicenseRef-chfs-stack")

    version("develop", branch="main")

    depends_on("c", type="build")
    depends_on("cxx", type="build")  # the root CMake project enables C and CXX
    depends_on("cmake@3.20:", type="build")
    # libchfs for chfs: mappings under seccomp; it calls chfs_open_posix, chfs_fstat, chfs_utimens,
    # ... which upstream chfs.h lacks
    depends_on("chfs implementation=chfs-stack")
    depends_on("chfs-hook", type="run")
    depends_on("chfuse", type="run")

    # seccomp user notification with ADDFD (Linux 5.14+), x86-64 system-call table and registers.
    requires("platform=linux", msg="chfs-job uses seccomp user notification and ptrace")
    requires("target=x86_64:", msg="chfs-job's system-call table and register use are x86-64")

    # An install without the launcher (a CMake configuration that skipped its target) must not
    # pass as a success.
    sanity_check_is_file = [join_path("bin", "chfs-job")]

    def cmake_args(self):
        return [
            self.define("CHFS_STACK_COMPONENTS", "chfs-job"),
            self.define("BUILD_TESTING", False),
            # MPI builds only the guideline benchmark's communication row (chfs-job-mpi-comm),
            # which `chfs-job bench` skips when it is missing: never the build host's MPI.
            self.define("CMAKE_DISABLE_FIND_PACKAGE_MPI", True),
        ]
