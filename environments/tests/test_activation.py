"""Spack-free activation: `source environments/activate ENV` exports what ENV/spack.yaml says
plus the local-build prefix, `deactivate` restores the shell exactly, switching environments
undoes the first one, and mistakes give one clear line."""
import os
import subprocess

import pytest
import yaml

ENVDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACTIVATE = os.path.join(ENVDIR, "activate")


def bash(script, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("_CHFS_STACK")}
    e.update(env)
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env=e)


@pytest.mark.parametrize("name", ["native", "mpiio", "hook", "fuse"])
def test_activate_sets_the_yaml_env_vars_and_deactivate_restores(name, tmp_path):
    with open(os.path.join(ENVDIR, name, "spack.yaml")) as f:
        want = yaml.safe_load(f)["spack"]["env_vars"]["set"]
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib" / "pkgconfig").mkdir(parents=True)
    script = f"""
        env | sort > {tmp_path}/before
        source {ACTIVATE} {name} || exit 3
        env | sort > {tmp_path}/during
        deactivate
        env | sort > {tmp_path}/after
        type deactivate 2>/dev/null | grep -q stack-env && echo STILL-DEFINED
        true"""
    p = bash(script, CHFS_STACK_PREFIX=str(prefix))
    assert p.returncode == 0, p.stderr
    assert "STILL-DEFINED" not in p.stdout
    during = dict(line.split("=", 1) for line in (tmp_path / "during").read_text().splitlines()
                  if "=" in line)
    for var, value in want.items():
        assert during.get(var) == value, f"{var}: {during.get(var)!r} != {value!r}"
    assert during["PATH"].startswith(f"{prefix}/bin:"), during["PATH"]
    assert f"{prefix}/lib/pkgconfig" in during["PKG_CONFIG_PATH"]
    assert during["LD_LIBRARY_PATH"].startswith(f"{prefix}/lib")
    assert (tmp_path / "before").read_text() == (tmp_path / "after").read_text()


def test_switching_environments_undoes_the_first(tmp_path):
    p = bash(f"""env | sort > {tmp_path}/before
        source {ACTIVATE} fuse; source {ACTIVATE} mpiio
        echo "placement=${{CHFS_PLACEMENT:-unset}} romio=$ROMIO_FSTYPE_FORCE env=$CHFS_STACK_ENV"
        deactivate; env | sort > {tmp_path}/after""")
    assert p.returncode == 0, p.stderr
    assert "placement=unset romio=chfs: env=mpiio" in p.stdout
    assert (tmp_path / "before").read_text() == (tmp_path / "after").read_text()


def test_an_existing_variable_is_restored_not_unset(tmp_path):
    p = bash(f"""export CHFS_CHUNK_SIZE=4096 CHFS_PLACEMENT=
        source {ACTIVATE} fuse; echo "in=$CHFS_CHUNK_SIZE/$CHFS_PLACEMENT"; deactivate
        echo "out=$CHFS_CHUNK_SIZE/${{CHFS_PLACEMENT-unset}}" """)
    assert "in=65536/local" in p.stdout and "out=4096/" in p.stdout, p.stdout + p.stderr


def test_unknown_environment_is_one_clear_error():
    p = bash(f"source {ACTIVATE} nosuchenv; echo rc=$?")
    assert "no environment 'nosuchenv'" in p.stderr and "rc=1" in p.stdout
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_broken_yaml_is_one_clear_error(tmp_path):
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "spack.yaml").write_text("spack:\n  specs: [chfs\n")
    p = subprocess.run([os.path.join(ENVDIR, "stack-env"), "activate", str(bad)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "cannot read" in p.stderr and p.stdout == ""
