"""The README's examples run as written (each in a fresh interpreter, as a newcomer pastes it)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_readme_is_short_and_starts_with_setup():
    lines = README.splitlines()
    assert len(lines) <= 150, f"README has {len(lines)} lines; detail belongs in docs/"
    first = "\n".join(lines[:30])
    assert "make lab" in first and "make test" in first


@pytest.mark.parametrize("code", BLOCKS, ids=[f"example{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, tmp_path):
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
