"""Simulated nodes: Linux network namespaces on a private bridge (needs root).

    with NetnsCluster(nodes=5) as c:          # or the `netns_cluster` fixture (5 nodes)
        c.run(0, ["ip", "addr"])              # subprocess.run inside node 0's namespace
        pool = c.start_chfs(servers=[0, 1, 2, 3])   # one chfsd per node, tcp on each node's IP
        c.run(4, ["chfs-io", "ls", "/"], env=pool.env)   # a client on node 4

Each cluster gets unique names (prefix "cn<pid%1000><n>", a random 10.x.y.0/24 subnet) so
parallel runs do not collide. The bridge lives in its own namespace, not the host's, and every
node has loopback up and one veth with address .(i+1). Teardown (`close()`, also on failure
and via the fixture) kills every process left in the namespaces and deletes them, which removes
the veths and the bridge.
"""
import itertools
import os
import random
import signal
import subprocess
import tempfile

from .chfs_pool import make_secret, stack_env, stop_all, wait_gone

_seq = itertools.count()


def _sh(*argv, check=True):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, timeout=30)


class NetnsPool:
    """chfsd servers started by NetnsCluster.start_chfs (same interface as ChfsPool)."""

    def __init__(self, cluster, nodes, proto, rpc_timeout_ms):
        self.cluster, self.nodes, self.proto = cluster, list(nodes), proto
        self.tmp = tempfile.mkdtemp(prefix="chfs-netns-")
        self.secret_file = make_secret(os.path.join(self.tmp, "secret"))
        self.dirs = [os.path.join(self.tmp, f"srv{i}") for i in range(len(self.nodes))]
        self.addrs = [None] * len(self.nodes)
        self.pids = [None] * len(self.nodes)
        self.env = stack_env()
        self.env.update({"CHFS_SECRET_FILE": self.secret_file,
                         "CHFS_RPC_TIMEOUT_MSEC": str(rpc_timeout_ms)})
        for i in range(len(self.nodes)):
            self._start(i)
        self.env["CHFS_SERVER"] = ",".join(self.addrs)

    def _start(self, i):
        node, d = self.nodes[i], self.dirs[i]
        os.makedirs(d, exist_ok=True)
        argv = ["chfsd", "-c", d, "-p", self.proto, "-h", self.cluster.ip(node), "-k",
                self.secret_file, "-S", f"{d}/info", "-P", f"{d}/chfsd.pid", "-l", f"{d}/chfsd.log"]
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
    def __init__(self, nodes=5):
        self.n = nodes
        tag = f"cn{os.getpid() % 1000}{next(_seq)}"
        self.prefix = tag
        self.subnet = f"10.{random.randint(64, 250)}.{random.randint(1, 250)}"
        self.bridge_ns = f"{tag}br"
        self.names = [f"{tag}n{i}" for i in range(nodes)]
        self.pools = []
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
            _sh(*ex, "ip", "link", "set", node_end, "name", "eth0")
            _sh(*ex, "ip", "addr", "add", f"{self.ip(i)}/24", "dev", "eth0")
            _sh(*ex, "ip", "link", "set", "eth0", "up")

    def ip(self, node):
        return f"{self.subnet}.{node + 1}"

    def run(self, node, argv, check=True, timeout=120, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(["ip", "netns", "exec", self.names[node]] + list(argv),
                              check=check, timeout=timeout, **kw)

    def popen(self, node, argv, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.names[node]] + list(argv), **kw)

    def start_chfs(self, servers, proto="tcp", rpc_timeout_ms=5000):
        pool = NetnsPool(self, servers, proto, rpc_timeout_ms)
        self.pools.append(pool)
        return pool

    def close(self):
        for p in self.pools:
            p.stop()
        for ns in reversed(self._made):
            r = _sh("ip", "netns", "pids", ns, check=False)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _sh("ip", "netns", "delete", ns, check=False)
        self._made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
