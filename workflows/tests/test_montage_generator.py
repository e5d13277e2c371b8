"""gen-tiles: deterministic for a seed, valid TAN WCS that Montage reads, overlapping tiles."""
import hashlib
import subprocess
import sys

import numpy as np
from astropy.io import fits
from astropy.wcs import WCS

from montage_helpers import GEN


def digests(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def gen(d, *args):
    subprocess.run([sys.executable, GEN, str(d), *args], check=True, capture_output=True,
                   timeout=120)


def test_same_seed_gives_identical_files_and_other_seed_differs(tmp_path):
    gen(tmp_path / "a", "-n", "4", "-s", "64", "--seed", "3")
    gen(tmp_path / "b", "-n", "4", "-s", "64", "--seed", "3")
    gen(tmp_path / "c", "-n", "4", "-s", "64", "--seed", "4")
    a, b, c = (digests(tmp_path / x) for x in "abc")
    assert len(a) == 4 and a == b
    assert all(a[k] != c[k] for k in a)


def test_tiles_have_tan_wcs_shared_sky_and_distinct_backgrounds(tiny_tiles):
    files = sorted(tiny_tiles.glob("tile_*.fits"))
    assert len(files) == 4
    levels = []
    for f in files:
        with fits.open(f) as h:
            data, hdr = h[0].data, h[0].header
        assert data.shape == (200, 200) and data.dtype == np.dtype(">f4")
        w = WCS(hdr)
        assert w.wcs.ctype[0] == "RA---TAN" and w.wcs.ctype[1] == "DEC--TAN"
        levels.append(float(np.median(data)))
    assert len({round(v) for v in levels}) == 4          # every tile its own background
    # neighbouring tiles overlap on the sky: tile 1's centre is inside tile 0's footprint shifted
    w0 = WCS(fits.getheader(files[0]))
    w1 = WCS(fits.getheader(files[1]))
    x, y = w0.all_world2pix(*w1.all_pix2world(0, 100, 0), 0)
    assert 0 <= x < 200 and 0 <= y < 200


def test_mimgtbl_accepts_every_tile(tiny_tiles, tmp_path):
    r = subprocess.run(["mImgtbl", str(tiny_tiles), str(tmp_path / "i.tbl")],
                       capture_output=True, text=True, timeout=60)
    assert 'stat="OK"' in r.stdout and "count=4" in r.stdout and "badwcs=0" in r.stdout
