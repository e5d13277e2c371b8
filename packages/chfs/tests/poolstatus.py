"""The pool's per-server state as `chlist -S` prints it (one line per member: "ADDR id=ID
epoch=E rebalance=idle|active entries_in=N chunks_in=N bytes_in=N entries_out=N chunks_out=N
bytes_out=N ...", or "ADDR down"; "ADDR flush-failed PATH: ERROR" lines are collected in the
member's "flush_failed_paths"), and waiting until a membership change has been rebalanced.
Used by the rebalance tests and bench/run-rebalance-bench."""
import subprocess
import time

STATUS_ARGV = ["chlist", "-S"]


def parse(text):
    """{addr: {"down": bool, field: int or str ...}} from chlist -S output."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if len(f) > 1 and f[1] == "flush-failed":   # "ADDR flush-failed PATH: ERROR"
            out.setdefault(f[0], {}).setdefault("flush_failed_paths", []).append(
                line.split(" flush-failed ", 1)[1])
            continue
        st = {"down": len(f) > 1 and f[1] == "down"}
        for kv in f[1:]:
            if "=" in kv:
                k, v = kv.split("=", 1)
                st[k] = int(v) if v.lstrip("-").isdigit() else v
        out[f[0]] = st
    return out


def status(env, via=None, timeout_ms=2000):
    """The pool's state, asked of `via` (default: CHFS_SERVER in env); {} if nobody answers."""
    argv = STATUS_ARGV + (["-s", via] if via else []) + ["-t", str(timeout_ms)]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    return parse(r.stdout)  # exit status 1 if a member is down: its line says so


def settled(st, n):
    """True if st shows n members, none down, all idle, all at one epoch."""
    return (len(st) == n and not any(s["down"] for s in st.values())
            and all(s.get("rebalance") == "idle" for s in st.values())
            and len({s.get("epoch") for s in st.values()}) == 1)


def wait_settled(env, n, after_epoch=-1, via=None, timeout=40.0, poll=0.1):
    """Wait until the pool has n members, all idle at one epoch greater than after_epoch (so a
    state sampled before the change took effect does not count); return (state, seconds)."""
    t0 = time.time()
    st = {}
    while True:
        st = status(env, via)
        if settled(st, n) and next(iter(st.values()))["epoch"] > after_epoch:
            return st, time.time() - t0
        if time.time() - t0 > timeout:
            raise AssertionError(f"pool not rebalanced after {timeout:.0f} s: {st}")
        time.sleep(poll)


def epoch(env, via=None):
    """The highest epoch any member reports (-1 if none answers)."""
    return max((s.get("epoch", -1) for s in status(env, via).values()), default=-1)


def ops(env):
    """{op name: requests served} summed over the pool's servers (chlist -S: ops=NAME:N,...)."""
    total = {}
    for st in status(env).values():
        for item in filter(None, str(st.get("ops", "")).split(",")):
            name, n = item.rsplit(":", 1)
            total[name] = total.get(name, 0) + int(n)
    return total


def ops_delta(before, after):
    """The ops whose counts changed from before to after, with the change."""
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def down_in_view(env, via):
    """The addresses server `via` finds down (its failure detector's verdict)."""
    out = subprocess.run(["chlist", "-s", via], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    return {l.split()[0] for l in out.splitlines() if l.endswith(" down")}


def wait_view(env, via, want, timeout=10):
    """Wait until server `via` finds exactly the addresses `want` down; return the time then."""
    end = time.time() + timeout
    while (seen := down_in_view(env, via)) != want:
        assert time.time() < end, f"pool view of down servers: {seen}, want {want}"
        time.sleep(0.2)
    return time.time()


def wait_all_up(env, addrs, timeout=10):
    """Wait until no server of addrs finds any server down (one that resumed or restarted is
    up in every member's view: a client's list may come from any of them)."""
    for a in addrs:
        wait_view(env, a, set(), timeout)
