"""coopeval_common — what the evaluation commands of the cooperative cache share (bench-coop-*).

The published evaluation compares three cache modes on one Gfarm file system:
  nocache  no node cache at all (stock Gfarm reads: every read goes to a gfsd);
  local    node-local cache only: each node's gfccd keeps what the node read or wrote, but
           no peer is ever asked (GFARM_COOP_CACHE_PEERS=0) — the published baseline;
  coop     the cooperative cache: on a local miss gfmd names a holder and its gfccd is asked.
and two topologies (gfarm-cluster --io-servers):
  a        one I/O server (gfsd on node "sd"), whose link every client shares;
  b        an I/O server on every client node, the input spread over them.
Link rates are tc rates on every node's veth ("none" = unshaped). The counters come from each
client's gfccd (`gfccd stat`: as a requester, peer_requested/peer_transferred pages) and from
gfmd's cache management table (`gfcctable`: per holder, the pages requesters reported asking
of it and getting from it — the published per-holder hit rate). gfccd's own served_requested
is not used for that: it counts the requester's whole buffer, also past the end of the file.
This module turns the counters into hit rates, writes CSV files and draws PNGs (matplotlib).
"""
import csv
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from gfcluster import GfarmCluster  # noqa: E402,F401

MODES = ("nocache", "local", "coop")
COOP_ARG = {"nocache": False, "local": "local", "coop": True}
MODE_LABEL = {"nocache": "no cache", "local": "node-local cache only", "coop": "cooperative"}
CONFIGS = ("a", "b")
IO_SERVERS = {"a": "sd", "b": "clients"}
RATES = ("none", "10gbit", "1gbit", "100mbit")
COUNTERS = ("local_requested", "local_hit", "peer_requested", "peer_transferred", "gfsd_pages",
            "served_requested", "served_pages", "holder_requested", "holder_transferred")


class Progress:
    """progress lines with the elapsed time and, once a step is done, an estimate of the rest"""

    def __init__(self, steps):
        self.steps, self.done, self.t0 = steps, 0, time.monotonic()

    def log(self, msg):
        print(f"[{time.monotonic() - self.t0:7.1f} s] {msg}", flush=True)

    def step_done(self, msg):
        self.done += 1
        el = time.monotonic() - self.t0
        left = el / self.done * (self.steps - self.done)
        self.log(f"{msg} ({self.done}/{self.steps}, about {left:.0f} s left)")


def mode_order(rep):
    """ABBA-style alternation: even repetitions in MODES order, odd ones reversed"""
    return MODES if rep % 2 == 0 else tuple(reversed(MODES))


def start_cluster(config, rate, clients, cluster_id, state_dir, cache_size):
    return GfarmCluster(clients=clients, cluster_id=cluster_id, state_dir=state_dir,
                        cache_size=cache_size, io_servers=IO_SERVERS[config],
                        link_rate=None if rate == "none" else rate)


def client_nodes(c):
    return [f"c{i + 1}" for i in range(c.clients)]


def drop_caches(c):
    for n in client_nodes(c):
        c.run(n, ["gfccd", "drop", "--socket", c.socket(n)])


def holder_totals(c):
    """gfmd's per-holder totals: {node: (requested, transferred)} pages since gfmd started"""
    out = c.run("c1", ["gfcctable"], coop=False, stdout=subprocess.PIPE, text=True).stdout
    tot = {n: (0, 0) for n in client_nodes(c)}
    for line in out.splitlines():
        if line.startswith("# holder "):
            _, _, ep, req, tr = line.split()
            ip = ep.rsplit(":", 1)[0]
            tot[f"c{int(ip.rsplit('.', 1)[1]) - 20}"] = (int(req), int(tr))
    return tot


def counters(c):
    """every client's gfccd counters and gfmd's per-holder totals for it"""
    held = holder_totals(c)
    res = {}
    for n in client_nodes(c):
        res[n] = c.stat(n)
        res[n]["holder_requested"], res[n]["holder_transferred"] = held[n]
    return res


def counter_delta(before, after):
    return {n: {k: after[n][k] - before[n][k] for k in COUNTERS} for n in before}


def ratio(num, den):
    return round(num / den, 4) if den else ""


def hit_rates(d):
    """per-node hit rates from one node's counter deltas: as holder and as requester"""
    return {"holder_hit_rate": ratio(d["holder_transferred"], d["holder_requested"]),
            "requester_hit_rate": ratio(d["peer_transferred"], d["peer_requested"])}


def load_average():
    return round(os.getloadavg()[0], 2)


def gfsd_host_of(c, node):
    """the address node's gfsd is registered under (gfarm-cluster's address plan)"""
    return f"10.213.{c.env['GFARM_CLUSTER_ID']}.{20 + int(node[1:])}"


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
