# chfs-hook — the syscall-hook access path: unmodified dynamically or statically linked
# programs reach CHFS through a zpoline-style hook (chfs-run launcher, LD_PRELOAD loader that
# rewrites syscall instructions, hook library routing the CHFS mount points to libchfs).
#
# Design: builds the chfs-hook directory of the chfs-stack checkout (the root CMake project with
# CHFS_STACK_COMPONENTS=chfs-hook) against an installed chfs found by find_package(chfs). It
# needs our implementation: besides upstream's calls it uses chfs.h extensions upstream CHFS
# lacks (chfs_fstat, chfs_lstat, chfs_ftruncate, chfs_rename, chfs_access, chfs_chmod,
# chfs_utimens, and chfs_local_backing_path for its node-local fast path). capstone
# disassembles the code to rewrite. Running needs `sysctl vm.mmap_min_addr=0` (the trampoline
# lives at address 0), which Spack cannot set: see the README's "Choosing an access path".
import os

from spack_repo.builtin.build_systems import cmake

from spack.package import *

# The chfs-stack checkout that contains this recipe.
CHFS_STACK_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


class ChfsHook(cmake.CMakePackage):
    """zpoline-style system-call hook that lets unmodified programs use CHFS paths (chfs-run
    PROGRAM ...), built on the chfs.h client API."""

    homepage = "file://" + CHFS_STACK_CHECKOUT
    git = "file://" + CHFS_STACK_CHECKOUT

    maintainers("chfs-stack")
    license("LicenseRef-chfs-stack")

    version("develop", branch="main")

    depends_on("c", type="build")
    depends_on("cxx", type="build")  # the root CMake project enables C and CXX
    depends_on("cmake@3.20:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("chfs implementation=chfs-stack")
    depends_on("capstone")

    # Rewrites x86-64 syscall instructions and maps its trampoline at virtual address 0.
    requires("platform=linux", msg="chfs-hook uses Linux system calls and mmap at address 0")
    requires("target=x86_64:", msg="chfs-hook rewrites x86-64 syscall instructions")

    # Its CMake leaves out the hook library (and builds only the loader) when find_package(chfs)
    # fails; Spack must not call that a successful install.
    sanity_check_is_file = [join_path("bin", "chfs-run"), join_path("lib", "libchfs-hook.so")]

    def cmake_args(self):
        return [
            self.define("CHFS_STACK_COMPONENTS", "chfs-hook"),
            self.define("BUILD_TESTING", False),
            # chfs-hook-shared-bench (IOR-shaped MPI benchmark) is a development tool: never
            # built against whatever MPI the build host has.
            self.define("CMAKE_DISABLE_FIND_PACKAGE_MPI", True),
        ]
