# chfuse — FUSE access path of chfs-stack: mounts a CHFS pool; node-local files are served by
# FUSE kernel passthrough (reads/writes/mmap bypass the daemon).
#
# Design: builds packages/chfuse of the chfs-stack checkout as a CMake project of its own
# against an installed chfs (chfsConfig.cmake, target chfs::chfs) and libfuse-passthrough
# (pkg-config fuse3). Its binaries carry an RPATH to that libfuse, since the system's
# libfuse3.so.3 has the same soname without the passthrough symbols. Running it needs Linux >= 6.9
# with CONFIG_FUSE_PASSTHROUGH and CAP_SYS_ADMIN for passthrough (else all I/O goes through the
# daemon), and fusermount3 from the system to unmount.
import os

from spack_repo.builtin.build_systems import cmake

from spack.package import *

# The chfs-stack checkout that contains this recipe
# (spack-repo/spack_repo/chfs_stack/packages/chfuse/).
CHFS_STACK_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


class Chfuse(cmake.CMakePackage):
    """chfuse: FUSE daemon that mounts a CHFS pool, with FUSE kernel passthrough for files whose
    data lives on this node's CHFS server."""

    homepage = "file://" + CHFS_STACK_CHECKOUT
    git = "file://" + CHFS_STACK_CHECKOUT

    maintainers("chfs-stack")
    license("LicenseRef-chfs-stack")

    version("develop", branch="main")

    root_cmakelists_dir = join_path("packages", "chfuse")

    depends_on("c", type="build")
    depends_on("cmake@3.20:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("chfs implementation=chfs-stack")
    depends_on("libfuse-passthrough@3.14:")

    # Its CMake skips the daemon when find_package(chfs) or fuse3 is missing.
    sanity_check_is_file = [join_path("bin", "chfuse")]

    def cmake_args(self):
        return [self.define("BUILD_TESTING", False)]
