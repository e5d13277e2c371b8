"""`chfsctl status` shows each server's state from the servers themselves: address, identity,
bytes stored, dirty bytes not yet flushed to the backend, requests served, and the paths whose
flush to the backend failed (exit 1 then) — real servers, a real (too small) backend."""
import os
import re
import subprocess

import pytest

import poolstatus
from small_tmpfs import small_tmpfs  # noqa: F401 (fixture)
from ci.testlib.chfs_pool import stack_env


def server_lines(out):
    """{addr: {key: value}} of the "server: ADDR key=value ..." lines."""
    lines = {}
    for m in re.finditer(r"^server: (\S+) (id=.*)$", out, re.M):
        lines[m.group(1)] = dict(kv.split("=", 1) for kv in m.group(2).split())
    return lines


@pytest.mark.timeout(120)
def test_status_shows_each_servers_identity_data_dirty_bytes_requests_and_failed_paths(
        tmp_path, small_tmpfs):
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    scratch = tmp_path / "pool"
    ctl = ["chfsctl", "-N", "2", "-c", str(scratch), "-b", small_tmpfs, "-F", "0"]

    def run(*argv, check=True, **kw):
        return subprocess.run(list(argv), env=env, capture_output=True, timeout=60, check=check,
                              **kw)
    try:
        out = run(*ctl, "start", text=True).stdout
        env["CHFS_SERVER"] = re.search(r'CHFS_SERVER="([^"]+)"', out).group(1)
        env["CHFS_IO_NOSYNC"] = "1"   # chfs-io ends without flushing: the data stay dirty
        # srv1's join is still being rebalanced when start returns, and a rebalance flushes
        # the dirty chunks it hands over (a fast client's /big then filled the backend early)
        poolstatus.wait_settled(env, 2)
        addrs = {(scratch / f"srv{i}" / "info").read_text().strip(): i for i in range(2)}
        ids = {a: (scratch / f"srv{i}" / "server.id").read_text().strip()
               for a, i in addrs.items()}

        st = run(*ctl, "status", text=True)
        before = server_lines(st.stdout)
        assert set(before) == set(addrs), st.stdout
        for a, kv in before.items():
            assert kv["id"] == ids[a], (a, kv)
            assert kv["stored_bytes"] == "0" and kv["dirty_bytes"] == "0", kv

        small, big = os.urandom(1000), os.urandom(3 << 20)   # 3 MiB into a 1 MiB backend
        run("chfs-io", "put", "/small", "0", "create", input=small)
        st = run(*ctl, "status", text=True)
        assert sum(int(kv["dirty_bytes"]) for kv in server_lines(st.stdout).values()) == 1000
        run("chfs-io", "sync")                                      # /small reaches the backend
        run("chfs-io", "put", "/big", "0", "create", input=big)
        st = run(*ctl, "status", text=True)
        now = server_lines(st.stdout)
        assert st.returncode == 0 and "did not reach" not in st.stdout, st.stdout
        stored = sum(int(kv["stored_bytes"]) for kv in now.values())
        dirty = sum(int(kv["dirty_bytes"]) for kv in now.values())
        assert len(big) + len(small) <= stored < 2 * len(big), st.stdout   # allocated blocks
        assert dirty == len(big), st.stdout
        assert sum(int(kv["dirty_files"]) for kv in now.values()) >= 2, st.stdout
        for a in addrs:   # the writes and the first status's requests were served
            assert int(now[a]["requests"]) > int(before[a]["requests"]), (before, now)

        r = run("chfs-io", "sync", check=False)
        assert r.returncode != 0                                   # the backend is full
        st = run(*ctl, "status", check=False, text=True)
        assert st.returncode == 1, st.stdout + st.stderr
        failed = re.findall(r"^server: (\S+) did not reach the backend: (.*)$", st.stdout, re.M)
        after = server_lines(st.stdout)
        # each server flushes the chunks it holds: every one holding a part of /big says so
        assert {p for _, p in failed} == {"big: No space left on device"}, st.stdout
        assert {a for a, _ in failed} == {a for a, kv in after.items()
                                          if int(kv["dirty_bytes"])}, st.stdout
        for a, kv in after.items():
            assert int(kv["flush_failed"]) == sum(x == a for x, _ in failed), st.stdout
        # chlist -S's own lines, as the rebalance tests parse them: the path lines do not
        # replace a member's state line
        pool = poolstatus.status(env)
        for a in addrs:
            assert pool[a]["id"] == ids[a] and isinstance(pool[a]["epoch"], int), pool
            assert pool[a].get("flush_failed_paths", []) == \
                ["big: No space left on device"] * int(after[a]["flush_failed"]), pool
        assert sum(int(kv["dirty_bytes"]) for kv in after.values()) == len(big), st.stdout
        with open(os.path.join(small_tmpfs, "small"), "rb") as f:
            assert f.read() == small                               # the rest was flushed
    finally:
        run(*ctl, "kill", check=False)
        run(*ctl, "clean", check=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1}], indirect=True)
def test_requests_served_counts_the_stats_answered_inline(chfs_pool):
    """A STAT is answered on the transport's thread, without a worker (handle_inline): status's
    requests= must count it as its per-op counters do. It did not: 30 stats moved ops=stat:30
    and left requests= where it was."""
    chfs_pool.run(["chfs-io", "create", "/counted"])
    before = poolstatus.status(chfs_pool.env)[chfs_pool.addrs[0]]
    for _ in range(30):
        chfs_pool.run(["chfs-io", "stat", "/counted"])
    after = poolstatus.status(chfs_pool.env)[chfs_pool.addrs[0]]

    def op_total(st):
        return sum(int(item.rsplit(":", 1)[1]) for item in str(st["ops"]).split(",") if item)

    def stats(st):
        return next((int(i.rsplit(":", 1)[1]) for i in str(st["ops"]).split(",")
                     if i.rsplit(":", 1)[0] == "stat"), 0)
    assert stats(after) - stats(before) >= 30, (before["ops"], after["ops"])
    # one server, no peers: every request is a client's, each counted once in both figures
    # (the status request that reads them may be counted in one and not yet in the other)
    served = after["requests"] - before["requests"]
    by_op = op_total(after) - op_total(before)
    assert abs(served - by_op) <= 1 and served >= 30, (served, by_op, after["ops"])
