# gfarm2fs — the FUSE (2.x) client of Gfarm: mounts a Gfarm file system as a directory.
#
# Design: 1.2.16, the version Debian bookworm ships next to Gfarm 2.7.20, from Debian's
# upstream tarball (checksum as in gfarm2fs_1.2.16-1.dsc). It links libgfarm, so with
# gfarm+coop-cache every read through the mount goes through the cooperative cache; nothing in
# gfarm2fs itself changes. chfs-stack's Spack-free build uses Debian's gfarm2fs binary with the
# patched libgfarm first on LD_LIBRARY_PATH (packages/gfarm/gfarm-cluster mount).
from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Gfarm2fs(AutotoolsPackage):
    """gfarm2fs: mount a Gfarm file system through FUSE."""

    homepage = "https://github.com/oss-tsukuba/gfarm2fs"
    url = "https://deb.debian.org/debian/pool/main/g/gfarm2fs/gfarm2fs_1.2.16.orig.tar.xz"

    maintainers("chfs-stack")
    license("LicenseRef-Gfarm")

    version("1.2.16", sha256="22c8b30c7113edd1f56d59d505ff204bbe239eb160a6278b684823528d269eb6")

    depends_on("c", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("gfarm@2.7.15:")
    depends_on("libfuse@2")

    sanity_check_is_file = [join_path("bin", "gfarm2fs")]

    def configure_args(self):
        return ["--with-gfarm=" + self.spec["gfarm"].prefix]
