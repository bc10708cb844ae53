"""Runs the lit + filecheck per-stage snapshot tests in tests/filecheck, so pytest covers them."""

import os
import subprocess
import sys

HERE = os.path.dirname(__file__)
LIT_DIR = os.path.join(os.path.dirname(HERE), "filecheck")


def test_lit_filecheck_suite():
    lit = os.path.join(os.path.dirname(sys.executable), "lit")
    r = subprocess.run([lit, "-v", LIT_DIR], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout
