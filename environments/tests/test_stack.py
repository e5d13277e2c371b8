"""environments/stack: one command brings an environment's pool up and down; a second `up`
is refused with a clear message, `status` tells up from down, and an unknown environment or a
missing argument is one clear error."""
import os
import subprocess

from envlib import ENVDIR, Session


def test_up_status_up_again_down(tmp_path):
    s = Session("native", tmp_path)
    try:
        up = s.stack("up")
        assert up.stdout.startswith('CHFS_SERVER="tcp://'), up.stdout
        st = s.stack("status")
        assert st.stdout.count("running") == 2, st.stdout
        again = s.stack("up", check=False)
        assert again.returncode == 1 and "already up" in again.stderr, again.stderr
    finally:
        down = s.stack("down", check=False)
        s.force_cleanup()
    assert down.returncode == 0, down.stderr
    st = s.stack("status", check=False)
    assert st.returncode == 1 and "running" not in st.stdout, st.stdout
    assert not os.path.exists(os.path.join(tmp_path, "run", "native.state"))


def test_stack_errors_are_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CHFS_STACK_ENV"}
    p = subprocess.run([os.path.join(ENVDIR, "stack"), "up"], capture_output=True, text=True,
                       env=env, timeout=30)
    assert p.returncode == 1 and "none active" in p.stderr
    p = subprocess.run([os.path.join(ENVDIR, "stack"), "up", "nosuchenv"], capture_output=True,
                       text=True, env=env, timeout=30)
    assert p.returncode == 1 and "no environment 'nosuchenv'" in p.stderr
    p = subprocess.run([os.path.join(ENVDIR, "stack"), "up", "gfarm"], capture_output=True,
                       text=True, env=env, timeout=30)
    assert p.returncode == 1 and "no CHFS pool" in p.stderr
    p = subprocess.run([os.path.join(ENVDIR, "stack"), "sideways"], capture_output=True,
                       text=True, env=env, timeout=30)
    assert p.returncode == 2 and "Usage" in p.stderr
