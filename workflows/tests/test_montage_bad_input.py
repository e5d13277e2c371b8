"""The Rakefile and the runner reject bad input with one clear line, never a Ruby backtrace."""
import shutil
import subprocess
import sys

import pytest

from montage_helpers import RAKEFILE, RUN


def rake(cwd, *args):
    return subprocess.run(["rake", "-f", RAKEFILE, "-m", "-j2", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def assert_clean_error(r, expected):
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert expected in out
    assert ".rb:" not in out and "Rakefile:" not in out and "rake aborted" not in out


def test_missing_input_dir(tmp_path):
    assert_clean_error(rake(tmp_path), "input directory 'raw' does not exist")
    assert_clean_error(rake(tmp_path, "INPUT_DIR=nowhere"), "input directory 'nowhere' does not exist")


def test_empty_input_dir(tmp_path):
    (tmp_path / "raw").mkdir()
    assert_clean_error(rake(tmp_path), "input directory 'raw' contains no .fits files")


def test_unreadable_fits_file(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "broken.fits").write_text("not a FITS file\n")
    assert_clean_error(rake(tmp_path), "1 unreadable FITS file(s)")


@pytest.mark.parametrize("env", ["native", "mpiio", "nfs"])
def test_runner_rejects_paths_that_cannot_carry_montage(env, tmp_path, tiny_tiles):
    r = subprocess.run([sys.executable, RUN, "--env", env, "--input", str(tiny_tiles),
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert (f"--env {env} does not apply" in r.stderr) or (f"unknown --env {env}" in r.stderr)


def test_runner_missing_input(tmp_path):
    r = subprocess.run([sys.executable, RUN, "--input", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such directory" in r.stderr
