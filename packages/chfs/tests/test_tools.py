"""The command-line tools: chfsctl start/status/stop output and behaviour, chlist, chmkdir,
chls, chcp round trips, --help of every tool."""
import os
import re
import subprocess

import pytest

from ci.testlib.chfs_pool import stack_env

TOOLS = ["chfsd", "chfsctl", "chlist", "chmkdir", "chrmdir", "chls", "chcp", "chfs-io", "chfs-demo"]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_has_help(tool):
    r = subprocess.run([tool, "--help"], env=stack_env(), capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and "usage" in r.stdout.lower()


@pytest.mark.timeout(120)
def test_chfsctl_starts_local_pool_and_tools_work(tmp_path):
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    ctl = ["chfsctl", "-N", "3", "-c", str(tmp_path / "pool")]
    try:
        out = subprocess.run(ctl + ["start"], env=env, capture_output=True, text=True,
                             timeout=60, check=True).stdout
        m = re.fullmatch(r'CHFS_SERVER="([^"]+)"; export CHFS_SERVER;\n', out)
        assert m, out
        assert len(m.group(1).split(",")) == 3
        assert oct(os.stat(env["CHFS_SECRET_FILE"]).st_mode & 0o777) == "0o600"
        env["CHFS_SERVER"] = m.group(1)
        run = lambda *a: subprocess.run(list(a), env=env, capture_output=True, text=True,
                                        timeout=60, check=True).stdout
        assert run("chlist", "-c").strip() == m.group(1)
        assert len(run("chlist").splitlines()) == 3
        assert "running" in run(*ctl, "status")
        run("chmkdir", "-p", "/a/b/c")
        src = tmp_path / "src"
        (src / "sub").mkdir(parents=True)
        (src / "one").write_bytes(os.urandom(300000))
        (src / "sub" / "two").write_bytes(os.urandom(5 << 20))
        assert "MiB/s" in run("chcp", "-v", "-r", str(src), "chfs:/a/b/c/src")
        assert sorted(run("chls", "/a/b/c/src").split()) == ["one", "sub"]
        assert "two" in run("chls", "-l", "/a/b/c/src/sub")
        run("chcp", "-r", "chfs:/a/b/c/src", str(tmp_path / "back"))
        for p in ("one", "sub/two"):
            assert (tmp_path / "back" / p).read_bytes() == (src / p).read_bytes()
        r = subprocess.run(["chrmdir", "/a/b/c"], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "not empty" in r.stderr.lower()
    finally:
        subprocess.run(ctl + ["stop"], env=env, timeout=60)
    r = subprocess.run(ctl + ["status"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "stopped" in r.stdout


@pytest.mark.timeout(90)
def test_chfsctl_hostfile_with_repeated_local_host_runs_one_server_per_line(tmp_path):
    env = stack_env()
    env["CHFS_SECRET_FILE"] = str(tmp_path / "secret")
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost\n127.0.0.1\n# comment\nlocalhost\n")
    ctl = ["chfsctl", "-h", str(hosts), "-c", str(tmp_path / "pool")]
    try:
        out = subprocess.run(ctl + ["start"], env=env, capture_output=True, text=True,
                             timeout=60, check=True).stdout
        servers = re.fullmatch(r'CHFS_SERVER="([^"]+)"; export CHFS_SERVER;\n', out).group(1).split(",")
        assert len(set(servers)) == 3
        assert sorted(os.listdir(tmp_path / "pool")) == ["srv0", "srv1", "srv2"]
    finally:
        subprocess.run(ctl + ["clean"], env=env, timeout=60)
    assert not os.path.exists(tmp_path / "pool" / "srv0")
