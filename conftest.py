"""Repo-root pytest fixtures shared by every component's tests (implementation in ci/testlib/).

- chfs_pool: a live local CHFS pool (default 4 chfsd over tcp on 127.0.0.1, secret, 5 s RPC
  timeout), torn down after the test. Parametrize indirectly for other shapes:
  @pytest.mark.parametrize("chfs_pool", [{"servers": 2, "proto": "shm"}], indirect=True)
  See ci/testlib/chfs_pool.py for its attributes (.env, .dirs, .addrs, .kill(i), .restart(i)).
- netns_cluster: 5 network namespaces on a private bridge (root only; skipped otherwise, and
  reported as skipped). See ci/testlib/netns.py (.run(node, argv), .start_chfs(servers=[...])).
- chfs_stack_env: os.environ with the installed build on PATH/LD_LIBRARY_PATH/PKG_CONFIG_PATH.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ci.testlib.chfs_pool import ChfsPool, stack_env  # noqa: E402
from ci.testlib.netns import NetnsCluster  # noqa: E402


@pytest.fixture
def chfs_stack_env():
    return stack_env()


@pytest.fixture
def chfs_pool(request, tmp_path):
    params = dict(getattr(request, "param", {}) or {})
    pool = ChfsPool(tmp=str(tmp_path / "pool"), **params)
    try:
        yield pool
    finally:
        pool.stop()


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
