"""Every environments/*/spack.yaml is a valid Spack environment whose specs resolve to recipes.

Checked statically (no Spack): YAML parses; `spack:` has specs; every spec parses and names a
package of our repository or of the pinned Spack builtin snapshot, with variants those packages
have; `env_vars` uses only the operations Spack's schema allows, with string values; every
CHFS_* variable is one the client parses, with a value it accepts; repos and develop paths point
into this checkout; every spec has a local-build mapping; the header says what the path is good
for and what it costs. And the four access paths of issue 6 all have an environment.
"""
import os
import re

import pytest
import yaml

from recipecheck import checker

ENVDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(ENVDIR)
REPO = os.path.join(ROOT, "spack-repo", "spack_repo", "chfs_stack")
REQUIRED = ["native", "mpiio", "hook", "fuse"]
ENVS = sorted(d for d in os.listdir(ENVDIR) if os.path.isfile(os.path.join(ENVDIR, d, "spack.yaml")))

# The CHFS_* variables libchfs parses (packages/chfs/common/config.c) and what each accepts.
CHFS_VARS = {
    "CHFS_SERVER": r".+",
    "CHFS_CHUNK_SIZE": r"\d+[KMG]?",
    "CHFS_PLACEMENT": r"hash|local",
    "CHFS_ASYNC_ACCESS": r"[01]",
    "CHFS_BUF_SIZE": r"\d+[KMG]?",
    "CHFS_RDMA_THRESH": r"\d+[KMG]?|-1",
    "CHFS_RPC_TIMEOUT_MSEC": r"\d+",
    "CHFS_NODE_LIST_CACHE_TIMEOUT": r"\d+",
    "CHFS_LOG_PRIORITY": r"emerg|alert|crit|err|warning|notice|info|debug",
    "CHFS_SECRET_FILE": r".+",
    "CHFS_LOCAL_FASTPATH": r"[01]",
    "CHFS_BACKEND_PATH": r"(/.*)?",   # libchfs and chfsd (config.c); empty: no backend
}
# Settings of environments/stack and the access paths.
STACK_VARS = {"CHFS_STACK_ENV", "CHFS_STACK_PROTO", "CHFS_STACK_MOUNT", "CHFS_STACK_SERVERS",
              "CHFS_STACK_HOSTFILE", "CHFS_STACK_SCRATCH", "ROMIO_FSTYPE_FORCE"}


@pytest.fixture(scope="module")
def universe():
    recipes, problems, uni = checker.check_repo(REPO)
    return uni


def load(name):
    with open(os.path.join(ENVDIR, name, "spack.yaml")) as f:
        text = f.read()
    return text, yaml.safe_load(text)


@pytest.mark.parametrize("name", REQUIRED)
def test_access_path_has_an_environment(name):
    assert name in ENVS, f"no environments/{name}/spack.yaml"


@pytest.mark.parametrize("name", ENVS)
def test_specs_resolve_to_recipes(name, universe):
    _, doc = load(name)
    sp = doc["spack"]
    assert sp.get("specs"), f"{name}: no specs"
    problems = []
    for spec in sp["specs"]:
        problems += universe.check_spec(spec, None, f"{name}/spack.yaml spec {spec!r}")
    for pkg, req in (sp.get("packages") or {}).items():
        for r in req.get("require", []) if isinstance(req.get("require"), list) else [req.get("require")]:
            if r:
                problems += universe.check_spec(r, None, f"{name}: packages:{pkg}:require")
    for pkg, dev in (sp.get("develop") or {}).items():
        problems += universe.check_spec(dev["spec"], None, f"{name}: develop {pkg}")
        assert dev["spec"].startswith(pkg + "@"), f"{name}: develop entry {pkg} names {dev['spec']}"
        path = os.path.normpath(os.path.join(ENVDIR, name, dev["path"]))
        assert os.path.isfile(os.path.join(path, "CMakeLists.txt")), f"{name}: develop path {path}"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ENVS)
def test_env_vars_are_valid(name):
    _, doc = load(name)
    ev = doc["spack"].get("env_vars") or {}
    assert set(ev) <= {"set", "unset", "prepend_path", "append_path", "remove_path"}, ev.keys()
    sets = ev.get("set") or {}
    assert sets.get("CHFS_STACK_ENV") == name
    for var, value in sets.items():
        assert isinstance(value, str), f"{name}: {var} is {value!r}; quote it (Spack env_vars)"
        if var.startswith("CHFS_") and not var.startswith("CHFS_STACK_"):
            assert var in CHFS_VARS, f"{name}: {var} is not a variable libchfs reads"
            assert re.fullmatch(CHFS_VARS[var], value), f"{name}: {var}={value!r} is rejected"
        else:
            assert var in STACK_VARS, f"{name}: unknown setting {var}"
    if any(re.match(r"chfs\b", spec) for spec in doc["spack"]["specs"]):  # not the gfarm env
        assert "CHFS_CHUNK_SIZE" in sets and "CHFS_RPC_TIMEOUT_MSEC" in sets


@pytest.mark.parametrize("name", ENVS)
def test_repo_and_local_build_mapping(name):
    _, doc = load(name)
    repos = doc["spack"]["repos"]
    path = repos["chfs_stack"].replace("$env", os.path.join(ENVDIR, name))
    assert os.path.samefile(path, REPO), f"{name}: repos.chfs_stack -> {path}"
    with open(os.path.join(ENVDIR, "local-build.yaml")) as f:
        mapping = yaml.safe_load(f)
    for spec in doc["spack"]["specs"]:
        pkg = re.match(r"[\w-]+", spec).group(0)
        assert pkg in mapping, f"{name}: {pkg} has no entry in local-build.yaml"


@pytest.mark.parametrize("name", ENVS)
def test_header_says_what_it_is_good_for_and_costs(name):
    text, _ = load(name)
    header = text.split("spack:")[0]
    assert "Good for:" in header and "Costs:" in header, f"{name}: header lacks Good for/Costs"
