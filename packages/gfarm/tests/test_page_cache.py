"""Unit test of gfccd's page store: page_cache_test.c compiled with page_cache.c and run."""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "coop-cache")


@pytest.mark.timeout(120)
def test_page_cache_lru_eof_inval_retag(tmp_path):
    exe = tmp_path / "page_cache_test"
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-O1", "-g",
                    "-fsanitize=address,undefined", "-pthread",
                    "-I", os.path.join(SRC, "gftool", "gfccd"),
                    "-I", os.path.join(SRC, "lib", "libgfarm", "gfarm"),
                    os.path.join(HERE, "page_cache_test.c"),
                    os.path.join(SRC, "gftool", "gfccd", "page_cache.c"), "-o", str(exe)],
                   check=True, timeout=110)
    r = subprocess.run([str(exe)], stdout=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout
