"""gfarm-cluster itself: bad input gets one clear line, a failed start leaves nothing behind."""
import os
import subprocess

import pytest

from gfcluster import SCRIPT, shifted_id

pytestmark = [pytest.mark.netns, pytest.mark.timeout(120)]


def run(*args, env=None):
    return subprocess.run([SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=90, env=env)


@pytest.mark.parametrize("args, message", [
    (["start", "--clients", "0"], "--clients 0: need 1..32"),
    (["start", "--id", "300"], "--id 300: need 1..254"),
    (["start", "--cache-size", "12k"], "--cache-size 12k: need bytes >= 4096"),
    (["start", "--io-servers", "all"], "--io-servers all: need sd or clients"),
    (["frobnicate"], "unknown command frobnicate"),
])
def test_bad_arguments_are_one_clear_error(args, message):
    r = run(*args)
    assert r.returncode != 0
    assert message in r.stderr and r.stderr.count("\n") == 1


def test_failed_start_removes_namespaces_bridge_and_state(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    state = tmp_path / "state"
    env = dict(os.environ, GFARM_CLUSTER_DIR=str(state))
    n = shifted_id(81)
    r = run("start", "--id", str(n), "--clients", "1", "--link-rate", "fast", env=env)
    assert r.returncode != 0 and "bad --link-rate fast" in r.stderr
    assert f"gfc{n}-" not in subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE,
                                            text=True).stdout
    assert subprocess.run(["ip", "link", "show", f"gfcbr{n}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0
    assert not state.exists()
