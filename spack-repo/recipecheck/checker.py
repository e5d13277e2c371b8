"""Static check of the chfs_stack Spack recipes against the pinned Spack snapshot.

Design: load each recipe under the recording stand-in (standin.py), then judge what it recorded:
- the module defines exactly one package class, named after its directory as Spack requires
  (mpich_chfs -> MpichChfs), with a docstring, homepage, maintainers, license and a version;
- every version has one way to fetch it (a checksum with a URL, or git with branch/tag/commit);
- every variant's default is one of its values, and it has a description;
- every spec string (depends_on, conflicts, requires, provides, when=, patch when=) parses and
  names only packages in our repository, pinned builtin packages or builtin virtuals, with
  variants those packages define (and allowed values where the snapshot knows them);
- dependency types are build/link/run/test; local patch files exist; URL patches have sha256;
- no directive is called outside a package class;
- global names that methods use exist (module globals, spack.package exports or Python builtins);
- and what consistency.py checks between a recipe and its surroundings (the checkout, the recipes
  it depends on, Spack's conventions).
check_repo() returns a list of problems (empty = pass); each names the recipe and the cause.
"""
import builtins
import dis
import importlib.util
import os
import re
import sys
import types

from . import consistency, snapshot, specs, standin

DEP_TYPES = {"build", "link", "run", "test"}


def repo_packages(repo_dir):
    """{spack name: package.py path} of a repository directory spack_repo/<ns>/."""
    pkgs = os.path.join(repo_dir, "packages")
    return {d.replace("_", "-"): os.path.join(pkgs, d, "package.py")
            for d in sorted(os.listdir(pkgs)) if os.path.exists(os.path.join(pkgs, d, "package.py"))}


def class_name(pkg_name):
    return "".join(p.capitalize() for p in re.split(r"[-_]", pkg_name))


class Recipe:
    def __init__(self, name, path, cls, module):
        self.name, self.path, self.cls, self.module = name, path, cls, module

    def directives(self, kind, own=False):
        ds = self.cls._own_directives if own else self.cls._directives
        return [d for d in ds if d.name == kind]

    def variants(self):
        out = {}
        for d in self.directives("variant"):
            out[d.args[0]] = d
        return out


def load_recipe(name, path, namespace, problems):
    modname = f"spack_repo.{namespace}.packages.{name.replace('-', '_')}.package"
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # any error while running the recipe body is a finding
        problems.append(f"{name}: recipe fails to load: {type(e).__name__}: {e}")
        return None
    if standin._pending:
        problems.append(f"{name}: directive(s) outside a package class: {standin._pending}")
        standin._pending.clear()
    classes = [v for k, v in vars(module).items()
               if isinstance(v, type) and issubclass(v, standin.PackageBase)
               and v.__module__ == modname]
    want = class_name(name)
    match = [c for c in classes if c.__name__ == want]
    if not match:
        problems.append(f"{name}: no package class {want} (found {[c.__name__ for c in classes]})")
        return None
    if len(classes) > 1:
        problems.append(f"{name}: more than one package class: {[c.__name__ for c in classes]}")
    return Recipe(name, path, match[0], module)


class Universe:
    """Everything a spec may name: our recipes, pinned builtin packages, builtin virtuals."""

    def __init__(self, recipes, snap):
        self.recipes, self.snap = recipes, snap
        self.virtuals = set(snap["virtuals"])
        # Virtuals our own recipes provide (e.g. mpich-chfs provides mpi).
        for r in recipes.values():
            for d in r.directives("provides"):
                for s in d.args:
                    self.virtuals.add(specs.parse(s)[0].name)

    def variants_of(self, name):
        """{variant: (values or None, multi)} or None if the name is unknown."""
        if name in self.recipes:
            return {v: (_values(d), d.kwargs.get("multi"))
                    for v, d in self.recipes[name].variants().items()}
        if name in self.snap["packages"]:
            return {v: (i.get("values"), i.get("multi"))
                    for v, i in self.snap["packages"][name]["variants"].items()}
        return None

    def check_spec(self, text, owner, what):
        """Problems with one spec string; owner is the recipe name anonymous nodes refer to."""
        try:
            nodes = specs.parse(text)
        except specs.SpecSyntaxError as e:
            return [f"{owner}: {what}: {e}"]
        out = []
        for n in nodes:
            name = n.name or owner
            if name is None:
                out.append(f"{what}: anonymous spec {text!r} outside a recipe")
                continue
            if name in self.virtuals and name not in self.recipes:
                continue
            known = self.variants_of(name)
            if known is None:
                out.append(f"{owner}: {what}: unknown package {name!r} in {text!r} (not in "
                           f"chfs_stack, not pinned from builtin {self.snap['spack_packages']})")
                continue
            for v, val in n.variants.items():
                if v in specs.RESERVED_KEYS - {"build_system"}:
                    continue
                if v not in known:
                    out.append(f"{owner}: {what}: {name} has no variant {v!r} ({text!r})")
                    continue
                allowed, _multi = known[v]
                if isinstance(val, list) and allowed:
                    bad = [x for x in val if x not in allowed and x != "none"]
                    if bad:
                        out.append(f"{owner}: {what}: {name} {v}={','.join(bad)} not in "
                                   f"{sorted(allowed)} ({text!r})")
        return out


def _values(d):
    v = d.kwargs.get("values")
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return list(v)
    return None


def _whens(d):
    out = list(d.context_when)
    if d.kwargs.get("when") not in (None, True):
        out.append(d.kwargs["when"])
    out += [w for w in d.kwargs.get("conditions", []) if w]
    return out


def check_recipe(r, uni, problems):
    c, n = r.cls, r.name
    say = problems.append
    if not (c.__doc__ or "").strip():
        say(f"{n}: package class has no docstring (Spack shows it as the description)")
    if not getattr(c, "homepage", None):
        say(f"{n}: no homepage")
    if not r.directives("maintainers"):
        say(f"{n}: no maintainers()")
    if not r.directives("license"):
        say(f"{n}: no license()")
    versions = r.directives("version")
    is_bundle = any("bundle" in (_values(d) or []) for d in r.directives("variant")
                    if d.args[0] == "build_system")
    if not versions:
        say(f"{n}: no version()")
    for d in r.directives("version", own=True):
        ver, kw = d.args[0], d.kwargs
        if not isinstance(ver, str) or not re.fullmatch(r"[\w.-]+", ver):
            say(f"{n}: version {ver!r}: not a version string")
        sums = [k for k in ("checksum", "md5", "sha1", "sha224", "sha256", "sha384", "sha512")
                if k in kw]
        vcs = [k for k in ("git", "svn", "hg", "cvs") if k in kw]
        gitref = [k for k in ("branch", "tag", "commit") if k in kw]
        url = kw.get("url") or getattr(c, "url", None)
        git = kw.get("git") or getattr(c, "git", None)
        if is_bundle:
            if sums or gitref:
                say(f"{n}: version {ver}: a bundle has no source")
        elif gitref:
            if sums:
                say(f"{n}: version {ver}: both a checksum and {gitref}")
            if not git:
                say(f"{n}: version {ver}: {gitref[0]}= without git (class or version)")
            if len(gitref) > 1 and "commit" not in gitref:
                say(f"{n}: version {ver}: both branch and tag")
        elif sums:
            if not url:
                say(f"{n}: version {ver}: a checksum but no url (class or version)")
            if "sha256" in kw and not re.fullmatch(r"[0-9a-f]{64}", kw["sha256"]):
                say(f"{n}: version {ver}: sha256 is not 64 hex digits")
        elif not vcs:
            say(f"{n}: version {ver}: no checksum and no git branch/tag/commit")
    for d in r.directives("variant", own=True):
        name, kw = d.args[0], d.kwargs
        if not re.fullmatch(r"[a-zA-Z_][\w-]*", str(name)):
            say(f"{n}: variant {name!r}: not a valid name")
        if not kw.get("description"):
            say(f"{n}: variant {name}: no description")
        vals, default = _values(d), kw.get("default")
        if vals is None and kw.get("values") is None:
            if not isinstance(default, bool):
                say(f"{n}: variant {name}: boolean variant needs default=True/False, "
                    f"got {default!r}")
        elif vals is not None:
            defaults = default.split(",") if isinstance(default, str) else [default]
            if not kw.get("multi") and len(defaults) > 1:
                say(f"{n}: variant {name}: several defaults but multi is not set")
            bad = [x for x in defaults if x not in vals]
            if bad:
                say(f"{n}: variant {name}: default {default!r} not in values {vals}")
    for d in r.directives("depends_on", own=True):
        t = d.kwargs.get("type")
        ts = {t} if isinstance(t, str) else set(t or ())
        if not ts or not ts <= DEP_TYPES:
            say(f"{n}: depends_on({d.args[0]!r}): type {t!r} not a subset of {sorted(DEP_TYPES)}")
        nodes = _safe_parse(d.args[0])
        if nodes and nodes[0].name is None:
            say(f"{n}: depends_on({d.args[0]!r}): a dependency must name a package")
        if nodes and any(x.edge == "^" for x in nodes):
            say(f"{n}: depends_on({d.args[0]!r}): Spack 1.x rejects the '^' sigil in depends_on")
        if nodes and nodes[0].name == n:
            say(f"{n}: depends_on itself")
        problems += uni.check_spec(d.args[0], n, f"depends_on({d.args[0]!r})")
    for kind in ("conflicts", "requires", "provides"):
        for d in r.directives(kind, own=True):
            for s in d.args:
                problems += uni.check_spec(s, n, f"{kind}({s!r})")
    for d in r.directives("patch", own=True):
        src = d.args[0]
        if re.match(r"https?://", src):
            if not d.kwargs.get("sha256"):
                say(f"{n}: patch {src}: a URL patch needs sha256")
        elif not os.path.exists(os.path.join(os.path.dirname(r.path), src)):
            say(f"{n}: patch file {src} does not exist next to the recipe")
    for d in r.cls._own_directives:
        for w in _whens(d):
            problems += uni.check_spec(w, n, f"when={w!r} of {d.name}({d.args[0] if d.args else ''})")
    problems += check_method_globals(r)


def _safe_parse(text):
    try:
        return specs.parse(text)
    except specs.SpecSyntaxError:
        return None


def _code_objects(module):
    for v in vars(module).values():
        if isinstance(v, type) and v.__module__ == module.__name__:
            for attr in vars(v).values():
                f = getattr(attr, "__func__", attr)
                if isinstance(f, types.FunctionType):
                    yield v.__name__ + "." + f.__name__, f.__code__
        elif isinstance(v, types.FunctionType) and v.__module__ == module.__name__:
            yield v.__name__, v.__code__


def check_method_globals(r):
    known = set(vars(r.module)) | set(dir(builtins)) | set(r.module.__dict__.get("__all__", []))
    known |= set(sys.modules["spack.package"].__all__)
    out = []
    for where, code in _code_objects(r.module):
        stack = [code]
        while stack:
            co = stack.pop()
            stack += [k for k in co.co_consts if isinstance(k, types.CodeType)]
            for ins in dis.get_instructions(co):
                if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval not in known:
                    out.append(f"{r.name}: {where} uses undefined name {ins.argval!r}")
    return out


def check_repo(repo_dir, snap=None):
    """Check every recipe of spack_repo/<ns>/; return (recipes, problems)."""
    snap = snap or snapshot.load()
    problems = []
    ns_file = os.path.join(repo_dir, "repo.yaml")
    namespace = os.path.basename(os.path.normpath(repo_dir))
    if not os.path.exists(ns_file) or f"namespace: {namespace}" not in open(ns_file).read():
        problems.append(f"{repo_dir}: repo.yaml missing or its namespace is not {namespace}")
    recipes = {}
    with standin.installed(snap):
        for name, path in repo_packages(repo_dir).items():
            r = load_recipe(name, path, namespace, problems)
            if r:
                recipes[name] = r
        uni = Universe(recipes, snap)
        for r in recipes.values():
            check_recipe(r, uni, problems)
        problems += consistency.check_recipes(recipes)
    return recipes, problems, uni


if __name__ == "__main__":
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    repo = os.path.join(here, "spack_repo", "chfs_stack")
    rs, ps, _ = check_repo(repo)
    ps += consistency.check_checkout(os.path.dirname(here), repo)
    print(f"{len(rs)} recipes: {', '.join(rs)}")
    print("\n".join(ps) or "no problems")
    sys.exit(1 if ps else 0)
