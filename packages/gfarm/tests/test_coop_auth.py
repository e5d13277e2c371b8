"""Unit test of the cooperative cache's MACs: coop_auth_test.c compiled with coop_cache_auth.c
(OpenSSL) and run: RFC 4231 HMAC-SHA256 vectors, split input, a reply MAC over every field."""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(os.path.dirname(HERE), "coop-cache", "lib", "libgfarm", "gfarm")


@pytest.mark.timeout(120)
def test_coop_auth_hmac_vectors_and_reply_mac_fields(tmp_path):
    exe = tmp_path / "coop_auth_test"
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-O1", "-g",
                    "-fsanitize=address,undefined", "-I", LIB,
                    os.path.join(HERE, "coop_auth_test.c"),
                    os.path.join(LIB, "coop_cache_auth.c"), "-lcrypto", "-o", str(exe)],
                   check=True, timeout=110)
    r = subprocess.run([str(exe)], stdout=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout
