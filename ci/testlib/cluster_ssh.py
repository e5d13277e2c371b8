"""ssh between simulated nodes: one private sshd per network namespace of a NetnsCluster.

    ssh = SshNodes(cluster, "/tmp/c1")        # sshd on every node, keys under /tmp/c1/ssh
    subprocess.run([ssh.wrapper, cluster.ip(0), "hostname"])   # -> the node's name

Everything lives in the cluster directory: a client key pair (the only authorized key), one
ed25519 host key per node, each node's sshd_config, pid and log file, a known_hosts file that
names every node by address and by name, and an ssh_config the wrapper `DIR/bin/ssh` passes
with -F. sshd listens only on its node's address (port 22 of that namespace), allows root
with the key only (no password, no PAM), gives sessions the PATH of the process that set it up
(DIR/bin first) and accepts LD_LIBRARY_PATH, the CHFS_*, HYDRA_*, SLURM_CONF and sanitizer variables
the wrapper sends, which stands in for the shared home
directory and login scripts of a real cluster: `chfsctl -h`, `mpiexec` and job scripts find
the same build on every node. Nothing of the machine's own ssh set-up is read or changed; the
one shared thing is sshd's privilege-separation directory /run/sshd (created if missing,
empty, as Debian's sshd service would).

Each sshd runs in its node's UTS and mount namespaces (NetnsCluster.isolate: the node's name
as host name, a node-local /tmp under DIR/nodes/NODE/tmp), so `ssh NODE hostname` (and anything
started under it) sees the node it is on. The cluster directory must therefore not be under
/tmp. Teardown is NetnsCluster's: killing the namespaces' processes ends the sshds. Needs
host_link=True (the host's shell reaches the nodes).
"""
import os
import subprocess
import time

from .chfs_pool import stack_env

SSHD = "/usr/sbin/sshd"
SEND_ENV = "LD_LIBRARY_PATH CHFS_* HYDRA_* SLURM_CONF ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS"


def _keygen(path):
    if not os.path.exists(path):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "chfs-cluster",
                        "-f", path], check=True, timeout=30)
    with open(path + ".pub") as f:
        return f.read().split()[:2]


class SshNodes:
    def __init__(self, cluster, directory):
        self.cluster = cluster
        self.dir = os.path.join(directory, "ssh")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.key = os.path.join(self.dir, "id_ed25519")
        kind, pub = _keygen(self.key)
        self.authorized = os.path.join(self.dir, "authorized_keys")
        with open(self.authorized, "w") as f:
            f.write(f"{kind} {pub} chfs-cluster\n")
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        self.config = os.path.join(self.dir, "ssh_config")
        bindir = os.path.join(directory, "bin")
        os.makedirs(bindir, exist_ok=True)
        self.wrapper = os.path.join(bindir, "ssh")
        # sshd does not take PATH from the client: sessions get the stack's PATH (the build the
        # tests use — the sanitizer builds' too, matching the LD_LIBRARY_PATH they send) with the
        # wrapper's directory first (a shared home's login scripts would do the same).
        self.path = ":".join([bindir] + [p for p in stack_env()["PATH"].split(":")
                                         if p and p != bindir and " " not in p])
        known = []
        for i in range(cluster.n):
            known.append(self._start(i))
        with open(self.known_hosts, "w") as f:
            f.writelines(known)
        self._write_client_config()
        self.wait_ready()

    def _start(self, i):
        c = self.cluster
        d = os.path.join(self.dir, f"node{i}")
        os.makedirs(d, exist_ok=True)
        hostkey = os.path.join(d, "ssh_host_ed25519_key")
        kind, pub = _keygen(hostkey)
        conf = os.path.join(d, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"""# sshd of simulated node {c.names[i]} (written by ci/testlib/cluster_ssh.py)
ListenAddress {c.ip(i)}:22
HostKey {hostkey}
PidFile {d}/sshd.pid
AuthorizedKeysFile {self.authorized}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
PrintMotd no
AcceptEnv {SEND_ENV}
SetEnv PATH={self.path}
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp internal-sftp
""")
        # In the node's own host name and /tmp (NetnsCluster.isolate) for everything it starts.
        if i not in c.holders:
            c.isolate(i, os.path.join(os.path.dirname(self.dir), "nodes", c.names[i], "tmp"))
        subprocess.run(c.nodeenv_argv(i) + [SSHD, "-f", conf, "-E", os.path.join(d, "sshd.log")],
                       check=True, timeout=30, capture_output=True, text=True)
        return f"{c.ip(i)},{c.names[i]} {kind} {pub}\n"

    def _write_client_config(self):
        c = self.cluster
        with open(self.config, "w") as f:
            for i in range(c.n):
                f.write(f"Host {c.names[i]}\n  HostName {c.ip(i)}\n")
            f.write(f"""Host *
  User root
  IdentityFile {self.key}
  IdentitiesOnly yes
  UserKnownHostsFile {self.known_hosts}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
  SendEnv {SEND_ENV}
""")
        with open(self.wrapper, "w") as f:
            f.write(f"""#!/bin/sh
# ssh into the simulated nodes of the cluster in {os.path.dirname(os.path.dirname(self.wrapper))}
exec /usr/bin/ssh -F {self.config} "$@"
""")
        os.chmod(self.wrapper, 0o755)

    def wait_ready(self, timeout=20):
        """Until every node answers `ssh NODE true` (sshd may still be binding)."""
        end = time.time() + timeout
        for i in range(self.cluster.n):
            while True:
                r = subprocess.run([self.wrapper, self.cluster.ip(i), "true"], capture_output=True,
                                   text=True, timeout=30)
                if r.returncode == 0:
                    break
                if time.time() > end:
                    raise RuntimeError(f"sshd on {self.cluster.ip(i)} does not answer: {r.stderr}")
                time.sleep(0.2)
