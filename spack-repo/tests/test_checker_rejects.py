"""The static recipe check rejects wrong directive use: each case is a small recipe with one
mistake, checked in a throw-away repository; the check must report that mistake."""
import os
import textwrap

import pytest

from recipecheck import checker

GOOD_BODY = '''
    """A test package."""
    homepage = "https://example.org"
    url = "https://example.org/x-1.0.tar.gz"
    maintainers("someone")
    license("MIT")
    version("1.0", sha256="{sha}")
    sanity_check_is_file = ["bin/demo"]
'''.format(sha="a" * 64)

CASES = {
    "unknown dependency": ('depends_on("no-such-package")', "unknown package 'no-such-package'"),
    "bad dependency type": ('depends_on("libfabric", type="compile")', "type 'compile'"),
    "unknown variant of a builtin": ('depends_on("hdf5+nosuchvariant")', "no variant 'nosuchvariant'"),
    "bad variant value of a builtin": ('depends_on("libfabric fabrics=carrier-pigeon")',
                                       "fabrics=carrier-pigeon"),
    "default not among values": ('variant("v", default="c", values=("a", "b"), description="d")',
                                 "default 'c' not in values"),
    "boolean variant without bool default": ('variant("v", description="d")', "needs default"),
    "variant without description": ('variant("v", default=True)', "no description"),
    "unknown keyword": ('depends_on("libfabric", wen="+x")', "unexpected keyword"),
    "version without source": ('version("2.0")', "no checksum and no git"),
    "checksum and branch": ('version("2.0", sha256="' + "b" * 64 + '", branch="main")',
                            "both a checksum and"),
    "when names an unknown own variant": ('depends_on("libfabric", when="+nosuch")',
                                          "no variant 'nosuch'"),
    "spec syntax error": ('conflicts("%%%!!")', "cannot parse spec"),
    "missing local patch": ('patch("nothere.patch")', "does not exist"),
    "url patch without sha256": ('patch("https://example.org/p.patch")', "needs sha256"),
    "caret in depends_on": ('depends_on("hdf5+mpi ^mpich")', "'^' sigil"),
    "typo in a helper": ('def install(self, spec, prefix):\n        whcih("make")()', "whcih"),
}


def make_repo(tmp_path, body, cls="Demo", module_tail=""):
    repo = tmp_path / "spack_repo" / "demo_ns"
    pkg = repo / "packages" / "demo"
    pkg.mkdir(parents=True)
    (repo / "repo.yaml").write_text("repo:\n  namespace: demo_ns\n  api: v2.2\n")
    (pkg / "package.py").write_text(textwrap.dedent(f'''\
        from spack_repo.builtin.build_systems.generic import Package
        from spack.package import *


        class {cls}(Package):''') + GOOD_BODY + "    " + body + "\n" + module_tail)
    return str(repo)


def test_a_correct_recipe_passes(tmp_path):
    _, problems, _ = checker.check_repo(make_repo(tmp_path, 'depends_on("libfabric@1.17: fabrics=tcp,rxm")'))
    assert problems == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_mistake_is_reported(tmp_path, case):
    body, expected = CASES[case]
    _, problems, _ = checker.check_repo(make_repo(tmp_path, body))
    assert any(expected in p for p in problems), f"{case}: not reported; got {problems}"


def test_wrong_class_name_is_reported(tmp_path):
    _, problems, _ = checker.check_repo(make_repo(tmp_path, "pass", cls="Dmeo"))
    assert any("no package class Demo" in p for p in problems), problems


def test_directive_outside_a_class_is_reported(tmp_path):
    _, problems, _ = checker.check_repo(make_repo(tmp_path, "pass", module_tail='depends_on("libfabric")\n'))
    assert any("outside a package class" in p for p in problems), problems


def test_builtin_package_not_in_snapshot_cannot_be_imported(tmp_path):
    tail = "from spack_repo.builtin.packages.zlib.package import Zlib\n"
    _, problems, _ = checker.check_repo(make_repo(tmp_path, "pass", module_tail=tail))
    assert any("fails to load" in p and "zlib" in p for p in problems), problems
