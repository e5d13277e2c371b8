# gfarm — the Gfarm distributed file system (gfmd, gfsd, libgfarm, gf* tools), optionally with
# chfs-stack's cooperative cache.
#
# Design: version 2.7.20 builds from the same source tarball as the Spack-free build
# (packages/gfarm/build-gfarm): Debian bookworm's gfarm_2.7.20+dfsg.orig.tar.xz, checksum as in
# its .dsc. +coop-cache adds chfs-stack's new sources (packages/gfarm/coop-cache/ of the checkout
# this recipe lives in) and applies packages/gfarm/patches/*.patch, exactly as build-gfarm does.
# The metadata backend is "none" by default (in-memory gfmd, as Gfarm/BB uses; no database
# server to run), or PostgreSQL for a persistent metadata server.
import glob
import os

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *

# The chfs-stack checkout that contains this recipe.
CHFS_STACK_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))
COOP_CACHE_DIR = os.path.join(CHFS_STACK_CHECKOUT, "packages", "gfarm")


class Gfarm(AutotoolsPackage):
    """Gfarm: a distributed file system for large-scale cluster computing and wide-area data
    sharing, with fine-grained replica location control; optionally with chfs-stack's
    cooperative caching among client nodes (+coop-cache)."""

    homepage = "https://github.com/oss-tsukuba/gfarm"
    url = "https://deb.debian.org/debian/pool/main/g/gfarm/gfarm_2.7.20+dfsg.orig.tar.xz"
    git = "https://github.com/oss-tsukuba/gfarm.git"

    maintainers("chfs-stack")
    license("LicenseRef-Gfarm")

    version("2.7.20", sha256="0d2fbdf3c00a9e9a5fe035dc484d0d138df52bccda5d084170a5757f05d5f384")

    variant("coop-cache", default=True, description="chfs-stack cooperative cache (gfccd)")
    variant(
        "backend",
        default="none",
        values=("none", "postgresql"),
        multi=False,
        description="gfmd metadata backend: in-memory (none) or PostgreSQL",
    )
    variant("infiniband", default=False, description="InfiniBand (verbs) data transfer")

    depends_on("c", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("openssl")
    depends_on("postgresql", when="backend=postgresql")
    depends_on("rdma-core", when="+infiniband")
    # The cooperative-cache patches edit only C sources and Gfarm's hand-written Makefiles:
    # configure is not regenerated.

    conflicts("+coop-cache", when="@:2.7.19,2.7.21:", msg="the cooperative cache targets 2.7.20")

    def patch(self):
        if not self.spec.satisfies("+coop-cache"):
            return
        copy_tree(join_path(COOP_CACHE_DIR, "coop-cache"), ".")
        patch_cmd = which("patch", required=True)
        for p in sorted(glob.glob(join_path(COOP_CACHE_DIR, "patches", "*.patch"))):
            patch_cmd("-p1", "--forward", "-i", p)

    def configure_args(self):
        args = ["--disable-static", "--disable-xmlattr", "--without-openldap"]
        if self.spec.satisfies("backend=none"):
            args.append("--without-postgresql")
        else:
            args.append("--with-postgresql=" + self.spec["postgresql"].prefix)
        if self.spec.satisfies("+infiniband"):
            args.append("--with-infiniband")
        return args
