"""Slurm on simulated nodes: munged + slurmctld on the head, one slurmd per node.

    slurm = SlurmCluster(cluster, "/tmp/c1", epilog=".../examples/slurm/epilog")
    env["SLURM_CONF"] = slurm.conf           # then sbatch / srun / salloc / squeue work

Debian's slurm-wlm 22.05 as it is, configured entirely inside the cluster directory
(DIR/slurm): slurm.conf, a munge key generated for this cluster, munged's socket, the
controller's state, one spool directory, pid and log file per node (%n in the paths). munged and
slurmctld run in the bridge namespace (the head, cluster.head_ip); each slurmd runs in its
node's namespaces (NetnsCluster.isolate) as `slurmd -N NODE`, so jobs run on "their" node:
its address, its host name, its /tmp. Nodes are NodeName=<namespace name>
NodeAddr=<address>; a job script finds the addresses with `scontrol show node` (on a real
cluster NodeAddr is the host name).
Cgroups are not used (proctrack/linuxproc, task/none): a VM or container often lacks a
delegated cgroup tree, and nothing here needs limits. Everything runs as root (SlurmUser=root).

The machine's /etc/slurm and /etc/munge are not read: every command finds this cluster through
SLURM_CONF, and slurm.conf names the munge socket (AuthInfo/CredInfo socket=...). Teardown is
NetnsCluster's: every daemon is a process of one of its namespaces.
"""
import os
import subprocess
import time

PORT_CTLD, PORT_SLURMD = 6817, 6818


class SlurmCluster:
    def __init__(self, cluster, directory, epilog=None, nodes=None):
        self.cluster = cluster
        self.nodes = list(range(cluster.n) if nodes is None else nodes)
        self.dir = os.path.join(directory, "slurm")
        for sub in ("state", "spool", "log", "munge"):
            os.makedirs(os.path.join(self.dir, sub), mode=0o700, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "munge", "munge.socket")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.names = [cluster.names[i] for i in self.nodes]
        self._start_munge()
        self._write_conf(epilog)
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        # slurmctld only starts on the host SlurmctldHost names: give it that host name.
        cluster.run_head(["unshare", "--uts", "sh", "-c",
                          'hostname "$1" && exec /usr/sbin/slurmctld -f "$2"', "sh",
                          f"{cluster.prefix}head", self.conf], timeout=30, env=self.env)
        for i in self.nodes:
            if i not in cluster.holders:
                cluster.isolate(i, os.path.join(directory, "nodes", cluster.names[i], "tmp"))
            subprocess.run(cluster.nodeenv_argv(i) + ["/usr/sbin/slurmd", "-f", self.conf, "-N",
                                                      cluster.names[i]],
                           check=True, timeout=30, env=self.env, capture_output=True, text=True)
        self.wait_idle()

    def _start_munge(self):
        m = os.path.join(self.dir, "munge")
        key = os.path.join(m, "munge.key")
        if not os.path.exists(key):
            with open(key, "wb") as f:
                f.write(os.urandom(1024))
            os.chmod(key, 0o400)
        self.cluster.run_head(["/usr/sbin/munged", "--force", f"--key-file={key}",
                               f"--socket={self.socket}", f"--pid-file={m}/munged.pid",
                               f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"],
                              timeout=30)
        end = time.time() + 10
        while not os.path.exists(self.socket):
            if time.time() > end:
                raise RuntimeError(f"munged did not create {self.socket} (see {m}/munged.log)")
            time.sleep(0.05)

    def _write_conf(self, epilog):
        c, d = self.cluster, self.dir
        lines = [
            "# Slurm of a simulated cluster (written by ci/testlib/cluster_slurm.py)",
            f"ClusterName={c.prefix}",
            f"SlurmctldHost={c.prefix}head({c.head_ip})",
            f"SlurmctldPort={PORT_CTLD}", f"SlurmdPort={PORT_SLURMD}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", f"AuthInfo=socket={self.socket}",
            "CredType=cred/munge",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "MpiDefault=none", "SwitchType=switch/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill", "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "SlurmctldTimeout=30", "SlurmdTimeout=60", "InactiveLimit=0", "KillWait=15",
            "MinJobAge=60", "MessageTimeout=20",
        ]
        if epilog:
            lines.append(f"Epilog={epilog}")
        cpus = os.cpu_count() or 1
        for i in self.nodes:
            lines.append(f"NodeName={c.names[i]} NodeAddr={c.ip(i)} CPUs={cpus} State=UNKNOWN")
        lines.append("PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        for name in self.names:
            os.makedirs(os.path.join(d, "spool", name), exist_ok=True)
        # slurmd 22.05 loads a cgroup plugin at start even with linuxproc/task-none, and its
        # autodetection fails on a VM whose /sys/fs/cgroup is a tmpfs of v1 controllers
        # ("No filesystem mounted on /sys/fs/cgroup"): name the version; nothing is constrained.
        with open(os.path.join(d, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n")

    def cmd(self, *argv, timeout=60, check=True):
        """A Slurm client command (sinfo, sbatch, ...) against this cluster, from the host."""
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=check)

    def wait_idle(self, timeout=60):
        """Until every node is idle (registered with the controller)."""
        end = time.time() + timeout
        out = ""
        while time.time() < end:
            r = self.cmd("sinfo", "-h", "-N", "-o", "%N %t", check=False, timeout=30)
            out = r.stdout + r.stderr
            states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
            if r.returncode == 0 and all(states.get(n) == "idle" for n in self.names):
                return
            time.sleep(0.5)
        raise RuntimeError(f"Slurm nodes not idle after {timeout} s (see {self.dir}/log): {out}")
