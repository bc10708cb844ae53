"""The README's first command: `make lab LAB_ARGS="--no-browser --port N"` serves JupyterLab on a
working copy of notebooks/ (so saved outputs never dirty the tracked files). Started exactly as a
user would, then asked over HTTP what it serves."""

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not (REPO / ".venv" / ".installed").exists(), reason="needs `make` set-up")
def test_make_lab_serves_the_notebooks(tmp_path):
    port, token = free_port(), secrets.token_hex(8)
    args = f"--no-browser --ip=127.0.0.1 --port {port} --IdentityProvider.token={token}"
    log = open(tmp_path / "lab.log", "w")
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    # A session of its own, so the whole tree (make, jupyter) can be stopped together.
    process = subprocess.Popen(
        ["make", "lab", f"LAB_ARGS={args}", f"LAB_DIR={tmp_path / 'lab'}"], cwd=REPO,
        stdout=log, stderr=subprocess.STDOUT,
        env=env, start_new_session=True,
    )
    try:
        listing = None
        deadline = time.monotonic() + 90
        while listing is None and time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "lab.log").read_text()
            try:
                url = f"http://127.0.0.1:{port}/api/contents?token={token}"
                with urllib.request.urlopen(url, timeout=2) as response:
                    listing = json.load(response)
            except OSError:
                time.sleep(0.5)
        assert listing is not None, (tmp_path / "lab.log").read_text()
        names = {item["name"] for item in listing["content"]}
        assert "00_tour.ipynb" in names, f"server root holds no notebooks: {sorted(names)}"
        assert (tmp_path / "lab" / "00_tour.ipynb").is_file(), "the server root is not the copy"
        # The token is required: an anonymous request is refused.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents", timeout=5)
        assert refused.value.code == 403
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
