"""Fixtures of the workflow tests: one tiny input set and the `local` baseline run.

The tiny input (4 tiles of 200x200, seed 7) is generated once per session; the baseline is the
runner's `--env local` result on it, which every access path's mosaic must equal exactly.
"""
import os
import subprocess
import sys

import pytest

WORKFLOWS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(WORKFLOWS, "run")
GEN = os.path.join(WORKFLOWS, "gen-tiles")
RAKEFILE = os.path.join(WORKFLOWS, "Rakefile")


def run_workflow(env, tiles, out, *extra, timeout=300):
    """Runs workflows/run; returns the CompletedProcess (output captured as text)."""
    return subprocess.run([sys.executable, RUN, "--env", env, "-j", "2", "--input", str(tiles),
                           "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def tiny_tiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny") / "raw"
    subprocess.run([sys.executable, GEN, str(d), "--preset", "tiny", "--seed", "7"],
                   check=True, capture_output=True, timeout=120)
    return d


@pytest.fixture(scope="session")
def local_baseline(tiny_tiles, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    r = run_workflow("local", tiny_tiles, out)
    assert r.returncode == 0, r.stdout + r.stderr
    return out
