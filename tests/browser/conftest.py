"""Browser harness: JupyterLab on a free loopback port with a token, driven by Playwright in
Debian's headless Chromium.

The server serves a *copy* of notebooks/ (JupyterLab autosaves, and the committed notebooks must
stay without outputs) and exposes `window.jupyterapp` so tests can run JupyterLab commands
instead of hunting for menu items. Where no Chromium exists the tests skip and say how to install
it; under CI they fail instead, because there they must run.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from mlsys_viz.export import CHROMIUM_ARGS, INSTALL_HINT, find_chromium

REPO = Path(__file__).resolve().parents[2]
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, process: subprocess.Popen, log: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no answer from {url} in {seconds} s:\n{log.read_text()[-3000:]}")


@dataclass
class LabServer:
    url: str
    token: str
    root: Path

    def lab_url(self, path: str = "") -> str:
        # reset: start from an empty workspace, so notebooks of earlier tests are not restored
        # in hidden tabs (their kernels would start and their outputs join the page's).
        return f"{self.url}/lab/tree/{path}?reset&token={self.token}"


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI, but no Chromium was found: {INSTALL_HINT}")
        pytest.skip(f"no Chromium found: {INSTALL_HINT}")
    return path


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory) -> LabServer:
    """A JupyterLab server on a copy of notebooks/, isolated from the user's settings."""
    base = tmp_path_factory.mktemp("lab")
    root = base / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        # Notebooks that read SMOKE from the environment (02) run at their small size here.
        "SMOKE": os.environ.get("SMOKE", "1"),
    }
    log = base / "server.log"
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        # No network here: don't let the extension manager query PyPI.
        "--LabApp.extension_manager=readonly",
    ]
    if os.geteuid() == 0:  # CI and containers run as root; JupyterLab refuses without this.
        command.append("--allow-root")
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_http(f"{url}/api/status?token={token}", process, log)
        yield LabServer(url=url, token=token, root=root)
    finally:
        stop(process)


@pytest.fixture(scope="session")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS
        )
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    context.close()


# Steps a person takes in JupyterLab, as Playwright calls: open a notebook, run all cells, wait
# until the kernel is done. They use JupyterLab's own commands through `window.jupyterapp` so
# they do not depend on menu layout.

KERNEL_STATUS = """() => {
  const widget = window.jupyterapp.shell.currentWidget;
  const session = widget && widget.sessionContext && widget.sessionContext.session;
  return session && session.kernel ? session.kernel.status : 'none';
}"""

PENDING_PROMPTS = """() => Array.from(document.querySelectorAll('.jp-InputPrompt'))
  .filter(p => p.textContent.includes('*')).length"""


def open_notebook(page, server, name: str, timeout_s: float = 90) -> None:
    page.goto(server.lab_url(name))
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=timeout_s * 1000)
    # Only the panel on screen: notebooks of earlier tests may be restored in hidden tabs.
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell",
                           timeout=timeout_s * 1000)
    wait_for_kernel_idle(page, timeout_s)


def wait_for_kernel_idle(page, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if page.evaluate(KERNEL_STATUS) == "idle" and page.evaluate(PENDING_PROMPTS) == 0:
            return
        page.wait_for_timeout(250)
    status = page.evaluate(KERNEL_STATUS)
    raise TimeoutError(f"kernel not idle after {timeout_s} s (status {status})")


RAN_A_CELL = """() => Array.from(window.jupyterapp.shell.currentWidget.node
  .querySelectorAll('.jp-InputPrompt'))
  .some(p => /\\[\\d+\\]/.test(p.textContent))"""


ACTIVATE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  window.jupyterapp.shell.activateById(w.id);
  w.content.activate();
}"""


def run_all_cells(page, timeout_s: float = 180) -> None:
    # Under load a run-all issued while the kernel is still connecting can be dropped (the
    # notebook stays at "[ ]"): try again a few times before giving up.
    for _ in range(3):
        # The command acts on the notebook that last had focus, which may be an earlier test's
        # notebook restored from the workspace: focus the one on screen first.
        page.evaluate(ACTIVATE)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        # Give the kernel a moment to go busy before waiting for idle again.
        page.wait_for_timeout(1000)
        wait_for_kernel_idle(page, timeout_s)
        if page.evaluate(RAN_A_CELL):
            return
        page.wait_for_timeout(3000)


def cell_errors(page) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
        "nodes => nodes.map(n => n.textContent).filter(t => t.includes('Error'))",
    )


# Shut the kernels down and close every tab without dialogs (a dialog would wait forever).
CLOSE_ALL = """async () => {
  if (window.jupyterapp === undefined) return;
  const work = (async () => {
    for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
      if (w.sessionContext) await w.sessionContext.shutdown();
      if (w.context) w.context.model.dirty = false;
    }
    await window.jupyterapp.commands.execute('application:close-all');
  })();
  await Promise.race([work, new Promise(r => setTimeout(r, 15000))]);
}"""


class NotebookUI:
    """The steps above bound to one page and server, handed to tests as the `lab` fixture."""

    def __init__(self, page, server):
        self.page, self.server = page, server

    def open(self, name: str, timeout_s: float = 90) -> None:
        open_notebook(self.page, self.server, name, timeout_s)

    def run_all(self, timeout_s: float = 180) -> None:
        run_all_cells(self.page, timeout_s)

    def errors(self) -> list[str]:
        return cell_errors(self.page)

    def ran_a_cell(self) -> bool:
        """Whether some cell of the current notebook shows an execution count."""
        return self.page.evaluate(RAN_A_CELL)

    def close_all(self) -> None:
        """Shut the kernels down and close every tab: a notebook's kernel must not go on
        using the shared server's CPU during the next test."""
        self.page.evaluate(CLOSE_ALL)


@pytest.fixture
def lab(page, lab_server):
    ui = NotebookUI(page, lab_server)
    yield ui
    ui.close_all()
