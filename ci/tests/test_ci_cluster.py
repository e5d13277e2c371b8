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


def leftovers_of(prefix):
    """Namespaces, host links and processes of the cluster named prefix, seen by the kernel."""
    have = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    ns = [ln.split()[0] for ln in have.splitlines()
          if ln.split() and ln.split()[0].startswith(prefix)]
    links = [ln for ln in (prefix, prefix + "hh")
             if subprocess.run(["ip", "link", "show", ln], capture_output=True).returncode == 0]
    pids = []
    for n in ns:
        r = subprocess.run(["ip", "netns", "pids", n], capture_output=True, text=True)
        pids += r.stdout.split()
    return ns, links, pids


def force_clean(prefix):
    """The test's own clean-up when the code under test failed to: by the names it knows."""
    from ci.testlib.netns import _kill_netns
    for ns in leftovers_of(prefix)[0]:
        _kill_netns(ns)
    for ln in (prefix, prefix + "hh"):
        subprocess.run(["ip", "link", "delete", ln], capture_output=True)


@pytest.mark.netns
@pytest.mark.timeout(240)
def test_down_cleans_up_a_cluster_whose_state_file_is_gone(cluster_dir):
    """An interrupted run deleted state.json but left namespaces, sshd, slurmd, munged and
    slurmctld: status shows the leftovers, down finds them by the cluster's name and removes
    them (the old down returned at once when state.json was missing)."""
    d = cluster_dir
    state_file = os.path.join(d, "state.json")
    prefix = None
    try:
        subprocess.run([CLUSTER, "up", "--nodes", "2", "--slurm", "--dir", d], check=True,
                       capture_output=True, timeout=150)
        with open(state_file) as f:
            prefix = json.load(f)["prefix"]
        os.remove(state_file)
        ns, links, pids = leftovers_of(prefix)
        assert len(ns) == 3 and links and len(pids) >= 6, (ns, links, pids)
        st = subprocess.run([CLUSTER, "status", "--dir", d], capture_output=True, text=True,
                            timeout=60)
        assert st.returncode == 1
        assert f"leftovers of a cluster in {d}" in st.stdout and f"{prefix}n1" in st.stdout, st.stdout
        every = subprocess.run([CLUSTER, "status", "--all"], capture_output=True, text=True,
                               timeout=60)
        assert f"{prefix}:" in every.stdout, every.stdout
        subprocess.run([CLUSTER, "down", "--dir", d], check=True, timeout=120)
        assert leftovers_of(prefix) == ([], [], [])
        assert not os.path.exists(os.path.join(d, "ssh"))
        assert not os.path.exists(os.path.join(d, "slurm"))
        st = subprocess.run([CLUSTER, "status", "--dir", d], capture_output=True, text=True,
                            timeout=60)
        assert "no cluster" in st.stdout and "leftovers" not in st.stdout, st.stdout
    finally:
        if prefix:
            force_clean(prefix)


@pytest.mark.netns
@pytest.mark.timeout(120)
def test_down_by_prefix_removes_a_test_cluster_whose_directory_is_gone():
    """A test cluster (SimCluster) killed before its finalizer: its directory may be gone too;
    `down --prefix` removes its namespaces, processes and host link by name."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    from ci.testlib.netns import NetnsCluster, new_prefix
    prefix = new_prefix()
    c = NetnsCluster(nodes=2, host_link=True, prefix=prefix)
    try:
        for i in range(2):
            c.popen(i, ["sleep", "300"], start_new_session=True)
        c._made = []   # as if the process owning it had been killed: nothing will close it
        ns, links, pids = leftovers_of(prefix)
        assert len(ns) == 3 and links == [prefix + "hh"] and len(pids) == 2, (ns, links, pids)
        subprocess.run([CLUSTER, "down", "--prefix", prefix], check=True, timeout=60)
        assert leftovers_of(prefix) == ([], [], [])
    finally:
        force_clean(prefix)
