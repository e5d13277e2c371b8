"""workflows/bench: the repetition schedule, per-repetition baselines and paired ratios, and one
real run on the tiny input (every file it promises, every run counted)."""
import csv
import os
import subprocess
import sys

import pytest

from montage_helpers import WORKFLOWS

sys.path.insert(0, os.path.join(WORKFLOWS, "lib"))
import bench_report  # noqa: E402

BENCH = os.path.join(WORKFLOWS, "bench")


def phases(workflow, project=None):
    t = {ph: 0.0 for ph in bench_report.ROWS}
    t["workflow"] = workflow
    if project is not None:
        t["project"] = project
    return t


def test_schedule_brackets_each_repetition_with_local_and_rotates_the_others():
    order = bench_report.schedule(["local", "hook", "fuse"], 3)
    assert order == [(0, "local"), (0, "hook"), (0, "fuse"),
                     (1, "local"), (1, "fuse"), (1, "hook"),
                     (2, "local"), (2, "hook"), (2, "fuse"),
                     (3, "local")]
    assert bench_report.schedule(["local"], 2) == [(0, "local"), (1, "local"), (2, "local")]


def test_ratios_use_the_mean_of_the_bracketing_local_runs_and_medians_over_repetitions():
    runs = {
        (0, "local"): phases(10.0, 4.0), (0, "hook"): phases(12.0, 5.0), (0, "fuse"): phases(9.0),
        (1, "local"): phases(14.0, 6.0), (1, "hook"): phases(13.0, 5.0), (1, "fuse"): phases(16.0),
        (2, "local"): phases(10.0, 4.0), (2, "hook"): phases(24.0, 5.0), (2, "fuse"): phases(12.0),
        (3, "local"): phases(14.0, 6.0),
    }
    table, pairs = bench_report.summarize(runs, ["local", "hook", "fuse"], 3)
    # Every repetition's baseline is (10 + 14) / 2 = 12 s: hook 1.0, 13/12, 2.0.
    med, lo, hi = table[("hook", "workflow")]["ratio"]
    assert (lo, hi) == (1.0, 2.0) and med == pytest.approx(13 / 12)
    assert table[("local", "workflow")]["s"] == (12.0, 12.0, 12.0)
    assert table[("hook", "project")]["ratio"][0] == pytest.approx(1.0)   # 5 / mean(4, 6)
    # Paired within repetitions: 12/9, 13/16, 24/12 -> median 12/9.
    assert pairs[("hook", "fuse")] == (pytest.approx(12 / 9), pytest.approx(13 / 16), 2.0)
    # A phase whose baseline is ~0 s has no ratio, not a division by zero.
    assert table[("hook", "bgmodel")]["ratio"] is None


def test_a_failed_local_run_leaves_the_other_as_the_baseline():
    runs = {(0, "hook"): phases(30.0), (1, "local"): phases(20.0)}
    table, _ = bench_report.summarize(runs, ["local", "hook"], 1)
    assert table[("hook", "workflow")]["ratio"] == (1.5, 1.5, 1.5)


def test_bench_runs_every_path_in_each_repetition_and_writes_its_files(tmp_path, tiny_tiles):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, BENCH, "--preset", "tiny", "--reps", "2",
                        "--envs", "local,hook", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "5 of 5 runs succeeded" in r.stdout
    assert "run 5/5" in r.stderr
    with open(out / "runs.csv") as f:
        rows = [x for x in csv.DictReader(f) if x["phase"] == "workflow"]
    assert sorted((x["rep"], x["env"]) for x in rows) == [
        ("1", "hook"), ("1", "local"), ("2", "hook"), ("2", "local"), ("3", "local")]
    for x in rows:
        assert float(x["seconds"]) > 0
        if x["env"] == "hook":
            assert float(x["ratio"]) == pytest.approx(float(x["seconds"]) / float(x["baseline_s"]),
                                                      rel=1e-3)
    with open(out / "bench.csv") as f:
        summary = {(x["phase"], x["env"]): x for x in csv.DictReader(f)}
    assert float(summary[("workflow", "hook")]["ratio_median"]) > 0
    assert (out / "bench.md").read_text().count("| **workflow** |") == 1
    assert (out / "bench.png").stat().st_size > 0
    assert (out / "local-closing" / "mosaic.fits").exists()


def test_bench_refuses_bad_arguments():
    for args, msg in ((["--envs", "hook,local"], "must start with local"),
                      (["--envs", "local,hook,hook"], "names a path twice"),
                      (["--reps", "0"], "at least 1")):
        r = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and msg in r.stderr, r.stderr
