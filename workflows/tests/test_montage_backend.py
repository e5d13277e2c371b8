"""`workflows/run --backend DIR` as a site runs it: the input tiles live in DIR (the parallel
file system), the private pool caches DIR (chfsctl -b via environments/stack), Montage reads
the tiles through CHFS, and the mosaic reaches DIR when the pool stops — equal to the mosaic
of the local baseline. The working directory's intermediate files stay in CHFS."""
import os
import re

import numpy as np
import pytest
from astropy.io import fits

from montage_helpers import run_workflow


def mosaic_data(path):
    with fits.open(path) as h:
        return h[0].data.copy()


@pytest.mark.parametrize("env", ["fuse", "hook"])
@pytest.mark.timeout(300)
def test_backend_run_reads_tiles_through_chfs_and_flushes_the_mosaic_back(
        env, tiny_tiles, local_baseline, tmp_path, chfs_stack_env):
    if env == "fuse" and (os.geteuid() != 0 or not os.path.exists("/dev/fuse")):
        pytest.skip("chfuse needs root and /dev/fuse")
    backend = tmp_path / "pfs"
    backend.mkdir()
    environ = dict(chfs_stack_env)
    environ.pop("CHFS_SERVER", None)
    r = run_workflow(env, tiny_tiles, tmp_path / "out", "--backend", str(backend),
                     environ=environ)
    assert r.returncode == 0, r.stdout + r.stderr
    # the tiles were read from the backend through the pool, not copied in
    m = re.search(r"^run: env=\S+ placement=\S+ backend=(\S+) input=(\S+) work=", r.stderr, re.M)
    assert m and m.group(1) == str(backend), r.stderr
    assert m.group(2).endswith("/montage-input/raw"), r.stderr
    assert sorted(os.listdir(backend / "montage-input" / "raw")) == sorted(os.listdir(tiny_tiles))
    # the mosaic is on the backend after the pool stopped, the intermediates are not
    assert sorted(os.listdir(backend)) == ["montage-input", "montage-output"]
    (run_dir,) = os.listdir(backend / "montage-output")
    got = backend / "montage-output" / run_dir
    assert sorted(os.listdir(got)) == ["mosaic.fits", "mosaic.png"]
    assert f"mosaic flushed to the backend: {got}/" in r.stderr, r.stderr
    assert (got / "mosaic.png").read_bytes() == (tmp_path / "out" / "mosaic.png").read_bytes()
    base = mosaic_data(local_baseline / "mosaic.fits")
    np.testing.assert_array_equal(mosaic_data(got / "mosaic.fits"), base)
    assert "pool-stop" in (tmp_path / "out" / "timing.csv").read_text()
