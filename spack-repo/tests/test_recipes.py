"""Every recipe of spack-repo/ passes the static check against the pinned Spack snapshot, and
every component chfs-stack ships has a recipe (a missing one fails here, by name)."""
import os
import re

import pytest

from recipecheck import checker, snapshot, specs

REPO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "spack_repo", "chfs_stack")

# Components of issue 6: chfs (ours + upstream variant), the MPI-IO MPICH, the hook, FUSE (chfuse
# + its libfuse), pwrake, gfarm with the cooperative cache, and the bundle.
REQUIRED = ["chfs", "mpich-chfs", "chfs-hook", "chfuse", "libfuse-passthrough", "pwrake",
            "gfarm", "chfs-stack"]


@pytest.fixture(scope="module")
def checked():
    return checker.check_repo(REPO)


def test_every_recipe_passes_the_static_check(checked):
    recipes, problems, _ = checked
    assert recipes, "no recipes found"
    assert not problems, "recipe problems:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", REQUIRED)
def test_component_has_a_recipe(checked, name):
    recipes, _, _ = checked
    assert name in recipes, f"no recipe for {name} in {REPO}/packages/{name.replace('-', '_')}"


def test_bundle_pulls_in_every_component_and_the_builtin_workload(checked):
    recipes, _, _ = checked
    if "chfs-stack" not in recipes:
        pytest.fail("no chfs-stack bundle recipe")
    deps = {d.args[0].split()[0].split("@")[0].split("+")[0]
            for d in recipes["chfs-stack"].directives("depends_on")}
    for name in ["chfs", "mpich-chfs", "chfs-hook", "chfuse", "pwrake", "gfarm", "hdf5", "ior-chfs",
                 "montage"]:
        assert name in deps, f"chfs-stack does not depend on {name}"


def test_chfs_default_is_ours_and_upstream_is_a_variant(checked):
    recipes, _, _ = checked
    v = recipes["chfs"].variants()["implementation"]
    assert v.kwargs["default"] == "chfs-stack"
    assert "upstream" in v.kwargs["values"]
    upstream_deps = {specs.parse(d.args[0])[0].name for d in recipes["chfs"].directives("depends_on")
                     if "implementation=upstream" in d.context_when}
    assert {"mochi-margo", "mercury", "argobots"} <= upstream_deps


def test_snapshot_names_its_spack_versions():
    snap = snapshot.load()
    assert snap["spack"] == "v1.1.0" and snap["spack_packages"] == "v2025.11.0"
    for name in ["mpich", "libfabric", "mochi-margo", "mercury", "argobots", "hdf5", "ior",
                 "montage"]:
        assert name in snap["packages"], name
    assert {"mpi", "pkgconfig", "c"} <= set(snap["virtuals"])


@pytest.mark.parametrize("name", ["mpich-chfs", "chfs-hook", "chfuse", "chfs-job"])
def test_access_paths_using_our_chfs_h_extensions_require_our_implementation(checked, name):
    # They call chfs_fstat, chfs_ftruncate, chfs_rename, ... which upstream chfs.h lacks.
    recipes, _, _ = checked
    deps = [d.args[0] for d in recipes[name].directives("depends_on")
            if d.args[0].split()[0] == "chfs"]
    assert deps and all("implementation=chfs-stack" in d for d in deps), deps


def test_ior_chfs_builds_against_either_implementation(checked):
    recipes, _, _ = checked
    deps = [d.args[0] for d in recipes["ior-chfs"].directives("depends_on")
            if d.args[0].split()[0] == "chfs"]
    assert deps == ["chfs"], deps


LANG_DEPS = {"C": "c", "CXX": "cxx", "Fortran": "fortran"}


def test_cmake_recipes_of_our_tree_depend_on_the_project_languages(checked):
    # Spack's compiler wrapper refuses a language the recipe did not declare: a CMake project()
    # that enables CXX fails to configure without depends_on("cxx") (found with real Spack).
    import re

    recipes, _, _ = checked
    root = os.path.dirname(os.path.dirname(os.path.dirname(REPO)))  # the checkout
    seen = 0
    for name, r in recipes.items():
        bs = r.variants().get("build_system")
        if "CHFS_STACK_CHECKOUT" not in vars(r.module) or not bs or "cmake" not in bs.kwargs["values"]:
            continue
        src = getattr(r.cls, "root_cmakelists_dir", ".")
        cml = os.path.join(root, src, "CMakeLists.txt")
        if not os.path.exists(cml):
            continue
        text = open(cml).read()
        langs = set()
        for m in re.finditer(r"project\s*\([^)]*?LANGUAGES([^)]*)\)", text):
            langs |= set(m.group(1).split())
        deps = {d.args[0] for d in r.directives("depends_on")}
        for lang in langs & set(LANG_DEPS):
            assert LANG_DEPS[lang] in deps, f"{name}: {cml} enables {lang}; no depends_on(" \
                                            f"{LANG_DEPS[lang]!r})"
        seen += 1
    assert seen >= 3, "expected chfs, chfs-hook and chfuse to build CMake projects of this tree"


def _deps(recipe):
    """[(dependency name, spec text, conditions)] of a recipe's depends_on directives."""
    return [(specs.parse(d.args[0])[0].name, d.args[0],
             [w for w in d.context_when + [d.kwargs.get("when")] if w])
            for d in recipe.directives("depends_on")]


def test_bundle_offers_upstream_chfs_as_a_variant(checked):
    # Real Spack rejected `chfs-stack ^chfs implementation=upstream`: the bundle pinned
    # chfs@develop, which chfs keeps with implementation=chfs-stack.
    recipes, _, _ = checked
    b = recipes["chfs-stack"]
    assert b.variants()["implementation"].kwargs["values"] == ("chfs-stack", "upstream")
    chfs = [(s, w) for n, s, w in _deps(b) if n == "chfs"]
    assert sorted(chfs) == [("chfs implementation=chfs-stack", ["implementation=chfs-stack"]),
                            ("chfs implementation=upstream", ["implementation=upstream"])]
    vetoed = {c.args[0] for c in b.directives("conflicts")
              if c.kwargs.get("when") == "implementation=upstream"}
    assert vetoed == {"+mpiio", "+hook", "+fuse"}


def test_bundle_installs_ior_with_the_chfs_backend_and_mpi_workload_only_with_mpiio(checked):
    recipes, _, _ = checked
    mpi_users = [(n, s, w) for n, s, w in _deps(recipes["chfs-stack"]) if n in ("hdf5", "ior",
                                                                                 "ior-chfs")]
    assert {n for n, _, _ in mpi_users} == {"hdf5", "ior-chfs"}, mpi_users
    for n, s, w in mpi_users:
        assert "+mpiio" in w and "%mpi=mpich-chfs" in s, (n, s, w)


def test_upstream_mochi_dependencies_exclude_branch_versions(checked):
    # Unbounded, real Spack resolved mochi-margo to its `main` branch; a numbered range that
    # ends in a number excludes main/master (those sort above every number).
    recipes, _, _ = checked
    snap = snapshot.load()
    for name, text, when in _deps(recipes["chfs"]):
        if name not in ("mochi-margo", "mercury", "argobots"):
            continue
        v = specs.parse(text)[0].version
        assert v and re.fullmatch(r"[\d.:]*[\d.]", v) and not v.endswith(":"), text
        assert [x for x in snap["packages"][name]["versions"] if not x[0].isdigit()], name


def test_chfs_mpi_benchmark_is_a_variant_with_spacks_mpi(checked):
    recipes, _, _ = checked
    assert "mpi-bench" in recipes["chfs"].variants()
    assert [w for n, _, w in _deps(recipes["chfs"]) if n == "mpi"] == \
        [["implementation=chfs-stack", "+mpi-bench"]]


def test_gfarm2fs_needs_no_openssl(checked):
    recipes, _, _ = checked
    assert "openssl" not in {n for n, _, _ in _deps(recipes["gfarm2fs"])}


def test_chfs_builds_chfsd_on_io_uring_by_a_default_variant(checked):
    """+uring (default, ours only) depends on liburing and builds libasyncsys beside chfs, so
    chfsd gets its io_uring storage engine; ~uring leaves libasyncsys out (sync engine)."""
    recipes, _, _ = checked
    r = recipes["chfs"]
    v = r.variants()["uring"]
    assert v.kwargs["default"] is True and v.kwargs["when"] == "implementation=chfs-stack"
    assert [(t, w) for n, t, w in _deps(r) if n == "liburing"] == \
        [("liburing@2.3:", ["implementation=chfs-stack", "+uring"])]

    class Spec:
        def __init__(self, on):
            self.on = on

        def satisfies(self, s):
            return {"+uring": self.on, "+mpi-bench": False}[s]

    class Builder:
        pkg = type("Pkg", (), {"run_tests": False})()

        def __init__(self, on):
            self.spec = Spec(on)

        def define(self, k, v):
            return (k, v)

    for on, want in [(True, "packages/asyncsys;packages/chfs"), (False, "packages/chfs")]:
        args = dict(r.module.CMakeBuilder.cmake_args(Builder(on)))
        assert args["CHFS_STACK_COMPONENTS"] == want
        assert args["CHFS_STACK_CI_TOOLS"] is False


def test_libfuse_carries_the_io_uring_patch_after_the_passthrough_one(checked):
    recipes, _, _ = checked
    r = recipes["libfuse-passthrough"]
    patches = [(d.args[0], d.kwargs.get("when")) for d in r.directives("patch")]
    assert patches == [("libfuse-passthrough.patch", "@3.14:3.16"),
                       ("libfuse-io-uring.patch", "@3.14.0+io_uring")]
    root = os.path.dirname(os.path.dirname(os.path.dirname(REPO)))
    for name, _ in patches:  # the files build-libfuse applies, not copies
        assert os.path.realpath(os.path.join(REPO, "packages", "libfuse_passthrough", name)) == \
            os.path.join(root, "packages", "chfuse", name)
    assert r.variants()["io_uring"].kwargs["default"] is True
    assert [(t, w) for n, t, w in _deps(r) if n == "liburing"] == [("liburing@2.3:", ["+io_uring"])]
