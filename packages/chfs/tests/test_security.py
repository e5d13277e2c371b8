"""Local attacks on CHFS processes by another user of the node (needs root, to act as `nobody`):
files planted in the world-writable /dev/shm must not make a CHFS process remove anything."""
import os
import subprocess
import sys

import pytest

from chfsutil import io

# struct shm_doorbell (transport/shm_doorbell.h): seq, sleeping, owner_pid, closed, epname[128]
PLANT = r"""
import os, struct, sys
path, pid, ep = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
body = struct.pack("<IIiI128s", 0, 0, pid, 0, ep).ljust(4096, b"\0")
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
os.write(fd, body)
os.fchmod(fd, 0o666)
os.close(fd)
"""


def as_nobody(*argv):
    subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv],
                   check=True, timeout=30)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chfs_pool", [{"servers": 1, "proto": "shm"}], indirect=True)
def test_shm_sweep_as_root_removes_nothing_another_user_planted(chfs_pool, tmp_path):
    assert os.geteuid() == 0, "this test acts as nobody and must run as root"
    victim = tmp_path / "victim"
    victim.write_text("precious")
    p = subprocess.Popen(["true"])
    p.wait()
    dead = p.pid  # an owner pid that no longer exists: the sweep's "left by a killed process"
    tag = f"sectest-{os.getpid()}"
    bell = f"/dev/shm/chfs-xprt-db.{tag}-evil"
    bell2 = f"/dev/shm/chfs-xprt-db.{tag}-other"
    region = f"/dev/shm/{tag}-region"
    try:
        as_nobody(sys.executable, "-c", PLANT, bell, str(dead), f"../..{victim}")
        as_nobody(sys.executable, "-c", "import sys; open(sys.argv[1], 'x').close()", region)
        as_nobody(sys.executable, "-c", PLANT, bell2, str(dead), os.path.basename(region))
        # a fresh root client process: its first shm transport sweeps /dev/shm
        io(chfs_pool, "ls", "/")
        assert victim.read_text() == "precious", "the sweep deleted a file named by a doorbell"
        for f in (bell, bell2, region):
            assert os.path.exists(f), f"the sweep deleted nobody's {f}"
    finally:
        for f in (bell, bell2, region):
            if os.path.exists(f):
                os.unlink(f)
