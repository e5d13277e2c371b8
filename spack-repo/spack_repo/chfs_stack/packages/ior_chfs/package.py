# ior-chfs — IOR with its CHFS backend (`ior -a CHFS`, `mdtest -a CHFS`), for the native
# environment.
#
# Design: derive from builtin Ior (all its variants and the MPI dependency stay). IOR 4.0.0 and
# later build src/aiori-CHFS.c whenever `pkg-config chfs` succeeds (configure.ac:
# PKG_CHECK_MODULES([CHFS], [chfs], ...)), so the only additions are the chfs and pkgconfig
# dependencies and a check that the backend was really built. Either chfs implementation works:
# the backend uses only chfs.h.
from spack_repo.builtin.packages.ior.package import Ior

from spack.package import *


class IorChfs(Ior):
    """IOR and mdtest with the CHFS backend (ior -a CHFS) built in, against the chfs package's
    chfs.h client API."""

    maintainers("chfs-stack")
    license("GPL-2.0-only")

    depends_on("chfs")
    depends_on("pkgconfig", type="build")

    conflicts("@:3", msg="ior-chfs: the CHFS backend (aiori-CHFS) first shipped in IOR 4.0.0")

    @run_after("install")
    def check_chfs_backend(self):
        ior = Executable(join_path(self.prefix.bin, "ior"))
        if "CHFS" not in ior("-h", output=str, error=str, fail_on_error=False):
            raise InstallError("ior-chfs: configure did not enable the CHFS backend")
