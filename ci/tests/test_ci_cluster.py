"""ci/cluster as a user runs it: up prints exports that work in a shell, down removes it all —
also after an `up` killed half-way, and when run twice."""
import json
import os
import signal
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "ci", "cluster")


def cache():
    return os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))


def remains(state):
    """Namespaces of a cluster state that still exist, and processes still in them."""
    have = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = {line.split()[0] for line in have.splitlines() if line.strip()}
    left = [ns for ns in state["namespaces"] if ns in names]
    link = subprocess.run(["ip", "link", "show", state["host_if"]], capture_output=True)
    return left + ([state["host_if"]] if link.returncode == 0 else [])


@pytest.fixture
def cluster_dir():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for daemon in ("/usr/sbin/sshd", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged"):
        if not os.access(daemon, os.X_OK):
            pytest.skip(f"{daemon} not installed (ci/setup-deps installs it)")
    d = os.path.join(cache(), f"ci-cluster-test-{os.getpid()}")
    yield d
    subprocess.run([CLUSTER, "down", "--dir", d], timeout=120)
    subprocess.run(["rm", "-rf", d])


@pytest.mark.netns
@pytest.mark.timeout(180)
def test_up_exports_work_in_a_shell_and_down_removes_everything(cluster_dir):
    d = cluster_dir
    script = f"""set -e
eval "$({CLUSTER} up --nodes 2 --slurm --dir {d})"
first=$(head -1 "$CHFS_STACK_HOSTFILE")
echo "ssh: $(ssh "$first" hostname)"
echo "srun: $(srun -N 2 hostname | sort | tr '\\n' ' ')"
hosts=$(paste -sd, "$CHFS_STACK_HOSTFILE")
echo "mpiexec: $(mpiexec -hosts "$hosts" -n 2 -ppn 1 hostname | sort | tr '\\n' ' ')"
"""
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(d, "state.json")) as f:
        state = json.load(f)
    nodes = [f"{state['prefix']}n{i}" for i in range(2)]
    assert f"ssh: {nodes[0]}" in r.stdout
    assert f"srun: {nodes[0]} {nodes[1]}" in r.stdout
    assert f"mpiexec: {nodes[0]} {nodes[1]}" in r.stdout
    # the sshds listen on the nodes' addresses only: nothing of theirs on the host's port 22
    ss = subprocess.run(["ss", "-Hltn", "sport = :22"], capture_output=True, text=True).stdout
    assert state["subnet"] not in ss
    assert remains(state) == state["namespaces"] + [state["host_if"]]
    subprocess.run([CLUSTER, "down", "--dir", d], check=True, timeout=120)
    assert remains(state) == []
    assert not os.path.exists(os.path.join(d, "state.json"))
    assert not os.path.exists(os.path.join(d, "ssh"))
    subprocess.run([CLUSTER, "down", "--dir", d], check=True, timeout=60)   # twice: a no-op


@pytest.mark.netns
@pytest.mark.timeout(180)
def test_down_cleans_up_after_an_up_killed_half_way(cluster_dir):
    d = cluster_dir
    p = subprocess.Popen([CLUSTER, "up", "--nodes", "3", "--slurm", "--dir", d],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state_file = os.path.join(d, "state.json")
    end = time.time() + 60
    while time.time() < end:   # until some daemons run: sshd on a node
        if os.path.exists(os.path.join(d, "ssh", "node1", "sshd.pid")):
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    with open(state_file) as f:
        state = json.load(f)
    assert remains(state), "nothing was set up before the kill: the test proves nothing"
    subprocess.run([CLUSTER, "down", "--dir", d], check=True, timeout=120)
    assert remains(state) == []
    assert not os.path.exists(state_file)
