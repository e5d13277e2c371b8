"""Integration tests of libchfs used from threads (chfs-test-client, tests/client_threads.c)
against real pools: every call works on a 64 KiB thread stack, and a server-list refresh while
a server is unresponsive does not stall the other threads."""
import os
import signal
import subprocess

import pytest

from ci.testlib.chfs_pool import stack_prefix

from chfsutil import stop_every_thread

CLIENT = os.path.join(stack_prefix(), "libexec", "chfs", "chfs-test-client")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_every_call_works_on_a_64k_thread_stack(chfs_pool):
    r = chfs_pool.run([CLIENT, "smallstack", "/small"], check=False, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", (r.returncode, r.stderr[-2000:])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 3, "rpc_timeout_ms": 2000,
                                        "extra_env": {"CHFS_NODE_LIST_CACHE_TIMEOUT": "1"}}],
                         indirect=True)
def test_list_refresh_with_a_stopped_server_does_not_stall_other_threads(chfs_pool):
    """The first server of the pool list is stopped (SIGSTOP: connections hang as with a dead
    node, no quick refusal). Threads stat files of the live servers for 6 s while the list is
    refreshed every second: some thread must complete a call at least every second. The old
    refresh ran under the global lock and asked server 0 first, so every thread waited out the
    2 s RPC timeout at each refresh."""
    first = chfs_pool.run(["chlist", "-c"]).stdout.strip().split(",")[0]
    victim = chfs_pool.addrs.index(first)
    p = subprocess.Popen([CLIENT, "refresh", "/refresh", "6", "4"], env=chfs_pool.env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "ready\n", p.stderr.read()
        stop_every_thread(chfs_pool.pids[victim])  # before the client goes on
        out, err = p.communicate("go\n", timeout=90)
    finally:
        os.kill(chfs_pool.pids[victim], signal.SIGCONT)
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    words = out.split()
    ops, nfiles, gap = int(words[1]), int(words[3]), int(words[5])
    assert 0 < nfiles < 24, out  # the stopped server's files do not answer
    assert ops > 100, out
    assert gap < 1000, f"all threads stalled for {gap} ms: {out}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 2}], indirect=True)
def test_stat_during_chmod_utimens_and_size_report_storm_sees_whole_records(chfs_pool):
    r = chfs_pool.run([CLIENT, "attrs", "/storm", "5"], check=False, timeout=90)
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert int(words[1]) > 100, r.stdout
    assert int(words[3]) == 0, r.stdout + r.stderr
