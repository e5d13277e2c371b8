"""Leftovers of simulated clusters: find and remove them without the cluster's state file.

A simulated cluster (ci/testlib/netns.py) is named by one prefix: `cc<5 hex>` for `ci/cluster
up`, `cn<digits>` for the test fixtures. Its namespaces are PREFIXbr (the head: munged,
slurmctld) and PREFIXn0, PREFIXn1, ...; the host's end of its link is PREFIX or PREFIXhh. Every
process it runs (sshd, slurmd, the node holders and what they mount, chfsd started on a node)
sits in one of those network namespaces. So a cluster can be removed from what the machine
shows, not only from what `up` recorded: a run interrupted after its state file was deleted, or
a test killed before its finalizer ran, still leaves namespaces whose names say whose they are.

`find(directory=D)` works out the prefixes of the cluster in D from whatever is left of it —
the state file, the directory's own name (test clusters are named by their prefix), the node
directories D/nodes/NAME, D/env, and processes whose command line names a path under D (their
network namespace says the prefix) — and then collects, for those prefixes, the namespaces, the
processes in them (also in a namespace whose name was already deleted, when their command line
names D), the host's links and the mounts under D. `find(all_clusters=True)` takes every
namespace named like a cluster's. `remove()` kills the processes (SIGKILL, repeated until none
is left, bounded), deletes the namespaces and links and lazily unmounts the mounts; it never
touches this process or its ancestors.
"""
import json
import os
import re
import signal
import subprocess
import time

PREFIX = r"(?:cc[0-9a-f]{5}|cn\d+)"
NS_RE = re.compile(rf"^({PREFIX})(?:br|n\d+)$")
PREFIX_RE = re.compile(rf"^{PREFIX}$")
LINK_RE = re.compile(rf"^({PREFIX})(?:hh)?$")


def _run(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


def namespaces():
    """Named network namespaces (ip netns list) -> inode of each."""
    out = {}
    for line in _run("ip", "netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        try:
            out[name] = os.stat(f"/run/netns/{name}").st_ino
        except OSError:
            pass
    return out


def host_links():
    out = []
    for line in _run("ip", "-o", "link", "show").stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            out.append(parts[1].strip().split("@")[0])
    return out


def _protected():
    """This process and its ancestors: never killed."""
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def processes():
    """pid -> (network namespace inode, command line) of every process we can read."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ino = os.stat(f"/proc/{name}/ns/net").st_ino
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(name)] = (ino, argv)
    return out


def mounts_under(d):
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].replace("\\040", " ") for line in f]
    d = d.rstrip("/")
    return sorted((p for p in points if p == d or p.startswith(d + "/")), reverse=True)


class Leftovers:
    def __init__(self, prefixes, ns, pids, links, mounts):
        self.prefixes, self.namespaces, self.pids = sorted(prefixes), ns, pids
        self.links, self.mounts = links, mounts

    def empty(self):
        return not (self.namespaces or self.pids or self.links or self.mounts)

    def describe(self):
        return (f"prefixes {' '.join(self.prefixes) or '-'}: "
                f"{len(self.namespaces)} namespaces ({' '.join(self.namespaces)}), "
                f"{len(self.pids)} processes, links {' '.join(self.links) or '-'}, "
                f"{len(self.mounts)} mounts")


def _dir_prefixes(d, procs, ns_ino):
    found = set()
    try:
        with open(os.path.join(d, "state.json")) as f:
            found.add(json.load(f)["prefix"])
    except (OSError, ValueError, KeyError):
        pass
    if PREFIX_RE.match(os.path.basename(d.rstrip("/"))):
        found.add(os.path.basename(d.rstrip("/")))
    try:
        for name in os.listdir(os.path.join(d, "nodes")):
            m = NS_RE.match(name)
            if m:
                found.add(m.group(1))
    except OSError:
        pass
    try:
        with open(os.path.join(d, "env")) as f:
            m = re.search(r"HYDRA_IFACE=(\S+?);", f.read())
            if m and PREFIX_RE.match(m.group(1)):
                found.add(m.group(1))
    except OSError:
        pass
    by_ino = {ino: name for name, ino in ns_ino.items()}
    needle = d.rstrip("/") + "/"
    for ino, argv in procs.values():
        m = NS_RE.match(by_ino.get(ino, ""))
        if m and needle in argv:
            found.add(m.group(1))
    return found


def find(directory=None, prefixes=(), all_clusters=False):
    """Everything left of the clusters in directory / with prefixes / all of them."""
    ns_ino = namespaces()
    procs = processes()
    wanted = set(prefixes)
    if directory:
        wanted |= _dir_prefixes(directory, procs, ns_ino)
    if all_clusters:
        wanted |= {m.group(1) for m in map(NS_RE.match, ns_ino) if m}
        wanted |= {m.group(1) for m in map(LINK_RE.match, host_links()) if m}
    ns = sorted(n for n in ns_ino if (m := NS_RE.match(n)) and m.group(1) in wanted)
    inos = {ns_ino[n] for n in ns}
    own = os.stat("/proc/self/ns/net").st_ino
    needle = directory.rstrip("/") + "/" if directory else None
    keep = _protected()
    pids = sorted(pid for pid, (ino, argv) in procs.items() if pid not in keep and (
        ino in inos or (needle and ino != own and needle in argv)))
    links = [ln for ln in host_links() if (m := LINK_RE.match(ln)) and m.group(1) in wanted]
    mounts = mounts_under(directory) if directory else []
    return Leftovers(wanted, ns, pids, links, mounts)


def remove(left, timeout=30):
    """Kill, delete and unmount everything in left (find() again to see what is still there)."""
    end = time.time() + timeout
    pids = set(left.pids)
    while pids and time.time() < end:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
        pids = {p for p in pids if os.path.exists(f"/proc/{p}") and not _zombie(p)}
        # a process forked by one being killed joins its namespace: look again
        named = namespaces()
        inos = {named[n] for n in left.namespaces if n in named}
        keep = _protected()
        pids |= {p for p, (ino, _) in processes().items() if ino in inos and p not in keep
                 and not _zombie(p)}
    for n in left.namespaces:
        _run("ip", "netns", "delete", n)
    for ln in left.links:
        _run("ip", "link", "delete", ln)
    for p in left.mounts:
        _run("umount", "-l", p)


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
