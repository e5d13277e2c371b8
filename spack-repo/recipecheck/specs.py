"""Spack spec strings, parsed just far enough to check them statically.

Design: a recipe names other packages and variants inside spec strings ("hdf5+mpi",
"libfabric@1.17: fabrics=tcp,rxm", "^mpich@4.0:4.0.3", when="build_system=cmake"). We tokenize
such a string into nodes — the root (possibly anonymous: a bare "+mpi" refers to the package that
declares it) and one node per "^" (dependency) or "%" (direct build dependency / compiler) — each
with its name, version text, and variant settings. Anything the tokenizer does not recognise is a
SpecSyntaxError: a typo in a spec string must fail the check, not pass silently.
"""
import re
from dataclasses import dataclass, field

# Keys every spec node accepts besides the package's own variants (architecture and metadata).
RESERVED_KEYS = {"platform", "os", "target", "arch", "namespace", "dev_path", "patches",
                 "commit", "build_system"}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<edge>\^|%%|%)
  | (?P<virtuals>\[virtuals=[\w,-]+\])
  | (?P<version>@=?[\w.:,=+-]*)
  | (?P<flag>(?:\+\+|\+|~~|~)[a-zA-Z_][\w-]*)
  | (?P<keyvalue>[a-zA-Z_][\w-]*==?(?:"[^"]*"|'[^']*'|[\w.,:*/+@=-]+))
  | (?P<name>[a-zA-Z_][\w.-]*)
""", re.VERBOSE)


class SpecSyntaxError(ValueError):
    pass


@dataclass
class Node:
    name: str = None                 # None: anonymous (the declaring package)
    edge: str = ""                   # "", "^" or "%"
    version: str = None
    variants: dict = field(default_factory=dict)   # name -> True/False or list of str values


def parse(text):
    """Split a spec string into Nodes; raise SpecSyntaxError on anything unrecognised."""
    if not isinstance(text, str) or not text.strip():
        raise SpecSyntaxError(f"empty or non-string spec {text!r}")
    nodes = [Node()]
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise SpecSyntaxError(f"cannot parse spec {text!r} at {text[pos:]!r}")
        pos = m.end()
        kind, tok = m.lastgroup, m.group()
        cur = nodes[-1]
        if kind == "ws" or kind == "virtuals":
            continue
        if kind == "edge":
            nodes.append(Node(edge=tok[0]))
        elif kind == "version":
            if cur.version is not None:
                raise SpecSyntaxError(f"two versions on one node in {text!r}")
            cur.version = tok.lstrip("@=")
        elif kind == "flag":
            on = tok[0] == "+"
            cur.variants[tok.lstrip("+~")] = on
        elif kind == "keyvalue":
            key, _, value = tok.partition("=")
            value = value.lstrip("=").strip("\"'")
            if cur.edge == "%" and cur.name is None and not cur.variants:
                # "%c=gcc": a virtual assigned to a provider; the provider is the node's name.
                cur.name, cur.variants = value.split("@")[0], {}
                continue
            cur.variants[key] = value.split(",")
        elif kind == "name":
            if cur.name is not None or cur.version or cur.variants:
                # A second name without "^" would be a second root: Spack rejects that too.
                raise SpecSyntaxError(f"unexpected name {tok!r} in {text!r}")
            cur.name = tok
    for n in nodes[1:]:
        if n.name is None:
            raise SpecSyntaxError(f"dependency without a name in {text!r}")
    return nodes
