"""The checks between a recipe and its surroundings (recipecheck/consistency.py) catch each defect
real Spack 1.1 found in our recipes (issue 17, item 5): every case below is the defect as it was,
in a small throw-away repository or checkout, and the check must name it; the real repository,
checkout and environments must pass them all."""
import os
import subprocess
import textwrap

import pytest
import yaml

from recipecheck import checker, consistency

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REPO = os.path.join(ROOT, "spack-repo", "spack_repo", "chfs_stack")
ENVDIR = os.path.join(ROOT, "environments")

CHECKOUT = ('import os\n\nCHFS_STACK_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname('
            '__file__), *[os.pardir] * 5))\n')
SHA = "a" * 64


def recipe(cls, base, body, head=""):
    imports = {"Package": "from spack_repo.builtin.build_systems.generic import Package",
               "CMakePackage": "from spack_repo.builtin.build_systems.cmake import CMakePackage",
               "BundlePackage": "from spack_repo.builtin.build_systems.bundle import BundlePackage",
               "Libfuse": "from spack_repo.builtin.packages.libfuse.package import Libfuse"}
    return (head + imports[base] + "\nfrom spack.package import *\n\n\nclass " + cls + "(" + base
            + '):\n    """A test package."""\n\n' + textwrap.indent(textwrap.dedent(body), "    "))


def make_checkout(tmp_path, packages, files=None):
    """A checkout: files (path -> text) and recipes (name -> package.py text)."""
    root = tmp_path / "co"
    repo = root / "spack-repo" / "spack_repo" / "demo_ns"
    (repo / "packages").mkdir(parents=True)
    (repo / "repo.yaml").write_text("repo:\n  namespace: demo_ns\n  api: v2.2\n")
    for name, text in packages.items():
        d = repo / "packages" / name.replace("-", "_")
        d.mkdir()
        (d / "package.py").write_text(text)
    for path, text in (files or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root, repo


def problems_of(tmp_path, packages, files=None):
    _, repo = make_checkout(tmp_path, packages, files)
    return checker.check_repo(str(repo))[1]


OURS = '''
homepage = "file://" + CHFS_STACK_CHECKOUT
git = "file://" + CHFS_STACK_CHECKOUT
maintainers("x")
license("LicenseRef-chfs-stack")
version("develop", branch="main")
'''
UPSTREAM_CONFLICT = '''
homepage = "file://" + CHFS_STACK_CHECKOUT
git = "file://" + CHFS_STACK_CHECKOUT
maintainers("x")
license("LicenseRef-chfs-stack")
version("develop", branch="main")
version("2.1.0", sha256="{sha}", url="https://example.org/c-2.1.0.tar.gz")
variant("implementation", default="ours", values=("ours", "upstream"), multi=False,
        description="d")
conflicts("implementation=upstream", when="@develop")
sanity_check_is_file = ["bin/x"]
'''.format(sha=SHA)


def test_bundle_pinning_a_version_that_rules_out_what_it_offers(tmp_path):
    bundle = recipe("Suite", "BundlePackage", '''
        homepage = "file://" + CHFS_STACK_CHECKOUT
        maintainers("x")
        license("LicenseRef-chfs-stack")
        version("develop")
        depends_on("core@develop", type="run")
        ''', head=CHECKOUT + "# swap the server: `^core implementation=upstream`\n")
    ps = problems_of(tmp_path, {"suite": bundle,
                                "core": recipe("Core", "Package", UPSTREAM_CONFLICT, CHECKOUT)})
    assert any("offers ^core implementation=upstream" in p and "real Spack rejects it" in p
               for p in ps), ps


def test_shown_install_that_hits_the_recipes_own_conflict(tmp_path):
    body = '''
        homepage = "file://" + CHFS_STACK_CHECKOUT
        maintainers("x")
        license("LicenseRef-chfs-stack")
        version("develop")
        variant("implementation", default="ours", values=("ours", "upstream"), multi=False,
                description="d")
        variant("hook", default=True, description="d")
        conflicts("+hook", when="implementation=upstream")
        '''
    head = CHECKOUT + "# upstream: spack install suite implementation=upstream\n"
    ps = problems_of(tmp_path, {"suite": recipe("Suite", "BundlePackage", body, head)})
    assert any("hits its own conflicts('+hook'" in p for p in ps), ps
    head = CHECKOUT + "# upstream: spack install suite implementation=upstream ~hook\n"
    ps = problems_of(tmp_path / "b", {"suite": recipe("Suite", "BundlePackage", body, head)})
    assert not any("hits its own" in p for p in ps), ps


def test_optional_cmake_package_neither_declared_nor_disabled(tmp_path):
    body = OURS + 'root_cmakelists_dir = "comp"\nsanity_check_is_file = ["bin/x"]\n'
    files = {"comp/CMakeLists.txt": "add_subdirectory(bench)\n",
             "comp/bench/CMakeLists.txt": "find_package(MPI COMPONENTS C QUIET)\n"}
    ps = problems_of(tmp_path, {"comp": recipe("Comp", "CMakePackage", body, CHECKOUT)}, files)
    assert any("looks for MPI (optional)" in p for p in ps), ps
    fixed = body + 'def cmake_args(self):\n    return ["-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON"]\n'
    ps = problems_of(tmp_path / "b", {"comp": recipe("Comp", "CMakePackage", fixed, CHECKOUT)},
                     files)
    assert not any("looks for MPI" in p for p in ps), ps


def test_component_list_chosen_by_a_variant_is_read_in_every_setting(tmp_path):
    # chfs's +uring builds packages/asyncsys too: the list is a variable with one literal per
    # setting. Each listed component is checked (here the second list's "b" has the optional
    # find_package), and only those: "c", in no list, is not (it used to be, as the whole tree).
    body = OURS + '''sanity_check_is_file = ["bin/x"]
variant("extra", default=True, description="d")
def cmake_args(self):
    components = "a;b"
    if not self.spec.satisfies("+extra"):
        components = "a"
    return [self.define("CHFS_STACK_COMPONENTS", components)]
'''
    files = {"CMakeLists.txt": "project(x LANGUAGES C)\n", "a/CMakeLists.txt": "\n",
             "b/CMakeLists.txt": "find_package(MPI QUIET)\n",
             "c/CMakeLists.txt": "find_package(HDF5 QUIET)\n"}
    ps = problems_of(tmp_path, {"comp": recipe("Comp", "CMakePackage", body, CHECKOUT)}, files)
    assert any("b/CMakeLists.txt looks for MPI (optional)" in p for p in ps), ps
    assert not any("HDF5" in p for p in ps), ps


def test_method_reading_the_checkout_outside_the_hash(tmp_path):
    head = CHECKOUT + 'EXTRA = os.path.join(CHFS_STACK_CHECKOUT, "packages", "x")\n'
    body = '''
    homepage = "https://example.org"
    url = "https://example.org/x-1.0.tar.gz"
    maintainers("x")
    license("MIT")
    version("1.0", sha256="{sha}")
    sanity_check_is_file = ["bin/x"]

    def patch(self):
        copy_tree(EXTRA, ".")
    '''.format(sha=SHA)
    ps = problems_of(tmp_path, {"x": recipe("X", "Package", body, head)})
    assert any("X.patch reads the checkout (EXTRA)" in p for p in ps), ps


def test_recipe_without_a_sanity_check(tmp_path):
    body = '''
    homepage = "https://example.org"
    url = "https://example.org/x-1.0.tar.gz"
    maintainers("x")
    license("MIT")
    version("1.0", sha256="{sha}")
    '''.format(sha=SHA)
    ps = problems_of(tmp_path, {"x": recipe("X", "Package", body)})
    assert any("x: no sanity_check_is_file" in p for p in ps), ps


def test_added_version_below_the_newest_not_preferred(tmp_path):
    body = '''
    maintainers("x")
    license("LGPL-2.1-only")
    version("3.14.0", sha256="{sha}", url="https://example.org/fuse-3.14.0.tar.xz")
    sanity_check_is_file = ["include/fuse3/fuse.h"]
    '''.format(sha=SHA)
    ps = problems_of(tmp_path, {"my-fuse": recipe("MyFuse", "Libfuse", body)})
    assert any("adds version 3.14.0" in p and "preferred=True" in p for p in ps), ps


def test_dependency_on_a_provider_instead_of_the_virtual(tmp_path):
    body = '''
    homepage = "https://example.org"
    url = "https://example.org/x-1.0.tar.gz"
    maintainers("x")
    license("MIT")
    version("1.0", sha256="{sha}")
    sanity_check_is_file = ["bin/x"]
    depends_on("pkgconf", type="build")
    '''.format(sha=SHA)
    ps = problems_of(tmp_path, {"x": recipe("X", "Package", body)})
    assert any("depend on the virtual 'pkgconfig'" in p for p in ps), ps


def test_own_code_with_upstreams_homepage(tmp_path):
    body = OURS.replace('homepage = "file://" + CHFS_STACK_CHECKOUT',
                        'homepage = "https://github.com/otatebe/chfs"') + \
        'sanity_check_is_file = ["bin/x"]\n'
    ps = problems_of(tmp_path, {"x": recipe("X", "Package", body, CHECKOUT)})
    assert any("homepage is 'https://github.com/otatebe/chfs'" in p for p in ps), ps


def test_line_longer_than_spack_packages_allows(tmp_path):
    body = OURS + 'sanity_check_is_file = ["bin/x"]\n# ' + "x" * 100 + "\n"
    ps = problems_of(tmp_path, {"x": recipe("X", "Package", body, CHECKOUT)})
    assert any("line of 106 characters > 99" in p for p in ps), ps


def test_checkout_without_build_link_ignore_or_repo_index(tmp_path):
    root, repo = make_checkout(tmp_path, {}, {".gitignore": "/build*/\n"})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    ps = consistency.check_checkout(str(root), str(repo))
    assert any("does not ignore the build-" in p for p in ps), ps
    assert any("no spack-repo-index.yaml" in p for p in ps), ps


def test_environment_whose_mpi_users_do_not_name_mpich_chfs():
    doc = {"spack": {"specs": ["chfs", "mpich-chfs", "hdf5+mpi", "ior+hdf5"],
                     "packages": {"mpi": {"require": "mpich-chfs"}},
                     "env_vars": {"set": {"CHFS_BACKEND_PATH": ""}}}}
    ps = consistency.check_environment("mpiio", doc)
    assert len(ps) == 2 and all("add '%mpi=mpich-chfs'" in p for p in ps), ps


def test_environment_with_a_pool_but_no_backend_variable():
    doc = {"spack": {"specs": ["chfs", "chfs-hook"], "env_vars": {"set": {"CHFS_STACK_ENV": "hook"}}}}
    ps = consistency.check_environment("hook", doc)
    assert len(ps) == 1 and "no CHFS_BACKEND_PATH" in ps[0], ps
    doc["spack"]["env_vars"]["set"]["CHFS_BACKEND_PATH"] = "relative/dir"
    ps = consistency.check_environment("hook", doc)
    assert len(ps) == 1 and "must be \"\" or an absolute path" in ps[0], ps
    for ok in ("", "/lustre/proj"):
        doc["spack"]["env_vars"]["set"]["CHFS_BACKEND_PATH"] = ok
        assert consistency.check_environment("hook", doc) == []
    gfarm = {"spack": {"specs": ["gfarm@2.7.20+coop-cache backend=none", "gfarm2fs"]}}
    assert consistency.check_environment("gfarm", gfarm) == []   # no CHFS pool: nothing asked


# ---- the real thing passes ------------------------------------------------------------------------
def test_our_checkout_passes():
    assert consistency.check_checkout(ROOT, REPO) == []


def test_the_spack_repo_index_names_our_repository():
    with open(os.path.join(ROOT, "spack-repo-index.yaml")) as f:
        doc = yaml.safe_load(f)
    assert doc["repo_index"]["paths"] == ["spack-repo/spack_repo/chfs_stack"]


@pytest.mark.parametrize("name", sorted(d for d in os.listdir(ENVDIR)
                                        if os.path.isfile(os.path.join(ENVDIR, d, "spack.yaml"))))
def test_our_environments_pass_the_environment_checks(name):
    with open(os.path.join(ENVDIR, name, "spack.yaml")) as f:
        assert consistency.check_environment(name, yaml.safe_load(f)) == []


def test_gfarm_spack_patch_is_current():
    r = subprocess.run([os.path.join(ROOT, "packages", "gfarm", "make-spack-patch"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
