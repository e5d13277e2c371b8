"""A simulated cluster for tests: NetnsCluster + sshd on every node + Slurm on some of them.

    with SimCluster(nodes=5, slurm_nodes=4) as sc:     # or the `sim_cluster` session fixture
        sc.ssh(4, "hostname")                         # on node 4, through its sshd
        sc.hostfile([0, 1, 2, 3])                     # a hostfile of those nodes' addresses
        subprocess.run(["sbatch", ...], env=sc.env)   # PATH with the ssh wrapper, SLURM_CONF, ...

The same parts as `ci/cluster up --slurm` (ci/testlib/netns.py, cluster_ssh.py,
cluster_slurm.py), kept in one Python object so one cluster serves a whole pytest session. The
directory is under $CHFS_STACK_CACHE (the nodes have their own /tmp, so nothing the nodes must
see may live in /tmp); `shared` is a directory in it for programs and job files every node
reads. close() removes every process, namespace and file.
"""
import os
import shlex
import subprocess

from .chfs_pool import stack_env
from .cluster_slurm import SlurmCluster
from .cluster_ssh import SshNodes
from .netns import NetnsCluster, new_prefix

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cache_dir():
    return os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))


class SimCluster:
    def __init__(self, nodes=5, slurm_nodes=0, epilog=None):
        prefix = new_prefix()
        self.dir = os.path.join(cache_dir(), "test-clusters", prefix)
        subprocess.run(["rm", "-rf", self.dir], check=False)
        os.makedirs(self.dir)
        self.shared = os.path.join(self.dir, "shared")
        os.makedirs(self.shared)
        self.cluster = None
        try:
            self.cluster = NetnsCluster(nodes=nodes, host_link=True, prefix=prefix, iface=prefix)
            self.n = nodes
            self.env = stack_env()
            bindir = os.path.join(self.dir, "bin")
            self.env["PATH"] = f"{bindir}:{self.env['PATH']}"
            self.env["HYDRA_IFACE"] = self.cluster.iface   # same name on host and nodes
            self.sshd = SshNodes(self.cluster, self.dir)
            self.slurm = None
            if slurm_nodes:
                self.slurm = SlurmCluster(self.cluster, self.dir, epilog=epilog,
                                          nodes=range(slurm_nodes))
                self.env["SLURM_CONF"] = self.slurm.conf
        except BaseException:
            self.close()
            raise

    def ip(self, node):
        return self.cluster.ip(node)

    def name(self, node):
        return self.cluster.names[node]

    def hostfile(self, nodes, name="hostfile"):
        path = os.path.join(self.shared, name)
        with open(path, "w") as f:
            f.writelines(f"{self.ip(i)}\n" for i in nodes)
        return path

    def ssh(self, node, command, env=None, timeout=120, check=False, **kw):
        """Run a shell command line on node over ssh; env: variables exported for it."""
        pre = "".join(f"export {k}={shlex.quote(str(v))}; " for k, v in (env or {}).items())
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run([self.sshd.wrapper, self.ip(node), pre + command],
                              env=self.env, timeout=timeout, check=check, **kw)

    def node_tmp(self, node):
        """The host's path of node's /tmp."""
        return os.path.join(self.dir, "nodes", self.name(node), "tmp")

    def pids_on(self, node, comm):
        """Pids of processes named comm in node's network namespace."""
        r = subprocess.run(["ip", "netns", "pids", self.name(node)], capture_output=True,
                           text=True, check=False)
        out = []
        for pid in r.stdout.split():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == comm:
                        out.append(int(pid))
            except OSError:
                pass
        return out

    def close(self):
        if self.cluster:
            self.cluster.close()
            self.cluster = None
        subprocess.run(["rm", "-rf", self.dir], check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
