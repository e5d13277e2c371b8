"""Python handle on packages/gfarm/gfarm-cluster (used by the tests and the benchmark).

GfarmCluster(clients=K, cluster_id=N, state_dir=D) starts gfmd, one gfsd and K client nodes
in network namespaces (io_servers="clients": a gfsd on every client instead); .run(node, argv)
runs a command on a node (with the cooperative cache unless coop=False; coop="local": the
node's own cache only, GFARM_COOP_CACHE_PEERS=0), .stat(node) parses that node's `gfccd stat` counters, .close() removes
everything (daemons, namespaces, bridge, state) and is safe to call twice.
GFARM_TEST_CLUSTER_ID_OFFSET=D adds D to every cluster id the tests ask for (shifted_id()), so
two checkouts can run the tests at once without wiping each other's clusters.
"""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "gfarm-cluster")
PAGE = 4096


def shifted_id(n):
    """the cluster id a test asks for, moved by $GFARM_TEST_CLUSTER_ID_OFFSET (default 0)"""
    return n + int(os.environ.get("GFARM_TEST_CLUSTER_ID_OFFSET", "0"))


def _coop_args(coop):
    """gfarm-cluster's option for a cache mode: True cooperative, "local" node-local only,
    False none"""
    if coop == "local":
        return ["--local-only"]
    return [] if coop else ["--no-coop"]


def pages(size):
    return (size + PAGE - 1) // PAGE


class GfarmCluster:
    def __init__(self, clients=3, cluster_id=78, state_dir=None, cache_size=256 << 20,
                 link_rate=None, gfmd_prefix=None, io_servers="sd", link_delay=None):
        self.clients = clients
        cluster_id = shifted_id(cluster_id)
        self.env = dict(os.environ, GFARM_CLUSTER_ID=str(cluster_id))
        if gfmd_prefix:  # another gfmd build, e.g. build-gfarm's stock (unpatched) one
            self.env["GFARM_GFMD_PREFIX"] = gfmd_prefix
        if state_dir:
            self.env["GFARM_CLUSTER_DIR"] = state_dir
        self.dir = state_dir or os.path.join(
            os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack")),
            "gfarm", f"cluster-{cluster_id}")
        self._script("clean")  # leftovers of an interrupted earlier run
        rate = ["--link-rate", link_rate] if link_rate else []
        rate += ["--link-delay", link_delay] if link_delay else []
        self._script("start", "--clients", str(clients), "--cache-size", str(cache_size),
                     "--io-servers", io_servers, *rate)

    def _script(self, *args, timeout=120):
        r = subprocess.run([SCRIPT, *args], env=self.env, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"gfarm-cluster {' '.join(args)}: exit {r.returncode}: "
                               f"{r.stderr.strip()}")
        return r

    def run(self, node, argv, coop=True, timeout=120, check=True, **kw):
        cmd = [SCRIPT, "exec"] + _coop_args(coop) + [node, "--", *argv]
        return subprocess.run(cmd, env=self.env, timeout=timeout, check=check, **kw)

    def put(self, node, local_path, gfarm_path, coop=True):
        self.run(node, ["gfreg", local_path, gfarm_path], coop=coop)

    def get(self, node, gfarm_path, coop=True, env=(), timeout=120):
        argv = ["env", *env, "gfexport", gfarm_path] if env else ["gfexport", gfarm_path]
        return self.run(node, argv, coop=coop, timeout=timeout,
                        stdout=subprocess.PIPE).stdout

    def socket(self, node):
        return os.path.join(self.dir, node, "ccd.sock")

    def stat(self, node):
        out = self.run(node, ["gfccd", "stat", "--socket", self.socket(node)],
                       stdout=subprocess.PIPE, text=True).stdout
        kv = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        return {k: (v if k == "endpoint" else float(v) if "." in v else int(v))
                for k, v in kv.items()}

    def mount(self, coop=True, nodes=None, mode=None):
        """gfarm2fs on every client (or on `nodes`, "sd" included) at <dir>/NODE/mnt; mode
        "plain" turns kernel passthrough off, "debian" takes Debian's gfarm2fs (see
        gfarm-cluster mount)."""
        nodes = nodes or [f"c{i + 1}" for i in range(self.clients)]
        args = _coop_args(coop)
        args += [f"--{mode}"] if mode else []
        for node in nodes:
            args += ["--node", node]
        self._script("mount", *args)
        return {node: os.path.join(self.dir, node, "mnt") for node in nodes}

    def gfarm2fs_stats(self, node):
        """Counters of our gfarm2fs on NODE (READ/WRITE requests, opens by kind)."""
        with open(os.path.join(self.dir, node, "gfarm2fs.stats")) as f:
            return {k: int(v) for k, v in (line.split() for line in f)}

    def umount(self):
        self._script("umount")

    def netns(self, node):
        return f"/run/netns/gfc{self.env['GFARM_CLUSTER_ID']}-{node}"

    def daemon_pid(self, node):
        with open(os.path.join(self.dir, "run", f"gfccd-{node}.pid")) as f:
            return int(f.read())

    def close(self):
        self._script("clean")
