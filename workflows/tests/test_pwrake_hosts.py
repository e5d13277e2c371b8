"""The ssh the runner gives Pwrake for workers under the hook (workflows/lib/pwrake_hosts.py).

Runs without Pwrake or a cluster: the "real" ssh here is a script that runs the remote command
with sh -c on this host, as sshd runs it with the user's shell, and inherits this process's
environment, as an ssh forwarding every CHFS_* variable would. The prefix is a script standing
in for chfs-run. What must hold: the remote command keeps its words and quoting, starts under
the prefix, gets the pool's client variables (also values with spaces), and not this host's
secret descriptor (a number valid on this host only). The real thing runs in test_pwrake_cluster.py.
"""
import os
import subprocess
import sys

WORKFLOWS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(WORKFLOWS, "lib"))
import pwrake_hosts  # noqa: E402


def script(path, text):
    path.write_text(text)
    path.chmod(0o755)


def test_remote_worker_starts_under_the_prefix_with_the_pool_variables(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script(bindir / "ssh", '#!/bin/sh\nfor a do last=$a; done\nexec sh -c "$last"\n')
    script(bindir / "under", '#!/bin/sh\necho "under: $*"\nenv | grep ^CHFS_ | sort\n'
                             'while [ "$1" != -- ]; do shift; done; shift; exec "$@"\n')
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "CHFS_SERVER": "tcp://10.0.0.1:1",
           "CHFS_SECRET_FILE": "/shared/a secret", "CHFS_SECRET_FD": "7",
           "CHFS_PLACEMENT": "hash", "HOME": "/root"}
    change = pwrake_hosts.remote_shell(str(tmp_path / "w"), env,
                                       ["under", "--mount", "/chfs", "--"])
    assert change["PATH"].startswith(f"{tmp_path / 'w'}:")
    # Pwrake's own line: ssh -x -T HOST "ruby -e '...'" (here: a command with quoting to keep)
    r = subprocess.run([str(tmp_path / "w" / "ssh"), "-x", "-T", "node1",
                        "printf '%s|' 'a b' \"c'd\" e"], env={**env, **change},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "under: --mount /chfs -- printf %s| a b c'd e"
    assert lines[1:-1] == ["CHFS_PLACEMENT=hash", "CHFS_SECRET_FILE=/shared/a secret",
                           "CHFS_SERVER=tcp://10.0.0.1:1"]
    assert lines[-1] == "a b|c'd|e|"


def test_host_names_read_a_pwrake_host_file_as_pwrake_does(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# nodes\nnode[[08-10]] 2\n\n10.0.0.5 1  # login\nnode09 4\nlocalhost\n")
    assert pwrake_hosts.host_names(str(f)) == ["node08", "node09", "node10", "10.0.0.5",
                                               "localhost"]
    assert pwrake_hosts.is_loopback("localhost") and not pwrake_hosts.is_loopback("10.0.0.5")
