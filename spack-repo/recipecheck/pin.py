#!/usr/bin/env python3
"""Regenerate builtin.json (the pinned Spack snapshot of the static recipe check).

Usage: python3 -m recipecheck.pin --spack DIR --spack-packages DIR [--add NAME ...]

Reads a Spack checkout (for the names spack.package exports) and a spack-packages checkout (for
the build-system base classes, the builtin packages we name and all virtual names) by parsing
their Python with `ast` — nothing is imported or executed. The packages pinned are those already
in builtin.json plus --add NAMEs; a name builtin does not have is an error. The versions (git
describe of both checkouts) are recorded in the file.
"""
import argparse
import ast
import glob
import json
import os
import re
import subprocess
import sys

from . import snapshot


def _literal(node, names):
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        return None


def _assignments(body):
    out = {}
    for st in body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            try:
                out[st.targets[0].id] = ast.literal_eval(st.value)
            except ValueError:
                pass
    return out


def _variants(tree_body, names):
    """variant()/build_system() calls anywhere below the given statements."""
    variants, build_systems = {}, []
    for node in ast.walk(ast.Module(body=tree_body, type_ignores=[])):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id == "variant" and node.args and isinstance(node.args[0], ast.Constant):
            kw = {k.arg: k.value for k in node.keywords}
            info = variants.setdefault(node.args[0].value, {"values": None, "default": None,
                                                            "multi": None})
            vals = _literal(kw["values"], names) if "values" in kw else None
            if isinstance(vals, (list, tuple)) and all(isinstance(v, str) for v in vals):
                info["values"] = sorted(set(info["values"] or []) | set(vals))
            elif "values" in kw:
                info["values"] = None
            if "default" in kw:
                info["default"] = _literal(kw["default"], names)
            if "multi" in kw:
                info["multi"] = _literal(kw["multi"], names)
        elif node.func.id == "build_system":
            for a in node.args:
                if isinstance(a, ast.Constant):
                    build_systems.append(a.value)
                elif isinstance(a, ast.Call):
                    build_systems += [x.value for x in a.args if isinstance(x, ast.Constant)]
    return variants, build_systems


def build_system_modules(builtin):
    out = {}
    for path in sorted(glob.glob(os.path.join(builtin, "build_systems", "*.py"))):
        mod = os.path.basename(path)[:-3]
        if mod.startswith("_"):
            continue
        tree = ast.parse(open(path).read())
        names = _assignments(tree.body)
        classes = [c for c in tree.body if isinstance(c, ast.ClassDef)]
        variants, bss = _variants(tree.body, names)
        reexports = [a.name for st in tree.body if isinstance(st, ast.ImportFrom)
                     and st.module == "spack.package" for a in st.names]
        out[mod] = {"classes": [c.name for c in classes], "variants": variants,
                    "reexports": reexports,
                    "build_system": bss[0] if bss else None}
    return out


def package_info(builtin, name, bs_modules):
    path = os.path.join(builtin, "packages", name.replace("-", "_"), "package.py")
    if not os.path.exists(path):
        sys.exit(f"pin: {name}: no such package in {builtin}")
    tree = ast.parse(open(path).read())
    classes = [c for c in tree.body if isinstance(c, ast.ClassDef)]
    cname = "".join(p.capitalize() for p in re.split(r"[-_]", name))
    main = next((c for c in classes if c.name.lower() == cname.lower()), None)
    if main is None:
        sys.exit(f"pin: {name}: no package class in {path}")
    names = _assignments(tree.body)
    names.update(_assignments(main.body))
    variants, bss = _variants(main.body, names)
    # Variants of the build-system base classes the package derives from.
    for base in main.bases:
        bname = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        for info in bs_modules.values():
            if bname in info["classes"]:
                for v, vi in info["variants"].items():
                    variants.setdefault(v, vi)
                if info["build_system"]:
                    bss.append(info["build_system"])
    if bss:
        variants["build_system"] = {"values": sorted(set(bss)), "default": bss[0], "multi": False}
    calls = [n for n in ast.walk(main) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    versions = sorted({n.args[0].value for n in calls if n.func.id == "version" and n.args
                       and isinstance(n.args[0], ast.Constant)})
    return {"class": main.name, "classes": [c.name for c in classes], "variants": variants,
            "versions": versions, "homepage": _assignments(main.body).get("homepage"),
            "maintainers": any(n.func.id == "maintainers" for n in calls),
            "license": any(n.func.id == "license" for n in calls)}


def virtuals(builtin):
    found = set()
    pat = re.compile(r'provides\(\s*"([a-zA-Z][\w-]*)')
    for path in glob.glob(os.path.join(builtin, "packages", "*", "package.py")):
        found.update(pat.findall(open(path, errors="replace").read()))
    return sorted(found)


def spack_package_names(spack):
    text = open(os.path.join(spack, "lib", "spack", "spack", "package.py")).read()
    tree = ast.parse(text)
    for st in tree.body:
        if isinstance(st, ast.Assign) and getattr(st.targets[0], "id", "") == "__all__":
            return sorted(ast.literal_eval(st.value))
    sys.exit("pin: no __all__ in spack/package.py")


def describe(path):
    try:
        return subprocess.run(["git", "-C", path, "describe", "--tags", "--always"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spack", required=True, help="Spack checkout (e.g. tag v1.1.0)")
    ap.add_argument("--spack-packages", required=True, help="spack-packages checkout (v2025.11.0)")
    ap.add_argument("--spack-version", help="version label if DIR is not a git checkout")
    ap.add_argument("--spack-packages-version", help="version label if DIR is not a git checkout")
    ap.add_argument("--add", nargs="*", default=[], help="builtin package names to pin as well")
    a = ap.parse_args(argv)
    builtin = os.path.join(a.spack_packages, "repos", "spack_repo", "builtin")
    try:
        old = snapshot.load()
    except FileNotFoundError:
        old = {"packages": {}}
    bs = build_system_modules(builtin)
    names = sorted(set(old["packages"]) | set(a.add))
    snap = {
        "spack": a.spack_version or describe(a.spack),
        "spack_packages": a.spack_packages_version or describe(a.spack_packages),
        "spack_package_names": spack_package_names(a.spack),
        "build_systems": bs,
        "packages": {n: package_info(builtin, n, bs) for n in names},
        "virtuals": virtuals(builtin),
    }
    with open(snapshot.PATH, "w") as f:
        json.dump(snap, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"pin: {len(names)} packages, {len(snap['virtuals'])} virtuals -> {snapshot.PATH}")


if __name__ == "__main__":
    main()
