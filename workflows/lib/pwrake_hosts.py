"""pwrake_hosts.py — Pwrake's workers on other hosts see the working directory as the master does.

Pwrake starts one worker per host with `ssh -x -T [SSH_OPTION] HOST "ruby -e '…'"` (through
/bin/sh, `ssh` taken from PATH; hosts with this machine's loopback address run the same command
without ssh), and the worker process itself enters the working directory (Ruby's spawn chdir
before each command). So the worker — not only the commands it runs — must see the path:

  local  the directory must be on a file system every host mounts at the same path (a shared
         home or parallel FS; not /tmp on a real or simulated node).
  hook   /chfs exists only in hooked processes: the remote ruby must start under chfs-run, with
         the pool's variables (CHFS_SERVER, CHFS_SECRET_FILE, CHFS_PLACEMENT…). sshd does not pass
         them (a cluster's AcceptEnv is LANG/LC_* at most), and Pwrake's PASS_ENV sets them inside
         the worker after it started — too late for the hook's loader.
  fuse   every host needs its own chfuse mount at the same path (not offered with --hosts yet).

For the hook, remote_shell() writes an `ssh` for the engine's PATH that calls the real ssh with
the remote command prefixed by `env VAR=value… chfs-run --mount M --`; Pwrake's own ssh line is
unchanged otherwise. CHFS_SECRET_FD is not passed (a descriptor of this host; removed even if
ssh forwards CHFS_* itself): the worker's chfs-run opens CHFS_SECRET_FILE on its host, which
must see that file at the same path.

hosts_missing() checks, before the workflow starts, that every remote host sees the working
directory, over that same ssh: otherwise the first symptom is a Montage step failing with "no
output" on some host (its own /tmp, say) and Pwrake's backtraces while it stops the others.
"""
import os
import re
import shlex
import shutil
import socket
import subprocess

# Variables a worker on another host gets from the runner's environment: the pool's client
# settings. Not the descriptor of the secret (this host's), not the hook's mount table (chfs-run
# sets it from --mount), not the stack's own bookkeeping.
NOT_PASSED = ("CHFS_SECRET_FD", "CHFS_HOOK_MOUNTS")


def client_vars(env):
    return {k: v for k, v in sorted(env.items())
            if k.startswith("CHFS_") and not k.startswith("CHFS_STACK_") and k not in NOT_PASSED}


WRAPPER = """#!/bin/sh
# ssh for Pwrake's workers in one workflows/run run (written by workflows/lib/pwrake_hosts.py):
# Pwrake runs `ssh -x -T [SSH_OPTION] HOST "ruby -e '...'"`; the last argument, the remote
# command, is started under the access path's prefix on HOST.
prefix={prefix}
n=$#
for arg do
  shift
  if [ "$n" -eq 1 ]; then arg="$prefix $arg"; fi
  set -- "$@" "$arg"
  n=$((n - 1))
done
exec {ssh} "$@"
"""


def remote_shell(directory, env, prefix):
    """Writes DIRECTORY/ssh running Pwrake's remote command under prefix (an argv, e.g.
    chfs-run --mount /chfs --) with env's CHFS client variables; returns the environment
    changes for the engine (PATH with DIRECTORY first)."""
    path = env.get("PATH", os.defpath)
    ssh = shutil.which("ssh", path=path)
    if ssh is None:
        raise RuntimeError("--hosts: ssh is not on PATH")
    tool = shutil.which(prefix[0], path=path)
    if tool is None:
        raise RuntimeError(f"--hosts: {prefix[0]} is not on PATH")
    # -u: an ssh that forwards CHFS_* (SendEnv) would carry this host's descriptor number along
    unset = [a for k in NOT_PASSED for a in ("-u", k)]
    remote = ["env", *unset, *(f"{k}={v}" for k, v in client_vars(env).items()), tool,
              *prefix[1:]]
    os.makedirs(directory, exist_ok=True)
    wrapper = os.path.join(directory, "ssh")
    with open(wrapper, "w") as f:
        f.write(WRAPPER.format(prefix=shlex.quote(shlex.join(remote)), ssh=shlex.quote(ssh)))
    os.chmod(wrapper, 0o755)
    return {"PATH": f"{directory}:{path}"}


def host_names(hosts_file):
    """The hosts of a Pwrake HOSTFILE: 'HOST [NCORES …]' lines, '#' comments, and Pwrake's
    ranges 'node[[1-4]]' (numbers, zero-padded as written)."""
    names = []
    with open(hosts_file) as f:
        for line in f:
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            m = re.search(r"\[\[(\d+)-(\d+)\]\]", fields[0])
            if not m:
                names.append(fields[0])
                continue
            lo, hi = m.group(1), m.group(2)
            names += [fields[0][:m.start()] + str(i).zfill(len(lo)) + fields[0][m.end():]
                      for i in range(int(lo), int(hi) + 1)]
    return list(dict.fromkeys(names))


def is_loopback(host):
    """Pwrake's own test: a host whose address is 127.0.0.1 or ::1 gets its worker without ssh."""
    try:
        return socket.getaddrinfo(host, None)[0][4][0] in ("127.0.0.1", "::1")
    except OSError:
        return False


def hosts_missing(hosts_file, path, env, timeout=60):
    """Asks every remote host of hosts_file, over the ssh Pwrake will use (env's PATH: the
    wrapper above under the hook), whether it sees path; returns one message per host that
    does not (or cannot be reached), empty when all do. In parallel, bounded by timeout."""
    procs = []
    for host in host_names(hosts_file):
        if is_loopback(host):
            continue
        procs.append((host, subprocess.Popen(
            ["ssh", "-x", "-T", host, f"test -d {shlex.quote(path)}"], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)))
    problems = []
    for host, p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            problems.append(f"{host}: no answer over ssh within {timeout} s")
            continue
        if p.returncode == 255:
            problems.append(f"{host}: ssh failed: {err.strip() or 'exit 255'}")
        elif p.returncode != 0:
            problems.append(f"{host}: does not see {path}")
    return problems
