"""Paths and the runner call shared by the workflow tests (plain module: test files import it)."""
import os
import subprocess
import sys

WORKFLOWS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(WORKFLOWS, "run")
GEN = os.path.join(WORKFLOWS, "gen-tiles")
RAKEFILE = os.path.join(WORKFLOWS, "Rakefile")


def run_workflow(env, tiles, out, *extra, environ=None, timeout=300):
    """Runs workflows/run; returns the CompletedProcess (output captured as text)."""
    return subprocess.run([sys.executable, RUN, "--env", env, "-j", "2", "--input", str(tiles),
                           "--out", str(out), *extra], env=environ,
                          capture_output=True, text=True, timeout=timeout)
