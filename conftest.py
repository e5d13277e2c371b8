"""Repo-root pytest fixtures shared by every component's tests (implementation in ci/testlib/).

- chfs_pool: a live local CHFS pool (default 4 chfsd over tcp on 127.0.0.1, secret, 5 s RPC
  timeout), torn down after the test. Parametrize indirectly for other shapes:
  @pytest.mark.parametrize("chfs_pool", [{"servers": 2, "proto": "shm"}], indirect=True)
  See ci/testlib/chfs_pool.py for its attributes (.env, .dirs, .addrs, .kill(i), .restart(i)).
- module_chfs_pool: in a module marked `pytestmark = pytest.mark.module_pool`, chfs_pool (the
  default shape) is one pool shared by the module's tests in turn, emptied after each (a fresh
  namespace) and replaced when a test left a server down or changed the pool's shape; tests
  that parametrize chfs_pool still get their own (ci/testlib/chfs_pool.py: lend_module_pool).
  Only for tests that use the pool through its namespace, not its servers' logs or life.
- netns_cluster: 5 network namespaces on a private bridge (root only; skipped otherwise, and
  reported as skipped). See ci/testlib/netns.py (.run(node, argv), .start_chfs(servers=[...])).
- sim_cluster (session): 5 simulated nodes with sshd each (key-only root, private keys) and
  Slurm (slurmctld + slurmd) on nodes 0-3; node 4 is the "login node". One per pytest session;
  root only (skipped otherwise), and skipped when sshd or the Slurm daemons are not installed.
  See ci/testlib/cluster.py (.ssh(node, cmd), .hostfile(nodes), .env, .shared, .slurm).
- chfs_stack_env: os.environ with the installed build on PATH/LD_LIBRARY_PATH/PKG_CONFIG_PATH.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ci.testlib.chfs_pool import ChfsPool, lend_module_pool, stack_env  # noqa: E402
from ci.testlib.netns import NetnsCluster  # noqa: E402
from ci.testlib.cluster import ROOT, SimCluster  # noqa: E402


@pytest.fixture
def chfs_stack_env():
    return stack_env()


@pytest.fixture
def chfs_pool(request, tmp_path):
    params = dict(getattr(request, "param", {}) or {})
    if not params and request.node.get_closest_marker("module_pool"):
        yield from lend_module_pool(request, request.getfixturevalue("module_chfs_pool"))
        return
    pool = ChfsPool(tmp=str(tmp_path / "pool"), **params)
    try:
        yield pool
    finally:
        pool.stop()


@pytest.fixture(scope="module")
def module_chfs_pool(tmp_path_factory):
    """A default chfs_pool lent to the tests of one module in turn (ci/testlib/chfs_pool.py's
    lend_module_pool)."""
    holder = {"pool": None, "tmp": tmp_path_factory}
    try:
        yield holder
    finally:
        if holder["pool"]:
            holder["pool"].stop()


@pytest.fixture
def netns_cluster(request):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    params = dict(getattr(request, "param", {}) or {})
    cluster = NetnsCluster(**params)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def sim_cluster():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for daemon in ("/usr/sbin/sshd", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged"):
        if not os.access(daemon, os.X_OK):
            pytest.skip(f"{daemon} not installed (ci/setup-deps installs it)")
    cluster = SimCluster(nodes=5, slurm_nodes=4,
                         epilog=os.path.join(ROOT, "examples", "slurm", "epilog"))
    try:
        yield cluster
    finally:
        cluster.close()
