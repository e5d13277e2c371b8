"""The `small_tmpfs` fixture: a 1 MiB tmpfs — a backend that fills up — unmounted after the test
(root only). Test modules import it: `from small_tmpfs import small_tmpfs`."""
import os
import subprocess

import pytest


@pytest.fixture
def small_tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small-tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
