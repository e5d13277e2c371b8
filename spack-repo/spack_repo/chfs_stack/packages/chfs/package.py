# chfs — the CHFS ad-hoc parallel file system: server (chfsd), client library (libchfs, chfs.h),
# tools (chfsctl, chlist, ...).
#
# Design: one package, two implementations of the public API (chfs.h, pkg-config "chfs"),
# chosen by the "implementation" variant:
#   implementation=chfs-stack (default): ours — C11 on libfabric, built with CMake from this
#       repository (version "develop": git clone of the checkout this recipe lives in; or a local
#       tree: `spack develop --no-clone -p <checkout> chfs@=develop`).
#   implementation=upstream: otatebe/chfs on Mochi (mochi-margo, mercury, argobots, libfabric),
#       built with Autotools, with the dependencies the published tsukuba-hpcs recipe uses.
# Programs using upstream's chfs.h calls (IOR's CHFS backend, ior-chfs) build against either.
# Our access paths (mpich-chfs, chfs-hook, chfuse) also call what our chfs.h adds (chfs_fstat,
# chfs_ftruncate, chfs_rename, chfs_lstat, chfs_access, ...; chfs_local_backing_path for the
# node-local fast paths), so they require implementation=chfs-stack.
# The versions tell the two apart (ours: develop; upstream: numbered releases and the branch
# "upstream-cache", upstream's default branch), and conflicts() keep each version with its
# implementation, so `spack install chfs` gives ours and `spack install chfs
# implementation=upstream` the newest upstream release. Upstream's Mochi dependencies are bounded
# to numbered releases: unbounded, real Spack 1.1 resolved mochi-margo to its `main` branch.
# chfs-mpi-bench (our tree's MPI benchmark) is built only with +mpi-bench, against Spack's MPI;
# otherwise CMake is told not to look for one (it used to pick up whatever MPI the host had).
# +uring (default; liburing is Linux-only, as CHFS is) also builds libasyncsys (packages/asyncsys,
# on liburing), so chfsd's default storage engine, --io=uring, issues its backing-file I/O
# through io_uring (execution threads where the kernel refuses io_uring); ~uring builds chfsd
# with the sync engine only (pread/pwrite), as before the variant existed.
# The CHFS/Cache backend (a parallel file system directory the pool reads through and flushes
# written files back to) is chosen at run time, not at build time, so it is no variant: a site
# sets CHFS_BACKEND_PATH (absolute, the same on every node) in its environment's env_vars — every
# environments/*/spack.yaml with a pool carries it, "" meaning none — or in a module or shell;
# chfsd defaults -b to it, environments/stack passes it to chfsctl -b on every host.
import os

from spack_repo.builtin.build_systems import autotools, cmake

from spack.package import *

# The chfs-stack checkout that contains this recipe
# (spack-repo/spack_repo/chfs_stack/packages/chfs/).
CHFS_STACK_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


class Chfs(cmake.CMakePackage, autotools.AutotoolsPackage):
    """CHFS: an ad-hoc parallel file system that spreads file chunks over node-local servers
    by consistent hashing. Provides chfsd, libchfs with the chfs.h API, and the chfsctl/ch*
    tools. Default is the chfs-stack implementation on libfabric; the upstream Mochi-based
    implementation (otatebe/chfs) is available as implementation=upstream."""

    homepage = "file://" + CHFS_STACK_CHECKOUT
    git = "file://" + CHFS_STACK_CHECKOUT
    url = "https://github.com/otatebe/chfs/archive/2.1.0.tar.gz"

    maintainers("chfs-stack")

    license("LicenseRef-chfs-stack", when="@develop")
    license("LicenseRef-CHFS-Tatebe", when="@2.0.0:3.0.2,upstream-cache")

    # Ours: the current tree of the chfs-stack repository. Preferred, so that a plain `chfs`
    # concretizes to ours rather than to the newest (upstream) release number.
    version("develop", branch="main", preferred=True)
    # Upstream releases (checksums as published in tsukuba-hpcs/spack-packages).
    version("2.1.0", sha256="6cc21e9b890628eab0c8a669ec71787de6b71dd77827519e2723472d48337d63")
    version("2.0.0", sha256="61aa3600963bded220c28adc8be8bcb0e6dd2ef56f7fb596f4bdefcec37f73ae")
    # 3.x (CHFS/Cache) from git tags; the tags are lightweight, so the commit pins each one.
    upstream_git = "https://github.com/otatebe/chfs.git"
    version(
        "3.0.2", git=upstream_git, tag="3.0.2", commit="9dce733a43cda9aa1d708e09063e2e2f01eff1f3"
    )
    version(
        "3.0.1", git=upstream_git, tag="3.0.1", commit="b7b00c4f231bdc48f0113ab32a13877034afdb66"
    )
    version(
        "3.0.0", git=upstream_git, tag="3.0.0", commit="613d3a6eb4fcc52334e1b5faf41be7999ada61f3"
    )
    # Upstream's default branch (the 2.x line without caching is the old "master").
    version("upstream-cache", git=upstream_git, branch="cache")

    variant(
        "implementation",
        default="chfs-stack",
        values=("chfs-stack", "upstream"),
        multi=False,
        description="Which CHFS server and client to build behind chfs.h",
    )
    variant(
        "mpi-bench",
        default=False,
        when="implementation=chfs-stack",
        description="Build chfs-mpi-bench (the core MPI benchmark) against Spack's MPI",
    )
    variant(
        "uring",
        default=True,
        when="implementation=chfs-stack",
        description="chfsd's storage I/O through io_uring (libasyncsys on liburing)",
    )
    variant(
        "fabrics",
        default="tcp,shm",
        values=("tcp", "shm", "verbs"),
        multi=True,
        description="libfabric providers the pool may use (tcp = tcp;ofi_rxm)",
    )

    build_system(
        conditional("cmake", when="implementation=chfs-stack"),
        conditional("autotools", when="implementation=upstream"),
        default="cmake",
    )

    conflicts("implementation=upstream", when="@develop", msg="@develop is the chfs-stack tree")
    conflicts(
        "implementation=chfs-stack",
        when="@2.0.0:3.0.2,upstream-cache",
        msg="numbered versions and upstream-cache are otatebe/chfs releases",
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build")  # the root CMake project enables C and CXX
    depends_on("pkgconfig", type="build")

    # Both implementations talk to the network through libfabric.
    depends_on("libfabric@1.17:")
    depends_on("libfabric fabrics=tcp,rxm", when="fabrics=tcp")
    depends_on("libfabric fabrics=shm", when="fabrics=shm")
    depends_on("libfabric fabrics=verbs,rxm", when="fabrics=verbs")

    with when("implementation=chfs-stack"):
        depends_on("cmake@3.20:", type="build")
        depends_on("mpi", when="+mpi-bench")
        depends_on("liburing@2.3:", when="+uring")  # Debian 12 has 2.3

    with when("implementation=upstream"):
        depends_on("mochi-margo@0.21.0")
        depends_on("mercury@:2.4~boostsys")
        depends_on("argobots@:1.2")
        depends_on("libfuse@2")
        depends_on("autoconf", type="build")
        depends_on("automake", type="build")
        depends_on("libtool", type="build")

    # Spack reports an install without the server, the tools or the client as a failure (both
    # implementations install these).
    sanity_check_is_file = [
        join_path("sbin", "chfsd"),
        join_path("bin", "chfsctl"),
        join_path("include", "chfs.h"),
    ]

    def setup_run_environment(self, env):
        env.prepend_path("PKG_CONFIG_PATH", self.prefix.lib.pkgconfig)


class CMakeBuilder(cmake.CMakeBuilder):
    def cmake_args(self):
        # Only the chfs component of the chfs-stack tree (with +uring libasyncsys too, which
        # chfsd links); the access paths are their own packages (chfs-hook, chfuse, mpich-chfs).
        components = "packages/asyncsys;packages/chfs"
        if not self.spec.satisfies("+uring"):
            components = "packages/chfs"
        return [
            self.define("CHFS_STACK_COMPONENTS", components),
            # CI helpers of the tree (ci/no-io-uring) are not part of the package.
            self.define("CHFS_STACK_CI_TOOLS", False),
            self.define("BUILD_TESTING", self.pkg.run_tests),
            # Without +mpi-bench no MPI is searched for (not even the build host's).
            self.define("CMAKE_DISABLE_FIND_PACKAGE_MPI", not self.spec.satisfies("+mpi-bench")),
        ]


class AutotoolsBuilder(autotools.AutotoolsBuilder):
    def autoreconf(self, pkg, spec, prefix):
        which("autoreconf", required=True)("-fiv")

    def configure_args(self):
        if self.spec.satisfies("@3.0.1:3.0.2,upstream-cache"):
            return ["--with-fuse=" + self.spec["libfuse"].prefix]
        return []
