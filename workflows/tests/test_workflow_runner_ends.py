"""How a workflow run ends when it does not succeed: a failing Montage step, an overrun of
--timeout and Ctrl-C each end the run promptly with one clear line (no Ruby backtrace, no
"rake aborted!", no Python traceback), and leave no working directory or engine process behind.
Pwrake's multi-host mode is exercised when pwrake is installed (CI cannot install it); across
simulated nodes in test_pwrake_cluster.py."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from montage_helpers import RUN, run_workflow


def work_dirs(out):
    return [d for d in os.listdir(out) if d.startswith("work-")]


def engine_alive(out):
    """A rake/pwrake still running in a working directory under out."""
    r = subprocess.run(["pgrep", "-f", f"Rakefile.*TIMING_LOG={out}"], capture_output=True)
    return r.returncode == 0


@pytest.fixture
def broken_tiles(tiny_tiles, tmp_path):
    """The tiny input with one tile cut after its header: mImgtbl (headers only) accepts it,
    mProjectPP fails on it in the middle of the workflow."""
    d = tmp_path / "raw"
    shutil.copytree(tiny_tiles, d)
    victim = sorted(p for p in d.iterdir() if p.name.endswith(".fits"))[1]
    data = victim.read_bytes()
    victim.write_bytes(data[:2880 * 2])
    return d


def test_failing_step_ends_the_run_with_one_line(broken_tiles, tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = run_workflow("local", broken_tiles, out, timeout=120)
    took = time.monotonic() - t0
    err = r.stdout + r.stderr
    assert r.returncode != 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("montage workflow:")]
    assert len(lines) == 1 and "mProjectPP failed for" in lines[0], err
    for noise in ("rake aborted", "Traceback", ".rb:", "Rakefile:"):
        assert noise not in err, err
    assert took < 60, f"a failing step took {took:.1f} s to end the run"
    assert not work_dirs(out) and not engine_alive(out)


@pytest.mark.skipif(shutil.which("pwrake") is None,
                    reason="pwrake not installed (not in Debian; RubyGems unreachable here)")
def test_failing_step_ends_a_pwrake_run_with_one_line(broken_tiles, tmp_path):
    # Pwrake catches `exit` in a task as a failure and prints "pwrake aborted! SystemExit" with
    # a backtrace (and retries it); a raised WorkflowFailed is printed as its one line.
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = run_workflow("local", broken_tiles, out, "--runner", "pwrake", timeout=120)
    took = time.monotonic() - t0
    err = r.stdout + r.stderr
    assert r.returncode != 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("montage workflow:")]
    assert len(lines) == 1 and "mProjectPP failed for" in lines[0], err
    for noise in ("aborted", "SystemExit", "Traceback", ".rb:", "Rakefile:"):
        assert noise not in err, err
    assert took < 60, f"a failing step took {took:.1f} s to end the Pwrake run"
    assert not work_dirs(out) and not engine_alive(out)


def test_timeout_stops_the_workflow_and_cleans_up(tiny_tiles, tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = run_workflow("local", tiny_tiles, out, "--timeout", "0.5", timeout=120)
    took = time.monotonic() - t0
    assert r.returncode != 0
    assert "did not finish within 0.5 s (--timeout)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert took < 30, f"--timeout 0.5 ended the run after {took:.1f} s"
    assert not work_dirs(out) and not engine_alive(out)


def interrupt_mid_run(tiles, out, send):
    """Starts a run and calls send(pid) while the engine is inside one of its steps; returns
    (exit status, stderr). The step (mBgModel) is held by a wrapper on PATH that marks a file and
    sleeps: a fixed pause after start-up raced the tiny workflow's own end on a loaded machine
    (the signal landed in the final clean-up, where the runner ignores it by design)."""
    wrap = os.path.join(os.path.dirname(str(out)), "held-step")
    os.makedirs(wrap, exist_ok=True)
    mark = os.path.join(wrap, "inside")
    real = shutil.which("mBgModel")
    assert real, "Montage's mBgModel is not on PATH"
    with open(os.path.join(wrap, "mBgModel"), "w") as f:
        f.write(f'#!/bin/sh\ntouch "{mark}"\nsleep 120\nexec {real} "$@"\n')
    os.chmod(os.path.join(wrap, "mBgModel"), 0o755)
    env = dict(os.environ, PATH=f"{wrap}:{os.environ['PATH']}")
    # SIGINT as a terminal leaves it: a background job of a non-interactive shell (a CI run
    # started with &) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt.
    p = subprocess.Popen([sys.executable, RUN, "--env", "local", "-j", "1", "--input",
                          str(tiles), "--out", str(out)], stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        end = time.time() + 120
        while not os.path.exists(mark):
            assert p.poll() is None, f"the run ended before its held step: {p.stderr.read()}"
            assert time.time() < end, "the held step never started"
            time.sleep(0.05)
        send(p.pid)
        err = p.stderr.read()
        return p.wait(timeout=60), err
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_ctrl_c_cleans_up_without_a_traceback(tiny_tiles, tmp_path):
    out = tmp_path / "out"
    # A terminal's Ctrl-C signals the whole foreground process group: the runner's own session
    # stands in for it.
    rc, err = interrupt_mid_run(tiny_tiles, out, lambda pid: os.killpg(pid, signal.SIGINT))
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert rc == 130 and "run: interrupted" in err, (rc, err)
    assert not work_dirs(out) and not engine_alive(out)


def test_sigterm_to_the_runner_stops_the_engine_too(tiny_tiles, tmp_path):
    # timeout(1) or a batch system's kill signals only the runner; the engine (its own
    # session) must not be left running.
    out = tmp_path / "out"
    rc, err = interrupt_mid_run(tiny_tiles, out, lambda pid: os.kill(pid, signal.SIGTERM))
    assert "Traceback" not in err, err
    assert rc == 143 and "run: terminated" in err, (rc, err)
    assert not work_dirs(out) and not engine_alive(out)


def test_pwrake_options_need_the_pwrake_runner(tiny_tiles, tmp_path):
    r = run_workflow("local", tiny_tiles, tmp_path, "--log-dir", str(tmp_path / "logs"))
    assert r.returncode == 2 and "add --runner pwrake" in r.stderr


@pytest.mark.parametrize("env,attach,why", [
    ("hook", [], "needs --attach: a private pool runs on this host only"),
    ("fuse", ["--attach"], "every host needs the pool mounted at the same path")])
def test_pwrake_hosts_need_a_pool_the_hosts_reach(env, attach, why, tiny_tiles, tmp_path):
    # A private pool serves this host alone (and a chfuse mount is this host's): workers on
    # other hosts would fail on every file; say so before starting anything.
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.1 1\n")
    environ = {k: v for k, v in os.environ.items() if k != "CHFS_STACK_MOUNT"}
    r = run_workflow(env, tiny_tiles, tmp_path / "out", *attach, "--runner", "pwrake",
                     "--hosts", str(hosts), environ=environ)
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


NO_PWRAKE = "pwrake not installed (not in Debian; RubyGems unreachable here)"


def pwrake_run_on_hosts(hosts_text, tiles, baseline, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text(hosts_text)
    out = tmp_path / "out"
    r = run_workflow("local", tiles, out, "--runner", "pwrake", "--hosts", str(hosts),
                     "--log-dir", str(tmp_path / "logs"), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "mosaic.fits").read_bytes() == (baseline / "mosaic.fits").read_bytes()
    return (tmp_path / "logs" / "pwrake.log").read_text()


@pytest.mark.skipif(shutil.which("pwrake") is None, reason=NO_PWRAKE)
def test_pwrake_with_a_host_file(tiny_tiles, local_baseline, tmp_path):
    # Two names of this machine, one core each: the HOSTFILE path, with workers started
    # locally (Pwrake uses ssh only for hosts whose address is not this machine's).
    log = pwrake_run_on_hosts("localhost 1\n127.0.0.1 1\n", tiny_tiles, local_baseline, tmp_path)
    assert "HOSTFILE" in log


@pytest.mark.skipif(shutil.which("chfuse") is None or not os.path.exists("/dev/fuse"),
                    reason="chfuse (local build) or /dev/fuse missing")
def test_fuse_shows_chfuses_own_message_for_an_unreachable_pool(tiny_tiles, tmp_path):
    # Nothing listens on the discard port: chfuse gives up by itself (after libchfs's RPC
    # time-out) and says why; the runner must wait for that and show it, not "timeout".
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdef" * 4 + "\n")   # 64 hex digits, as chfsctl writes
    secret.chmod(0o600)
    env = {**os.environ, "CHFS_SERVER": "tcp://127.0.0.1:9", "CHFS_SECRET_FILE": str(secret)}
    r = run_workflow("fuse", tiny_tiles, tmp_path / "out", "--attach", environ=env, timeout=200)
    assert r.returncode != 0
    assert "chfuse did not mount" in r.stderr and "chfuse: cannot join the CHFS pool at " \
        "tcp://127.0.0.1:9" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not [d for d in os.listdir(tmp_path / "out") if d.startswith("chfuse-")]


@pytest.mark.skipif(shutil.which("chfuse") is None or not os.path.exists("/dev/fuse"),
                    reason="chfuse (local build) or /dev/fuse missing")
def test_a_pool_that_dies_mid_run_ends_the_run_within_the_bound(tmp_path):
    # The private pool's server is killed while the workflow runs: the run must end within
    # --timeout plus the pool's stop, and leave no mount, server or chfuse behind.
    out = tmp_path / "out"
    log = tmp_path / "run.log"
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.Popen([sys.executable, RUN, "--env", "fuse", "--preset", "small", "-j", "2",
                              "--timeout", "20", "--out", str(out)], stdout=f, stderr=f,
                             start_new_session=True)
    try:
        killed = None
        while killed is None and p.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.2)
            pids = [q for q in out.glob("chfs-pool-*/scratch/srv*/chfsd.pid")]
            if pids and "tasks done" in log.read_text():
                killed = int(pids[0].read_text())
                os.kill(killed, signal.SIGKILL)
        assert killed, "the workflow never ran on the pool: " + log.read_text()
        rc = p.wait(timeout=180)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    took = time.monotonic() - t0
    err = log.read_text()
    assert rc != 0 and "Traceback" not in err and "IOError" not in err, err
    assert "did not finish within 20 s" in err or "workflow failed" in err, err
    assert took < 90, f"the run ended {took:.0f} s after it started (bound 20 s + stop)"
    with open("/proc/self/mounts") as f:
        assert str(out) not in f.read(), "a mount was left behind"
    left = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout
    assert not left, f"processes left behind: {left}"
    assert not list(out.glob("chfs-pool-*")), "the pool directory was left behind"
