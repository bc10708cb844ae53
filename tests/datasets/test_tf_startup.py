"""TensorFlow's start-up lines stay out of notebooks (mlsys_datasets.tf_startup).

The C++ libraries write to fd 2 during `import tensorflow`, before logging exists; the hook points
fd 2 elsewhere for that import only. Checked on a stand-in ``tensorflow`` package that writes to
fd 2 when imported (cheap, and it fails without the hook), and on the real TensorFlow in a
notebook kernel, which is where the lines showed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

from mlsys_workbench.notebooks import run_notebook

REPO = Path(__file__).resolve().parents[2]

FAKE_TF = """
import os
os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called\\n")
if os.environ.get("FAKE_TF_FAILS"):
    os.write(2, b"missing libcudart.so: the reason\\n")
    raise ImportError("fake tensorflow could not load")
"""

SCRIPT = """
import os, sys
if os.environ.get("HOOK") == "1":
    from mlsys_datasets.tf_startup import quiet_first_import
    quiet_first_import()
try:
    import tensorflow
except ImportError as error:
    print("import failed:", error)
os.write(2, b"after the import\\n")
import tensorflow  # a second import must not go through the hook again
print("hooks left:", sum(type(f).__name__ == "_QuietFirstImport" for f in sys.meta_path))
"""


def _run_with_fake_tf(tmp_path, **env):
    pkg = tmp_path / "tensorflow"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text(FAKE_TF)
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{REPO / 'datasets'}", **env}
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=full_env, timeout=60)


def test_fake_tensorflow_import_is_silent_with_the_hook(tmp_path):
    done = _run_with_fake_tf(tmp_path, HOOK="1")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "after the import\n"        # fd 2 is back after the import
    assert "hooks left: 0" in done.stdout


def test_fake_tensorflow_import_is_noisy_without_the_hook(tmp_path):
    # The control: the stand-in does write to fd 2, so the test above can fail.
    done = _run_with_fake_tf(tmp_path, HOOK="0")
    assert "absl::InitializeLog" in done.stderr


def test_a_failing_import_still_says_why(tmp_path):
    done = _run_with_fake_tf(tmp_path, HOOK="1", FAKE_TF_FAILS="1")
    assert "import failed: fake tensorflow could not load" in done.stdout
    assert "missing libcudart.so: the reason" in done.stderr


def test_logs_can_be_asked_for(tmp_path):
    done = _run_with_fake_tf(tmp_path, HOOK="1", TF_CPP_MIN_LOG_LEVEL="0")
    assert "absl::InitializeLog" in done.stderr


def test_a_notebook_importing_tensorflow_shows_no_stderr(tmp_path, monkeypatch):
    # As a notebook does it: our package first, then Keras and TensorFlow, then an op (the CUDA
    # probe on a machine without a GPU logs "failed call to cuInit" there).
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import mlsys_datasets\nimport keras\nimport tensorflow as tf"),
        nbformat.v4.new_code_cell(textwrap.dedent("""\
            x = keras.layers.Dense(2)(keras.ops.ones((1, 3)))
            print("devices:", len(tf.config.list_physical_devices()), float(tf.reduce_sum(x) * 0))
        """)),
    ]
    path = tmp_path / "tf_quiet.ipynb"
    nbformat.write(nb, path)
    ran = run_notebook(path, timeout=300)
    outputs = [out for cell in ran.cells for out in cell.get("outputs", [])]
    stderr = "".join(out.get("text", "") for out in outputs if out.get("name") == "stderr")
    assert stderr == "", f"TensorFlow wrote to the notebook's stderr:\n{stderr}"
    stdout = "".join(out.get("text", "") for out in outputs if out.get("name") == "stdout")
    assert "devices:" in stdout and "0.0" in stdout
