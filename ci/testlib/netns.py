"""Simulated nodes: Linux network namespaces on a private bridge (needs root).

    with NetnsCluster(nodes=5) as c:          # or the `netns_cluster` fixture (5 nodes)
        c.run(0, ["ip", "addr"])              # subprocess.run inside node 0's namespace
        pool = c.start_chfs(servers=[0, 1, 2, 3])   # one chfsd per node, tcp on each node's IP
        c.run(4, ["chfs-io", "ls", "/"], env=pool.env)   # a client on node 4

Each cluster gets unique names (prefix "cn<pid%1000><n>", a random 10.x.y.0/24 subnet) so
parallel runs do not collide. The bridge lives in its own namespace, not the host's, and every
node has loopback up and one veth with address .(i+1), named `iface` (default eth0). The bridge
namespace itself has address .253 on br0 (the "head": where ci/testlib/cluster_slurm.py runs
slurmctld and munged). With host_link=True the host gets one more veth on the bridge, address
.254, named `iface` too when that name is the cluster's own (else "<prefix>hh"), and every node
a default route through it: the host's shell reaches the nodes (ssh, chfsctl, sbatch), and one
HYDRA_IFACE names the cluster's network on the host and on every node (mpiexec's control port
is reachable from wherever it runs). Teardown (`close()`, also on failure
and via the fixture) kills every process left in the namespaces and deletes them, which removes
the veths (the host's too) and the bridge.

For sshd/slurmd nodes (ci/testlib/cluster_ssh.py, cluster_slurm.py), `isolate(node, tmp)` gives
a node more of a real node: a holder process with its own UTS namespace (the node's name as host
name) and mount namespace in which the directory tmp is bind-mounted over /tmp (node-local /tmp,
as on a cluster; everything else, $HOME included, stays shared like a cluster file system).
`nodeenv_argv(node)` prefixes a command to run it in those namespaces; daemons started so see
the node's /tmp, and mounts made there (a job's FUSE mount) are the node's only, and go away with
its namespaces.

A cluster that must outlive its Python process (ci/cluster up ... down) is described by
`state()` (a dict, JSON-serialisable); `NetnsCluster.teardown(state)` removes it from another
process, and is idempotent.
"""
import itertools
import os
import random
import signal
import subprocess
import tempfile

from .chfs_pool import make_secret, stack_env, stop_all, wait_gone

_seq = itertools.count()


def new_prefix():
    return f"cn{os.getpid() % 1000}{next(_seq)}"


def new_subnet():
    return f"10.{random.randint(64, 250)}.{random.randint(1, 250)}"


def _sh(*argv, check=True):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, timeout=30)


def _kill_netns(ns):
    """SIGKILL every process of namespace ns (until none is left), then delete it."""
    for _ in range(20):
        r = _sh("ip", "netns", "pids", ns, check=False)
        pids = [int(p) for p in r.stdout.split() if p.isdigit()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_gone(pids[-1])
    _sh("ip", "netns", "delete", ns, check=False)


class NetnsPool:
    """chfsd servers started by NetnsCluster.start_chfs (same interface as ChfsPool)."""

    def __init__(self, cluster, nodes, proto, rpc_timeout_ms, host=None, extra_env=None):
        self.cluster, self.nodes, self.proto, self.host = cluster, list(nodes), proto, host
        self.tmp = tempfile.mkdtemp(prefix="chfs-netns-")
        self.secret_file = make_secret(os.path.join(self.tmp, "secret"))
        self.dirs = [os.path.join(self.tmp, f"srv{i}") for i in range(len(self.nodes))]
        self.addrs = [None] * len(self.nodes)
        self.pids = [None] * len(self.nodes)
        self.env = stack_env()
        self.env.update({"CHFS_SECRET_FILE": self.secret_file,
                         "CHFS_RPC_TIMEOUT_MSEC": str(rpc_timeout_ms), **(extra_env or {})})
        for i in range(len(self.nodes)):
            self._start(i)
        self.env["CHFS_SERVER"] = ",".join(self.addrs)

    def _start(self, i):
        node, d = self.nodes[i], self.dirs[i]
        os.makedirs(d, exist_ok=True)
        host = self.host or self.cluster.ip(node)
        argv = ["chfsd", "-c", d, "-p", self.proto, "-h", host, "-k", self.secret_file,
                "-S", f"{d}/info", "-P", f"{d}/chfsd.pid", "-l", f"{d}/chfsd.log"]
        boot = next((a for j, a in enumerate(self.addrs) if a and j != i), None)
        if boot:
            argv.append(boot)
        self.cluster.run(node, argv, env=self.env, check=True, timeout=60)
        with open(f"{d}/info") as f:
            self.addrs[i] = f.read().strip()
        with open(f"{d}/chfsd.pid") as f:
            self.pids[i] = int(f.read().strip())

    def add(self, node):
        """Start one more server, on node, joining the pool; its index."""
        self.nodes.append(node)
        self.dirs.append(os.path.join(self.tmp, f"srv{len(self.dirs)}"))
        self.addrs.append(None)
        self.pids.append(None)
        self._start(len(self.nodes) - 1)
        self.env["CHFS_SERVER"] = ",".join(a for a in self.addrs if a)
        return len(self.nodes) - 1

    def kill(self, i, sig=signal.SIGKILL):
        if self.pids[i]:
            try:
                os.kill(self.pids[i], sig)
            except ProcessLookupError:
                pass
            wait_gone(self.pids[i])
            self.pids[i] = None

    def restart(self, i):
        self.kill(i, signal.SIGTERM)
        self._start(i)

    def stop(self):
        stop_all(self.pids)
        subprocess.run(["rm", "-rf", self.tmp], check=False)


class NetnsCluster:
    def __init__(self, nodes=5, host_link=False, prefix=None, subnet=None, iface="eth0"):
        """prefix/subnet: given by a caller that records state() before the set-up starts;
        iface: the nodes' interface name (the host's too if it starts with the prefix)."""
        self.n = nodes
        self.host_link = host_link
        self.iface = iface
        tag = prefix or new_prefix()
        self.prefix = tag
        self.subnet = subnet or new_subnet()
        self.bridge_ns = f"{tag}br"
        self.host_if = iface if iface.startswith(tag) else f"{tag}hh"
        self.names = [f"{tag}n{i}" for i in range(nodes)]
        self.pools = []
        self.holders = {}
        self._made = []
        try:
            self._setup()
        except Exception:
            self.close()
            raise

    def _setup(self):
        _sh("ip", "netns", "add", self.bridge_ns)
        self._made.append(self.bridge_ns)
        br = ["ip", "netns", "exec", self.bridge_ns]
        _sh(*br, "ip", "link", "add", "br0", "type", "bridge")
        _sh(*br, "ip", "link", "set", "br0", "up")
        _sh(*br, "ip", "link", "set", "lo", "up")
        _sh(*br, "ip", "addr", "add", f"{self.head_ip}/24", "dev", "br0")
        if self.host_link:
            host_end, br_end = self.host_if, f"{self.prefix}hb"
            _sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", br_end)
            _sh("ip", "link", "set", br_end, "netns", self.bridge_ns)
            _sh(*br, "ip", "link", "set", br_end, "master", "br0")
            _sh(*br, "ip", "link", "set", br_end, "up")
            _sh("ip", "addr", "add", f"{self.host_ip}/24", "dev", host_end)
            _sh("ip", "link", "set", host_end, "up")
        for i, ns in enumerate(self.names):
            _sh("ip", "netns", "add", ns)
            self._made.append(ns)
            host_end, node_end = f"{self.prefix}h{i}", f"{self.prefix}v{i}"
            _sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end)
            _sh("ip", "link", "set", host_end, "netns", self.bridge_ns)
            _sh("ip", "link", "set", node_end, "netns", ns)
            _sh(*br, "ip", "link", "set", host_end, "master", "br0")
            _sh(*br, "ip", "link", "set", host_end, "up")
            ex = ["ip", "netns", "exec", ns]
            _sh(*ex, "ip", "link", "set", "lo", "up")
            _sh(*ex, "ip", "link", "set", node_end, "name", self.iface)
            _sh(*ex, "ip", "addr", "add", f"{self.ip(i)}/24", "dev", self.iface)
            _sh(*ex, "ip", "link", "set", self.iface, "up")
            if self.host_link:
                _sh(*ex, "ip", "route", "add", "default", "via", self.host_ip)

    def ip(self, node):
        return f"{self.subnet}.{node + 1}"

    @property
    def head_ip(self):
        """br0's address in the bridge namespace (slurmctld, munged)."""
        return f"{self.subnet}.253"

    @property
    def host_ip(self):
        """The host's address on the bridge (host_link=True)."""
        return f"{self.subnet}.254"

    def isolate(self, node, tmp):
        """Start node's holder (UTS + mount namespace, tmp over /tmp); see the module text."""
        os.makedirs(tmp, mode=0o1777, exist_ok=True)
        os.chmod(tmp, 0o1777)
        # The new mount namespace starts with a copy of every mount of the host, FUSE mounts of
        # other tests included; a copy would keep such a FUSE connection (and its daemon) alive
        # after the host unmounts it, so the node drops its copies of FUSE mounts at once.
        p = self.popen(node, ["unshare", "--uts", "--mount", "--propagation", "private", "sh",
                              "-c", 'hostname "$1" && mount --bind "$2" /tmp && '
                              "awk '$3 ~ /^fuse/ {print $2}' /proc/self/mounts | "
                              'while read -r m; do umount -l "$m" 2>/dev/null; done; '
                              "echo ready && exec sleep infinity", "sh", self.names[node], tmp],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       start_new_session=True)
        line = p.stdout.readline()
        if line.strip() != "ready":
            p.kill()
            raise RuntimeError(f"node {self.names[node]}: namespaces not made: {p.stderr.read()}")
        p.stdout.close()
        p.stderr.close()
        self.holders[node] = p.pid

    def nodeenv_argv(self, node):
        """Prefix that runs a command in node's network, UTS and mount namespaces."""
        argv = ["ip", "netns", "exec", self.names[node]]
        if node in self.holders:
            argv += ["nsenter", "-t", str(self.holders[node]), "--uts", "--mount"]
        return argv

    def state(self):
        """Everything teardown() needs, valid before the set-up too (it names every part)."""
        return {"prefix": self.prefix, "subnet": self.subnet, "nodes": self.n,
                "namespaces": [self.bridge_ns] + list(self.names), "host_if": self.host_if}

    @staticmethod
    def teardown(state):
        """Kill every process in the namespaces of a state() and delete them, and the host's
        veth if a killed set-up left it behind (idempotent)."""
        for ns in reversed(state.get("namespaces", [])):
            _kill_netns(ns)
        _sh("ip", "link", "delete", state.get("host_if", f"{state['prefix']}hh"), check=False)

    def run_head(self, argv, check=True, timeout=60, **kw):
        """subprocess.run in the bridge namespace (the head, address head_ip)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(["ip", "netns", "exec", self.bridge_ns] + list(argv),
                              check=check, timeout=timeout, **kw)

    def run(self, node, argv, check=True, timeout=120, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(["ip", "netns", "exec", self.names[node]] + list(argv),
                              check=check, timeout=timeout, **kw)

    def popen(self, node, argv, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.names[node]] + list(argv), **kw)

    def start_chfs(self, servers, proto="tcp", rpc_timeout_ms=5000, host=None, extra_env=None):
        """host: what every server listens on (-h) instead of its node's IP (e.g. the same
        "127.0.0.1:PORT" in every namespace); extra_env: added to the servers' and pool.env."""
        pool = NetnsPool(self, servers, proto, rpc_timeout_ms, host, extra_env)
        self.pools.append(pool)
        return pool

    def close(self):
        for p in self.pools:
            p.stop()
        for ns in reversed(self._made):
            _kill_netns(ns)
        self._made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
