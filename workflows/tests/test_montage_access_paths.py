"""The tiny Montage workflow under `rake -m -j2` on every access path gives the same mosaic.

The `local` run is the baseline. Each CHFS access path runs the same Rakefile in a working
directory on a live pool (the shared `chfs_pool` fixture: 4 servers over tcp) and must produce a
mosaic.fits whose pixels equal the baseline's exactly — same binaries, same inputs, sorted
image tables, so any difference is a file-system bug — and a non-blank PNG of the mosaic's size.
"""
import shutil
import struct
import subprocess

import numpy as np
import pytest
from astropy.io import fits

from montage_helpers import RAKEFILE, run_workflow


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def png_is_blank(path):
    import matplotlib.image
    img = matplotlib.image.imread(path)
    return float(img.max()) == float(img.min())


def mosaic(out):
    with fits.open(out / "mosaic.fits") as h:
        return h[0].data.copy(), h[0].header


def check_products(out):
    data, hdr = mosaic(out)
    assert data.shape == (hdr["NAXIS2"], hdr["NAXIS1"])
    assert np.isfinite(data).mean() > 0.9          # the tiles cover the template
    assert png_size(out / "mosaic.png") == (hdr["NAXIS1"], hdr["NAXIS2"])
    assert not png_is_blank(out / "mosaic.png")
    return data


def test_local_baseline_products(local_baseline):
    data = check_products(local_baseline)
    steps = (local_baseline / "steps.csv").read_text()
    for phase in ("project", "diff", "fit", "bgmodel", "background", "add", "viewer"):
        assert f"\n{phase}," in steps
    assert "workflow" in (local_baseline / "timing.csv").read_text()
    assert np.nanstd(data) > 1.0                   # stars and nebula, not a flat field


@pytest.mark.parametrize("env", ["hook", "fuse"])
def test_access_path_mosaic_equals_local(env, tiny_tiles, local_baseline, tmp_path, chfs_pool):
    r = run_workflow(env, tiny_tiles, tmp_path / "out", "--attach", environ=chfs_pool.env)
    assert r.returncode == 0, f"--env {env} failed:\n{r.stdout}\n{r.stderr}"
    data = check_products(tmp_path / "out")
    base, _ = mosaic(local_baseline)
    assert np.array_equal(data, base, equal_nan=True), \
        f"{env}: mosaic differs from local in {np.sum(~((data == base) | (np.isnan(data) & np.isnan(base))))} pixels"


@pytest.mark.parametrize("env,placement", [
    ("hook", "local"), ("fuse", "local"), ("fuse", "hash"), ("hook", "hash")])
def test_runner_brings_a_private_pool_up_and_down(env, placement, tiny_tiles, local_baseline,
                                                  tmp_path, chfs_stack_env):
    """What the main job does: workflows/run starts its own pool with `environments/stack up`
    (and for fuse the chfuse mount), runs, and leaves no server, mount or storage behind."""
    r = run_workflow(env, tiny_tiles, tmp_path, "--placement", placement, environ=chfs_stack_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert np.array_equal(mosaic(tmp_path)[0], mosaic(local_baseline)[0], equal_nan=True)
    assert not list(tmp_path.glob("chfs-pool-*")), "pool directory left behind"
    with open("/proc/self/mounts") as f:
        assert str(tmp_path) not in f.read(), "chfuse mount left behind"
    left = subprocess.run(["pgrep", "-f", f"chfsd .*{tmp_path}"], capture_output=True, text=True)
    assert left.stdout == "", f"chfsd still running: {left.stdout}"


def test_rake_with_three_task_threads_under_the_hook(tiny_tiles, local_baseline, tmp_path,
                                                     chfs_stack_env):
    # `rake -m -j3` died with Ruby's "[BUG] Segmentation fault" after the projections: a third
    # task thread's first malloc was the hook's lazily allocated __thread memory, and it made
    # glibc's ninth arena, whose get_nprocs() re-entered the hook (chfs-hook test_hook.py::
    # test_a_new_threads_first_path_call_never_reenters_the_hook has the small case).
    r = run_workflow("hook", tiny_tiles, tmp_path, "-j", "3", environ=chfs_stack_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert np.array_equal(mosaic(tmp_path)[0], mosaic(local_baseline)[0], equal_nan=True)


@pytest.mark.skipif(shutil.which("pwrake") is None,
                    reason="pwrake not installed (not in Debian; RubyGems unreachable here)")
def test_pwrake_runs_the_same_rakefile(tiny_tiles, local_baseline, tmp_path):
    r = run_workflow("local", tiny_tiles, tmp_path, "--pwrake")
    assert r.returncode == 0, r.stdout + r.stderr
    assert np.array_equal(mosaic(tmp_path)[0], mosaic(local_baseline)[0], equal_nan=True)
