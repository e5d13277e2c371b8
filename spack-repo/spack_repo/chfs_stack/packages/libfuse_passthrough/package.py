# libfuse-passthrough — libfuse with the FUSE passthrough API (kernel protocol 7.40), for chfuse.
#
# Design: derive from builtin Libfuse (every variant and meson option of the builtin recipe
# stays) and add what chfuse needs: libfuse >= 3.17 has the passthrough API natively; for
# 3.14.0-3.16.2 we apply chfs-stack's own libfuse-passthrough.patch (a symlink to
# packages/chfuse/libfuse-passthrough.patch, the same file packages/chfuse/build-libfuse
# applies to Debian's 3.14.0 outside Spack). 3.14.0 is added as a version: it is the release
# tarball Debian 12 ships as fuse3_3.14.0.orig.tar.xz (same sha256), so Spack and the
# Spack-free build use identical sources. Older than 3.14 the patch does not apply.
# +io_uring (default) also applies libfuse-io-uring.patch (a symlink to
# packages/chfuse/libfuse-io-uring.patch, which build-libfuse applies after the passthrough
# one): FUSE over io_uring (-o io_uring, Linux 6.14+, falling back to /dev/fuse) on liburing.
# The patch is made for 3.14.0; where the concretizer must pick another version it turns the
# variant off. Patches apply in the order declared here, the same order as build-libfuse's.
# A separate package name keeps the system/builtin libfuse (e.g. as a gfarm2fs dependency)
# untouched: only what asks for libfuse-passthrough gets the patched library.

from spack_repo.builtin.packages.libfuse.package import Libfuse

from spack.package import *


class LibfusePassthrough(Libfuse):
    """libfuse 3 with the FUSE passthrough API (fuse_passthrough_open/close,
    fuse_file_info.backing_id, FUSE_CAP_PASSTHROUGH): natively from 3.17, by chfs-stack's patch
    for 3.14.0-3.16.2."""

    maintainers("chfs-stack")
    # libfuse's library is LGPL-2.1; its utilities (not built here by default) are GPL-2.0.
    license("LGPL-2.1-only")

    # Detection of system installations stays with the builtin libfuse recipe.
    executables = []

    version(
        "3.14.0",
        sha256="96115b2a8ff34bd1e0c7b00c5dfd8297571d7e165042b94498c9a26356a9a70a",
        # The version chfs-stack tests (Debian 12's, with our patch); without this Spack picks
        # the newest builtin version, 3.16.2, which nothing here has run.
        preferred=True,
        url="https://github.com/libfuse/libfuse/releases/download/fuse-3.14.0/fuse-3.14.0.tar.xz",
    )

    conflicts(
        "@:3.13", msg="libfuse-passthrough: the passthrough patch needs libfuse 3.14 or newer"
    )
    patch("libfuse-passthrough.patch", when="@3.14:3.16")

    variant(
        "io_uring",
        default=True,
        description="FUSE over io_uring (-o io_uring) by chfs-stack's patch; needs liburing",
    )
    conflicts("+io_uring", when="@3.15:", msg="the io_uring patch is made for libfuse 3.14.0")
    depends_on("liburing@2.3:", when="+io_uring")
    patch("libfuse-io-uring.patch", when="@3.14.0+io_uring")

    # chfuse needs only the library; fusermount3 comes from the system's fuse3 package.
    variant("utils", default=False, description="Build and install helper and example programs.")

    # The headers prove the install; the check below that they declare the passthrough API.
    sanity_check_is_file = [join_path("include", "fuse3", "fuse_lowlevel.h")]

    @run_after("install")
    def check_passthrough_api(self):
        with open(join_path(self.prefix.include, "fuse3", "fuse_lowlevel.h")) as f:
            header = f.read()
        if "fuse_passthrough_open" not in header:
            raise InstallError("libfuse-passthrough: headers lack the passthrough API")
        if self.spec.satisfies("+io_uring") and "fuse_session_uring_requests" not in header:
            raise InstallError("libfuse-passthrough: +io_uring, but the headers lack it")

    # Builtin Libfuse (spack-packages v2025.11.0) is a plain MesonPackage whose meson_args() is
    # a package method (no separate builder classes to derive from).
    def meson_args(self):
        return super().meson_args() + ["-Dtests=false"]
