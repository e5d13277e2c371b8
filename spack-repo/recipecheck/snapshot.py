"""The pinned snapshot of Spack that the static recipe check compares against.

builtin.json records, from one Spack release and one spack-packages release (named inside it):
the names `spack.package` exports, the variants of the build-system base classes, and — for every
builtin package our recipes or environments name — its class name, module classes and variants,
plus the full list of virtual package names builtin provides (mpi, pkgconfig, c, ...).
`pin.py` regenerates it from real checkouts; nothing else writes it.
"""
import json
import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin.json")


def load(path=PATH):
    with open(path) as f:
        return json.load(f)
