"""The package builds, installs into a clean virtual environment, and the README's quickstart runs there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import reckon
from harness import Stack, free_port

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def block(readme: str, name: str) -> str:
    m = re.search(r"<!-- quickstart:" + name + r" -->\n```python\n(.*?)```", readme, re.S)
    assert m, f"README.md has no quickstart:{name} block"
    return m.group(1)


def test_wheel_installs_and_the_quickstart_runs(stack: Stack, system: reckon.Client, tmp_path: Path) -> None:
    dist, source = tmp_path / "dist", tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", ".*_cache", "__pycache__", "tests", ".venv"))
    subprocess.run([PYTHON, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(dist), str(source)],
                   check=True, capture_output=True, timeout=300)
    wheel = next(dist.glob("reckon_client-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    where = subprocess.run([py, "-c", "import reckon; print(reckon.__file__)"], cwd=tmp_path, check=True,
                           capture_output=True, text=True).stdout
    assert str(venv) in where

    readme = (ROOT / "README.md").read_text()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    upstream = subprocess.Popen([py, "-c", block(readme, "upstream")], cwd=tmp_path, env=dict(env, PORT=str(port)),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        system.put_connector("shop.refund", f"http://127.0.0.1:{port}/dispatch", tags=["write", "external"],
                             status_url=f"http://127.0.0.1:{port}/status")
        time.sleep(2.5)  # reactors reload connectors every second in the tests
        agent = subprocess.run([py, "-c", block(readme, "agent")], cwd=tmp_path, capture_output=True, text=True,
                               timeout=120, env=dict(env, RECKON_URL=stack.url, RECKON_TOKEN=stack.token))
        assert agent.returncode == 0, agent.stderr
        assert "'order': 'o-9'" in agent.stdout and "'amount_cents': 1200" in agent.stdout
        assert "'refund': 1" in agent.stdout
    finally:
        upstream.terminate()
        upstream.wait(10)


def test_the_targeted_version_is_this_repository() -> None:
    """README.md and reckon.RECKON_VERSION name the repository's newest migration: they move with it."""
    newest = max(int(p.name[:4]) for p in (ROOT.parents[1] / "db" / "migrations").glob("*.up.sql"))
    assert f"0001-{newest:04d}" in reckon.RECKON_VERSION
    assert f"migrations 0001 to {newest:04d}" in (ROOT / "README.md").read_text()
