# pwrake — Parallel Workflow extension for Rake (masa16/pwrake), the workflow engine of the
# Montage runs in workflows/.
#
# Design: Pwrake 2.3.1 (the last release) fails on Ruby >= 3.0: TaskQueue#deq_task holds a Monitor
# and resumes postprocess Fibers that re-enter it, and since Ruby 3.0 a Monitor is owned per Fiber,
# so the re-entry either raises "ThreadError: deadlock; lock already owned by another fiber" at
# once or blocks forever (both seen on Ruby 3.1.2). Rather than pin an end-of-life Ruby 2, we ship
# our own fix (pwrake-2.3.1-ruby3-fiber-reentrant-lock.patch, not from upstream): the queue lock
# becomes re-entrant per Thread. Measured on Debian 12 (Ruby 3.1.2), 4 one-second file tasks each
# depending on an existing source file, `pwrake -j 4`: unpatched hangs (killed after 20 s); patched
# finishes in 2.1-2.3 s, as fast as tasks without sources. The patch is harmless on Ruby 2 (there a
# Monitor is already per Thread), so it applies to every Ruby.
from spack_repo.builtin.build_systems.ruby import RubyPackage

from spack.package import *


class Pwrake(RubyPackage):
    """Pwrake: a Parallel Workflow extension for Rake that runs Rakefile tasks in parallel on
    multicores and, over SSH, on cluster nodes sharing a file system (NFS, Gfarm); this build
    carries chfs-stack's fix for Ruby >= 3.0."""

    homepage = "https://github.com/masa16/pwrake"
    git = "https://github.com/masa16/pwrake.git"

    maintainers("chfs-stack")
    license("MIT")

    version("2.3.1", tag="v2.3.1", commit="2aa272350e85401a1153064fc446114dfba76bda")

    # pwrake.gemspec: required_ruby_version >= 2.2.3; bin/pwrake requires rake.
    depends_on("ruby@2.2.3:", type=("build", "run"))
    depends_on("ruby-rake", type="run")

    patch("pwrake-2.3.1-ruby3-fiber-reentrant-lock.patch", when="@2.3.1")

    # pwrake.gemspec lists its files with `git ls-files`: from a source without .git the gem is
    # empty and `gem install` still succeeds. Spack must report that as a failed install.
    sanity_check_is_file = [join_path("bin", "pwrake"), join_path("bin", "pwrake_branch")]
