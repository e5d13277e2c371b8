"""Fixtures of the workflow tests: one tiny input set and the `local` baseline run.

The tiny input (4 tiles of 200x200, seed 7) is generated once per session; the baseline is the
runner's `--env local` result on it, which every access path's mosaic must equal exactly.
"""
import subprocess
import sys

import pytest

from montage_helpers import GEN, run_workflow


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
