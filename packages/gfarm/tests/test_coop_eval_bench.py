"""The evaluation commands of the cooperative cache (packages/gfarm/bench/bench-coop-*) run end
to end at toy sizes and write the CSV rows the figures need, with plausible values.

Not a measurement: nothing here looks at which mode is faster. It checks that every
(config, link rate, mode) run is there, that times are positive, that the node-local mode
never asks a peer, that the cooperative mode does ask peers and that gfmd's per-holder counts
add up to what the requesters asked for, and that the byte counts of the IOR-style reads are
right (the command checks them itself and fails otherwise).
"""
import csv
import os
import subprocess
import sys

import pytest


pytestmark = [pytest.mark.netns, pytest.mark.timeout(240)]

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def bench(name, *args, timeout=200):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    r = subprocess.run([sys.executable, os.path.join(BENCH, name), *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:]
    return r.stdout


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("name", ["bench-coop-montage", "bench-coop-ior", "bench-coop-hitrate"])
def test_bench_help_describes_the_figure(name):
    r = subprocess.run([sys.executable, os.path.join(BENCH, name), "--help"],
                       stdout=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 0 and "figure" in r.stdout and "--out" in r.stdout


def test_montage_and_hitrate_write_every_run_and_counter(tmp_path):
    out = str(tmp_path)
    log = bench("bench-coop-montage", "--configs", "a", "--rates", "100mbit", "--clients",
                "2", "--tiles", "4", "--size", "200", "--id", "94",
                "--out", out)
    assert "(3/3" in log  # progress lines
    times = rows(os.path.join(out, "montage-times.csv"))
    assert [(r["config"], r["link_rate"], r["mode"]) for r in times] == [
        ("a", "100mbit", m) for m in ("nocache", "local", "coop")]
    for r in times:
        assert 0 < float(r["project_s"]) < float(r["total_s"]) < 600
        assert r["runner"] == "rake -m splitter"
    counters = {r["mode"]: r for r in rows(os.path.join(out, "montage-counters.csv"))
                if r["client"] == "c1"}
    assert int(counters["nocache"]["local_requested"]) == 0
    assert int(counters["local"]["local_hit"]) > 0
    assert int(counters["local"]["peer_requested"]) == 0  # node-local: no peer is asked
    every = rows(os.path.join(out, "montage-counters.csv"))
    coop = [r for r in every if r["mode"] == "coop"]
    asked = sum(int(r["peer_requested"]) for r in coop)
    assert asked > 0
    # gfmd's per-holder totals count what the requesters reported asking of the holders
    assert sum(int(r["holder_requested"]) for r in coop) == asked
    assert sum(int(r["holder_transferred"]) for r in coop) == sum(
        int(r["peer_transferred"]) for r in coop)
    summary = rows(os.path.join(out, "montage-summary.csv"))
    assert len(summary) == 1 and 0 < float(summary[0]["coop_over_local"]) < 10
    assert os.path.getsize(os.path.join(out, "montage-times.png")) > 1000

    bench("bench-coop-hitrate", "--from", out, "--out", out)
    hit = rows(os.path.join(out, "hitrate.csv"))
    assert sorted(r["client"] for r in hit) == ["c1", "c2"]
    for r in hit:
        for k in ("holder_hit_rate", "requester_hit_rate"):
            assert r[k] == "" or 0 <= float(r[k]) <= 1
    assert os.path.getsize(os.path.join(out, "hitrate.png")) > 1000


def test_ior_reads_every_byte_below_and_above_the_cache(tmp_path):
    out = str(tmp_path)
    bench("bench-coop-ior", "--clients", "2", "--sizes-mib", "1,6", "--cache-mib", "4",
          "--reps", "1", "--link-rate", "none", "--id", "95", "--out", out)
    times = rows(os.path.join(out, "ior-times.csv"))
    assert sorted((int(r["size_mib"]), r["mode"]) for r in times) == sorted(
        (s, m) for s in (1, 6) for m in ("nocache", "local", "coop"))
    for r in times:
        assert float(r["read_s"]) > 0 and float(r["read_MiBps"]) > 0
    counters = rows(os.path.join(out, "ior-counters.csv"))
    for r in counters:
        if r["mode"] != "coop":
            assert int(r["peer_requested"]) == 0
    small = [r for r in counters if r["mode"] == "coop" and r["size_mib"] == "1"]
    # a 1 MiB file fits the 4 MiB cache of its writer: every page is asked of the writer
    assert sum(int(r["holder_requested"]) for r in small) == 2 * 256
    summary = rows(os.path.join(out, "ior-summary.csv"))
    assert len(summary) == 6
    assert os.path.getsize(os.path.join(out, "ior-read.png")) > 1000
