"""io_uring_setup(2) called from Python (ctypes), independently of the launcher's own probe:
`probe.py EPERM` exits 0 when the call fails with EPERM (under ci/no-io-uring), `probe.py ok`
when it gives a ring (outside). Also forks: the child must see the same answer."""
import ctypes
import errno
import os
import sys

NR_IO_URING_SETUP = 425  # the same on every architecture's unified table (x86-64 here)


def setup():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(NR_IO_URING_SETUP, 1, params)
    if fd < 0:
        return errno.errorcode[ctypes.get_errno()]
    os.close(fd)
    return "ok"


want = sys.argv[1]
got = setup()
pid = os.fork()
if pid == 0:
    os._exit(0 if setup() == want else 1)
_, status = os.waitpid(pid, 0)
print(f"io_uring_setup: {got} (want {want}); in a forked child: "
      f"{'same' if status == 0 else 'different'}")
sys.exit(0 if got == want and status == 0 else 1)
