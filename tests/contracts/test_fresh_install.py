"""`pip install kvplan` in a fresh virtual environment, then `kvplan size hf:...` through a
loopback Hub (tests/fakehub.py): the Hub client comes with the base install (issue 11).

Slow (a venv and a pip install, about a minute) and needs a package index pip can reach
for kvplan's dependencies; skipped when there is none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fakehub import FakeHub
from paths import ROOT

QWEN3_8B = (ROOT / "tests" / "fixtures" / "hf-configs" / "Qwen--Qwen3-8B.json").read_bytes()


@pytest.mark.slow
def test_pip_install_kvplan_reads_a_hub_model(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    pip = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "--quiet",
                          str(ROOT)], capture_output=True, text=True, timeout=600)
    if pip.returncode != 0:
        pytest.skip(f"no package index to install from: {pip.stderr[-300:]}")
    server = FakeHub().start()
    try:
        server.add("Qwen/Qwen3-8B", {"config.json": QWEN3_8B})
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HF_", "PYTHON", "KVPLAN", "VIRTUAL_ENV"))}
        env.update(HF_ENDPOINT=server.url, HF_HOME=str(tmp_path / "hf-home"),
                   HF_HUB_DISABLE_TELEMETRY="1")
        res = subprocess.run([str(bindir / "kvplan"), "size", "hf:Qwen/Qwen3-8B", "-t", "32k",
                              "-f", "json"], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=120)
    finally:
        server.stop()
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    # Qwen3-8B: 36 layers x 8 KV heads x head_dim 128, K and V, bf16 (its config.json)
    assert doc["per_token_bytes"] == 36 * 8 * 128 * 2 * 2
    version = subprocess.run([str(bindir / "kvplan"), "--version"], capture_output=True,
                             text=True, env=env, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("kvplan ")
