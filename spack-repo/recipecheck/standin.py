"""A recording stand-in for the parts of Spack a recipe imports, for static checking.

Design: a recipe (package.py) is Python that runs Spack directives in its class body. To check
it without Spack we install, for the duration of one import, stand-in modules `spack.package`,
`spack_repo.builtin.build_systems.<bs>` and `spack_repo.builtin.packages.<name>.package`:
- directives (version, variant, depends_on, conflicts, requires, provides, patch, resource,
  license, maintainers, build_system, conditional, redistribute, extends, can_splice) are plain
  functions with Spack 1.1's signatures — a wrong keyword or arity raises TypeError exactly as in
  Spack — that record each call, with the enclosing `with when(...)` conditions, into a list;
  the package metaclass moves the recorded calls onto the class being defined (a directive
  outside a package class is an error);
- base classes (CMakePackage, Mpich, ...) carry the variants Spack's own classes define, taken
  from the pinned snapshot (builtin.json), so `when="build_system=cmake"` or a derived recipe's
  use of an inherited variant can be checked; a builtin package not in the snapshot cannot be
  imported at all.
Nothing here builds, fetches or concretizes: it only records, and checker.py judges.
"""
import contextlib
import os
import sys
import types

from . import snapshot

_pending = []        # directive calls not yet claimed by a class
_when_stack = []     # conditions of the enclosing `with when(...)` blocks


class Directive:
    def __init__(self, name, args, kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs
        self.context_when = list(_when_stack)

    def __repr__(self):
        return f"{self.name}{self.args}{self.kwargs}"


def _record(name, *args, **kwargs):
    d = Directive(name, args, kwargs)
    _pending.append(d)
    return d


# --- directives: Spack 1.1 signatures (lib/spack/spack/directives.py) ---------------------------
def version(ver, checksum=None, *, preferred=None, deprecated=None, no_cache=None, url=None,
            extension=None, expand=None, fetch_options=None, md5=None, sha1=None, sha224=None,
            sha256=None, sha384=None, sha512=None, git=None, commit=None, tag=None, branch=None,
            get_full_repo=None, git_sparse_paths=None, submodules=None, submodules_delete=None,
            svn=None, hg=None, cvs=None, revision=None, date=None):
    kw = {k: v for k, v in locals().items() if k != "ver" and v is not None}
    return _record("version", ver, **kw)


def variant(name, default=None, description="", values=None, multi=None, validator=None,
            when=None, sticky=False):
    return _record("variant", name, default=default, description=description, values=values,
                   multi=multi, when=when)


def depends_on(spec, when=None, type=("build", "link"), patches=None):
    return _record("depends_on", spec, when=when, type=type)


def extends(spec, when=None, type=("build", "run"), patches=None):
    return _record("depends_on", spec, when=when, type=type)


def conflicts(conflict_spec, when=None, msg=None):
    return _record("conflicts", conflict_spec, when=when)


def requires(*requirement_specs, policy="one_of", when=None, msg=None):
    if policy not in ("one_of", "any_of"):
        raise ValueError(f"requires(): policy must be one_of or any_of, not {policy!r}")
    return _record("requires", *requirement_specs, when=when)


def provides(*specs, when=None):
    return _record("provides", *specs, when=when)


def patch(url_or_filename, level=1, when=None, working_dir=".", reverse=False, sha256=None,
          archive_sha256=None):
    return _record("patch", url_or_filename, when=when, sha256=sha256)


def resource(*, name=None, destination="", placement=None, when=None, **kwargs):
    return _record("resource", name=name, when=when, **kwargs)


def license(license_identifier, checked_by=None, when=None):
    return _record("license", license_identifier, when=when)


def maintainers(*names):
    return _record("maintainers", *names)


def redistribute(source=None, binary=None, when=None):
    return _record("redistribute", when=when)


def can_splice(target, *, when, match_variants=None):
    return _record("can_splice", target, when=when)


class Conditional(tuple):
    """Result of conditional(): build-system values that apply under a condition."""


def conditional(*values, when=None):
    return Conditional((v, when) for v in values)


def build_system(*values, default=None):
    names = [v[0] for c in values for v in (c if isinstance(c, Conditional) else [(c, None)])]
    whens = [v[1] for c in values if isinstance(c, Conditional) for v in c]
    return _record("variant", "build_system", default=default or names[0],
                   description="Build systems supported by the package", values=tuple(names),
                   multi=False, when=None, conditions=whens)


def generator(*names, default=None):  # spack_repo.builtin.build_systems.cmake.generator
    if any(n not in ("make", "ninja") for n in names):
        raise ValueError("only 'make' and 'ninja' are allowed for CMake's 'generator' directive")
    return _record("variant", "generator", default=default or names[0], description="generator",
                   values=tuple(names), multi=False, when="build_system=cmake")


@contextlib.contextmanager
def when(condition):
    _when_stack.append(condition)
    try:
        yield
    finally:
        _when_stack.pop()


def _decorator_factory(*args, **kwargs):
    return lambda f: f


run_before = run_after = on_package_attributes = _decorator_factory

DIRECTIVES = {f.__name__: f for f in (version, variant, depends_on, extends, conflicts, requires,
                                      provides, patch, resource, license, maintainers,
                                      redistribute, can_splice, conditional, build_system, when)}
DIRECTIVES.update(run_before=run_before, run_after=run_after,
                  on_package_attributes=on_package_attributes)
# Pure helpers a class body may call (e.g. root_cmakelists_dir = join_path(...)).
DIRECTIVES.update(join_path=os.path.join)


# --- package classes ----------------------------------------------------------------------------
class PackageMeta(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        inherited = [d for b in bases for d in getattr(b, "_directives", [])]
        own = list(_pending)
        _pending.clear()
        for d in own:
            d.owner = cls
        cls._own_directives = own
        cls._directives = inherited + own


class PackageBase(metaclass=PackageMeta):
    _origin = "spack"        # "spack" (a base class), "builtin" (a builtin recipe) or "ours"


class BuilderBase:
    """Stand-in for Spack's builder classes (CMakeBuilder, ...); recipes subclass them."""


def _base_package_class(class_name, variants, origin, build_system_name=None, info=None):
    """A stand-in base class whose recorded directives declare what the snapshot says the real
    class declares: variants and, for a builtin recipe, versions, maintainers and license."""
    info = info or {}
    for v in info.get("versions", []):
        _record("version", v, sha256="0" * 64)
    if info.get("maintainers"):
        _record("maintainers", "(builtin)")
    if info.get("license"):
        _record("license", "(builtin)")
    for vname, vinfo in sorted(variants.items()):
        _record("variant", vname, default=vinfo.get("default"), description="(from snapshot)",
                values=tuple(vinfo["values"]) if vinfo.get("values") else None,
                multi=vinfo.get("multi"), when=None)
    if build_system_name:
        build_system(build_system_name)
    attrs = {"_origin": origin}
    if info.get("homepage"):
        attrs["homepage"] = info["homepage"]
    cls = PackageMeta(class_name, (PackageBase,), attrs)
    return cls


def _build_system_module(modname, info, spack_package):
    mod = types.ModuleType(f"spack_repo.builtin.build_systems.{modname}")
    for name in info.get("reexports", []):
        setattr(mod, name, getattr(spack_package, name))
    for cname in info["classes"]:
        if cname.endswith("Package") or cname == "Package":
            bs = info.get("build_system")
            setattr(mod, cname, _base_package_class(cname, info["variants"], "spack", bs))
        else:
            setattr(mod, cname, type(cname, (BuilderBase,), {}))
    if modname == "cmake":
        mod.generator = generator
    return mod


def _builtin_package_module(name, info):
    mod = types.ModuleType(f"spack_repo.builtin.packages.{name}.package")
    for cname in info["classes"]:
        if cname == info["class"]:
            cls = _base_package_class(cname, info["variants"], "builtin", info=info)
            cls._builtin_name = name
            setattr(mod, cname, cls)
        else:
            setattr(mod, cname, type(cname, (BuilderBase,), {}))
    return mod


def _spack_package_module(snap):
    mod = types.ModuleType("spack.package")
    exported = []
    for name in snap["spack_package_names"]:
        # Everything Spack exports exists; only the directives and decorators do something.
        setattr(mod, name, DIRECTIVES.get(name, _unused_helper(name)))
        exported.append(name)
    for name, f in DIRECTIVES.items():
        setattr(mod, name, f)
    mod.__all__ = sorted(set(exported) | set(DIRECTIVES))
    mod.PackageBase = mod.Package = _base_package_class("Package", {}, "spack", "generic")
    mod.GenericBuilder = mod.Builder = mod.BuilderWithDefaults = type("GenericBuilder", (BuilderBase,), {})
    return mod


def _unused_helper(name):
    def helper(*args, **kwargs):
        raise RuntimeError(f"{name}() runs only inside Spack (static check)")
    helper.__name__ = name
    return helper


@contextlib.contextmanager
def installed(snap=None):
    """Install the stand-in modules into sys.modules; restore the previous ones afterwards."""
    snap = snap or snapshot.load()
    mods = {"spack": types.ModuleType("spack"), "spack_repo": types.ModuleType("spack_repo"),
            "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
            "spack_repo.builtin.build_systems": types.ModuleType("spack_repo.builtin.build_systems"),
            "spack_repo.builtin.packages": types.ModuleType("spack_repo.builtin.packages")}
    for m in mods.values():
        m.__path__ = []
    mods["spack.package"] = _spack_package_module(snap)
    mods["spack"].package = mods["spack.package"]
    for bs, info in snap["build_systems"].items():
        m = _build_system_module(bs, info, mods["spack.package"])
        mods[m.__name__] = m
        setattr(mods["spack_repo.builtin.build_systems"], bs, m)
    for name, info in snap["packages"].items():
        pkgmod = types.ModuleType(f"spack_repo.builtin.packages.{name}")
        pkgmod.__path__ = []
        m = _builtin_package_module(name, info)
        pkgmod.package = m
        mods[pkgmod.__name__], mods[m.__name__] = pkgmod, m
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    _pending.clear()
    try:
        yield mods
    finally:
        _pending.clear()
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
