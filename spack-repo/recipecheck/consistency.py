"""Checks that relate a recipe to its surroundings: the checkout it builds from, the recipes it
depends on, Spack's conventions and the environments that use it.

Design: checker.py judges each directive on its own; the defects real Spack 1.1 found beyond
that (issue 17, item 5) sit between things, so each check here reads one relation:
- promises: a `^dep key=value` the recipe's comments offer must not be ruled out by a version the
  recipe pins on dep together with dep's own conflicts (chfs-stack pinned chfs@develop while
  offering ^chfs implementation=upstream, which chfs conflicts with at @develop), and a
  `spack install NAME ...` they show must not hit one of the recipe's own conflicts;
- optional CMake packages: a `find_package(X ... QUIET)` in the part of our tree a recipe builds
  is either a declared dependency or switched off (CMAKE_DISABLE_FIND_PACKAGE_X) — else CMake
  quietly uses whatever the build host has (chfs-mpi-bench found the host's MPI);
- inputs outside the hash: a recipe whose source is not the checkout must not read files of the
  checkout in its methods; Spack hashes patch() directives, not what a method happens to read;
- sanity: a recipe that builds something must name a file that proves it was installed (an
  empty Pwrake gem, a chfuse built without its daemon, were "successful" installs);
- preferred versions: a version a derived recipe adds below the base's newest must be marked
  preferred, or Spack picks the newest, untested one;
- virtuals: depend on the virtual (pkgconfig, mpi), not on one provider of it;
- homepage: a recipe of chfs-stack's own code points at this checkout, not at upstream CHFS;
- style: lines no longer than spack-packages' flake8 limit (99);
- the checkout: `.gitignore` covers the build-* links `spack -e ENV install` leaves in a develop
  tree, and spack-repo-index.yaml lets `spack repo add` find the repository;
- environments: where an environment has mpich-chfs, every MPI user names it as its MPI
  (`%mpi=mpich-chfs`): `packages: mpi: require:` does not reach a package Spack takes as an
  external (Debian's hdf5 comes linked to Debian's MPICH); an environment with a pool offers
  CHFS_BACKEND_PATH in its env_vars ("" or an absolute path) for a site's backend.
Each function returns a list of one-line problems naming the recipe (or file) and the cause.
"""
import os
import re
import subprocess
import types

from . import specs

MAX_LINE = 99          # spack-packages .flake8: max-line-length = 99
# Packages a recipe should not name when it means the virtual they provide.
PROVIDER_OF = {"pkgconf": "pkgconfig", "pkg-config": "pkgconfig", "mpich": "mpi",
               "openmpi": "mpi", "mvapich2": "mpi"}
# CMake package names -> the Spack package or virtual that provides them.
CMAKE_TO_SPACK = {"MPI": "mpi", "chfs": "chfs", "PkgConfig": "pkgconfig", "Threads": None}
# Packages whose specs in an environment use MPI (ior-chfs is builtin Ior with the CHFS backend).
MPI_USERS = {"hdf5": "+mpi", "ior": "", "ior-chfs": ""}
SPACK_OWN = "LicenseRef-chfs-stack"


def checkout_of(r):
    return vars(r.module).get("CHFS_STACK_CHECKOUT")


def builds_from_checkout(r):
    co = checkout_of(r)
    return bool(co) and str(getattr(r.cls, "git", "")).startswith("file://" + co)


def is_bundle(r):
    bs = r.variants().get("build_system")
    return bool(bs) and "bundle" in (bs.kwargs.get("values") or ())


# ---- promises ------------------------------------------------------------------------------
_PROMISE = re.compile(r"\^([a-z][\w-]*)\s+([a-z][\w-]*)=([\w.-]+)")


def _comment_text(r):
    with open(r.path) as f:
        src = f.read()
    text = "\n".join(ln.split("#", 1)[1] for ln in src.splitlines() if "#" in ln)
    return text + "\n" + (r.cls.__doc__ or "")


def _version_listed(version, when):
    """Whether a when= spec's version list names this exact version (e.g. '@develop')."""
    try:
        nodes = specs.parse(when)
    except specs.SpecSyntaxError:
        return False
    v = nodes[0].version
    return v is not None and version in v.split(",")


def check_promises(r, recipes):
    out = []
    for dep, key, value in _PROMISE.findall(_comment_text(r)):
        if dep not in recipes:
            continue
        for d in r.directives("depends_on", own=True):
            node = specs.parse(d.args[0])[0]
            if node.name != dep or d.context_when or d.kwargs.get("when"):
                continue
            pinned = node.variants.get(key)
            if pinned is not None and pinned != [value]:
                out.append(f"{r.name}: offers ^{dep} {key}={value} but depends_on({d.args[0]!r})")
            if not node.version:
                continue
            for c in recipes[dep].directives("conflicts"):
                cnode = specs.parse(c.args[0])[0]
                w = c.kwargs.get("when")
                if cnode.variants.get(key) == [value] and w and _version_listed(node.version, w):
                    out.append(f"{r.name}: offers ^{dep} {key}={value}, but depends_on("
                               f"{d.args[0]!r}) and {dep} has conflicts({c.args[0]!r}, "
                               f"when={w!r}): real Spack rejects it")
    return out


_INSTALL = re.compile(r"spack install ([a-z][\w-]*)((?:\s+[~+][\w-]+|\s+[\w-]+=[\w.,-]+)*)")


def _variant_settings(text):
    """{variant: True/False/[values]} of the flags and key=value words in text."""
    try:
        return specs.parse("x " + text.strip())[0].variants if text.strip() else {}
    except specs.SpecSyntaxError:
        return {}


def _satisfied(settings, spec_text, defaults):
    """Whether variant settings (falling back to the defaults) satisfy an anonymous spec's
    variants; None when the spec constrains anything else (versions, dependencies)."""
    nodes = specs.parse(spec_text)
    if len(nodes) > 1 or nodes[0].version or nodes[0].name:
        return None
    for k, v in nodes[0].variants.items():
        have = settings.get(k, defaults.get(k))
        if isinstance(v, bool):
            if have is not v:
                return False
        elif have != v and [have] != v:
            return False
    return True


def check_shown_installs(r):
    defaults = {k: d.kwargs.get("default") for k, d in r.variants().items()}
    out = []
    for name, rest in _INSTALL.findall(_comment_text(r)):
        if name != r.name:
            continue
        settings = _variant_settings(rest)
        for c in r.directives("conflicts", own=True):
            w = c.kwargs.get("when")
            hit_c = _satisfied(settings, c.args[0], defaults)
            hit_w = _satisfied(settings, w, defaults) if w else True
            if hit_c and hit_w:
                out.append(f"{r.name}: shows `spack install {name}{rest}`, which hits its own "
                           f"conflicts({c.args[0]!r}, when={c.kwargs.get('when')!r})")
    return out


# ---- optional CMake packages -----------------------------------------------------------------
_FIND = re.compile(r"find_package\s*\(\s*(\w+)([^)]*)\)", re.S)


def _cmake_dirs(r, root):
    with open(r.path) as f:
        src = f.read()
    # The components are a literal, or a variable the recipe assigns literals to (one list per
    # variant setting, e.g. chfs's +uring adds packages/asyncsys): every list counts.
    lists = re.findall(r'"CHFS_STACK_COMPONENTS",\s*"([^"]+)"', src)
    for var in re.findall(r'"CHFS_STACK_COMPONENTS",\s*([A-Za-z_]\w*)\s*\)', src):
        lists += re.findall(rf'\b{var}\s*=\s*"([^"]+)"', src)
    if lists:
        return sorted({os.path.join(root, c) for lst in lists for c in lst.split(";")})
    sub = getattr(r.cls, "root_cmakelists_dir", None)
    return [os.path.join(root, sub)] if sub else [root]


def check_optional_cmake_packages(r):
    root = checkout_of(r)
    if not builds_from_checkout(r) or "cmake" not in str(r.variants().get("build_system")):
        return []
    with open(r.path) as f:
        src = f.read()
    deps = {specs.parse(d.args[0])[0].name for d in r.directives("depends_on")}
    out = []
    for top in _cmake_dirs(r, root):
        for dirpath, _dirs, files in os.walk(top):
            if "CMakeLists.txt" not in files:
                continue
            path = os.path.join(dirpath, "CMakeLists.txt")
            for name, rest in _FIND.findall(open(path).read()):
                if "QUIET" not in rest or "REQUIRED" in rest:
                    continue
                spack_name = CMAKE_TO_SPACK.get(name, name.lower())
                if spack_name is None or spack_name in deps:
                    continue
                if f"CMAKE_DISABLE_FIND_PACKAGE_{name}" in src:
                    continue
                out.append(f"{r.name}: {os.path.relpath(path, root)} looks for {name} (optional) "
                           f"but the recipe neither depends on {spack_name!r} nor sets "
                           f"CMAKE_DISABLE_FIND_PACKAGE_{name}: CMake uses the build host's")
    return out


# ---- inputs outside the spec hash --------------------------------------------------------------
def _checkout_globals(r):
    co = checkout_of(r)
    if not co:
        return set()
    return {k for k, v in vars(r.module).items()
            if isinstance(v, str) and (v == co or v.startswith(co + os.sep))}


def check_checkout_reads(r):
    if builds_from_checkout(r):
        return []
    names = _checkout_globals(r)
    out = []
    for cname, cls in vars(r.module).items():
        if not isinstance(cls, type) or cls.__module__ != r.module.__name__:
            continue
        for fname, attr in vars(cls).items():
            f = getattr(attr, "__func__", attr)
            if not isinstance(f, types.FunctionType):
                continue
            used = set(f.__code__.co_names) & names
            if used:
                out.append(f"{r.name}: {cname}.{fname} reads the checkout ({', '.join(sorted(used))}"
                           f"): those files are outside the spec hash (make them a patch())")
    return out


# ---- sanity checks, preferred versions, virtuals, homepage ----------------------------------
def check_sanity_files(r):
    if is_bundle(r) or not r.directives("version", own=True):
        return []
    for cls in type.mro(r.cls):
        if "sanity_check_is_file" in vars(cls) or "sanity_check_is_dir" in vars(cls):
            return []
    return [f"{r.name}: no sanity_check_is_file: an install that produced nothing (an empty "
            f"gem, a CMake project that skipped its main target) passes as a success"]


def _vkey(v):
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.-]", v))


def check_preferred_versions(r):
    bases = [b for b in type.mro(r.cls)[1:] if getattr(b, "_builtin_name", None)]
    if not bases:
        return []
    base_versions = [d.args[0] for d in bases[0]._directives if d.name == "version"]
    numbered = [v for v in base_versions if re.fullmatch(r"[\d.]+", v)]
    if not numbered:
        return []
    newest = max(numbered, key=_vkey)
    own = r.directives("version", own=True)
    if any(d.kwargs.get("preferred") for d in own):
        return []
    return [f"{r.name}: adds version {d.args[0]} to builtin {bases[0]._builtin_name} whose newest "
            f"is {newest}: mark it preferred=True or Spack builds {newest}"
            for d in own if re.fullmatch(r"[\d.]+", d.args[0]) and _vkey(d.args[0]) < _vkey(newest)]


def check_virtuals(r):
    out = []
    for d in r.directives("depends_on", own=True):
        name = specs.parse(d.args[0])[0].name
        if name in PROVIDER_OF:
            out.append(f"{r.name}: depends_on({d.args[0]!r}) names one provider; depend on the "
                       f"virtual {PROVIDER_OF[name]!r}")
    return out


def check_homepage(r):
    co = checkout_of(r)
    own = any(d.args[0] == SPACK_OWN for d in r.directives("license", own=True))
    if not own:
        return []
    want = "file://" + co if co else None
    if want is None or getattr(r.cls, "homepage", None) != want:
        return [f"{r.name}: chfs-stack's own code (license {SPACK_OWN}) but homepage is "
                f"{getattr(r.cls, 'homepage', None)!r}, not this checkout (file://"
                f"CHFS_STACK_CHECKOUT)"]
    return []


def check_line_length(r):
    with open(r.path) as f:
        return [f"{r.name}: {os.path.basename(r.path)}:{i}: line of {len(ln)} characters > "
                f"{MAX_LINE} (flake8 E501 with spack-packages' .flake8)"
                for i, ln in enumerate(f.read().splitlines(), 1) if len(ln) > MAX_LINE]


RECIPE_CHECKS = (check_optional_cmake_packages, check_checkout_reads, check_sanity_files,
                 check_preferred_versions, check_virtuals, check_homepage, check_line_length)


def check_recipes(recipes):
    out = []
    for r in recipes.values():
        out += check_promises(r, recipes)
        out += check_shown_installs(r)
        for check in RECIPE_CHECKS:
            out += check(r)
    return out


# ---- the checkout and the environments -----------------------------------------------------------
def check_checkout(root, repo_dir):
    out = []
    probe = "build-linux-debian12-x86_64-abcdefg"   # what `spack -e ENV install` links
    r = subprocess.run(["git", "-C", root, "check-ignore", "-q", "--no-index", probe],
                       capture_output=True)
    if r.returncode != 0:
        out.append(f"{root}/.gitignore: does not ignore the {probe} links Spack leaves in a "
                   f"develop tree (a directory pattern like /build*/ misses symlinks)")
    index = os.path.join(root, "spack-repo-index.yaml")
    rel = os.path.relpath(repo_dir, root)
    if not os.path.exists(index):
        out.append(f"{root}: no spack-repo-index.yaml (spack repo add <git URL> needs it)")
    elif rel not in open(index).read():
        out.append(f"{index}: does not list {rel}")
    return out


def check_environment(name, doc):
    """Problems with one environment's spack.yaml (already parsed)."""
    sp = doc.get("spack") or {}
    return _check_environment_mpi(name, sp) + _check_environment_backend(name, sp)


def _check_environment_backend(name, sp):
    """An environment that runs a pool (spec chfs) offers CHFS_BACKEND_PATH in env_vars:set, a
    string that is empty (no backend) or absolute — where a site puts its file system."""
    if not any(specs.parse(s)[0].name == "chfs" for s in sp.get("specs") or []):
        return []
    ev = ((sp.get("env_vars") or {}).get("set")) or {}
    if "CHFS_BACKEND_PATH" not in ev:
        return [f"{name}: env_vars:set has no CHFS_BACKEND_PATH (\"\" for none, or the site's "
                f"backend directory): a site has nowhere to point the pool at its file system"]
    v = ev["CHFS_BACKEND_PATH"]
    if not isinstance(v, str) or (v and not v.startswith("/")):
        return [f"{name}: CHFS_BACKEND_PATH {v!r} must be \"\" or an absolute path"]
    return []


def _check_environment_mpi(name, sp):
    specs_ = sp.get("specs") or []
    has_mpich_chfs = any(specs.parse(s)[0].name == "mpich-chfs" for s in specs_)
    if not has_mpich_chfs:
        return []
    out = []
    for s in specs_:
        nodes = specs.parse(s)
        root = nodes[0]
        if root.name not in MPI_USERS:
            continue
        flag = MPI_USERS[root.name]
        if flag and root.variants.get(flag[1:]) is not True:
            continue
        if not any(n.edge == "%" and n.name == "mpich-chfs" for n in nodes[1:]):
            out.append(f"{name}: spec {s!r} does not name its MPI: add '%mpi=mpich-chfs' "
                       f"(packages:mpi:require does not reach an external {root.name})")
    return out
