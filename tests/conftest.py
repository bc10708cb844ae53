"""Suite-wide settings: quiet TensorFlow, every compile verifying all its IR, and where the
repository is."""

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow turns its oneDNN kernels on by itself on CPUs with AVX-512 VNNI/BF16 or AMX, and
# off elsewhere: the same tests would then see two kinds of numerics by host. oneDNN's ReLU
# turns NaN into 0 (x86 max), and its Conv gradients' last bits change with the buffers a
# swap copies (a swapped ResNet's conv1 filter gradient); Eigen's kernels do neither. The
# suite runs Eigen's everywhere (docs/lmskit.md says how to compare under oneDNN).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# compilerkit verifies its own Kernel IR only with verify="all" (compilerkit/pipeline.py): the
# suite's compiles, and the processes it starts, do, so a compilerkit bug fails as a ModelError
# naming the passes instead of passing unnoticed or as a wrong answer.
os.environ.setdefault("CK_VERIFY", "all")

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip cleanly where no CUDA device exists; the longest groups of tests
    run first (see LONGEST_FIRST)."""
    import pytest

    # Stable: within a group, and for every other test, the collection order is kept.
    items.sort(key=lambda item: _rank(item.nodeid))
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from compilerkit.backends.cuda_driver import NoCudaDevice, context

    try:
        context()
    except NoCudaDevice as error:
        skip = pytest.mark.skip(reason=str(error))
        for item in gpu_items:
            item.add_marker(skip)


# --- running on several workers (`make test` runs `pytest -n 2`, pytest-xdist) ----------------
#
# Work is handed out a file at a time, so a module fixture (a `make figures` run, lit over the
# FileCheck folder) runs once; two groups span files because they share one expensive thing:
# the browser tests (one JupyterLab server and one Chromium per worker) and the ONNX node-test
# functions (each case compiled once per worker, see ckhelpers.node_results). The longest
# groups go first, so no worker is left with one of them at the end.
LONGEST_FIRST = ["tests/test_make_figures.py", "onnx-node-tests",
                 "tests/compilerkit/test_modern_models.py",
                 "tests/emulated_targets/test_models.py", "tests/browser",
                 "tests/compilerkit/test_filecheck.py", "tests/compilerkit/test_light_models.py"]


def work_group(nodeid: str) -> str:
    """The group of tests one worker runs together."""
    # Every node-test function (test_onnx_node_tests, test_onnx_node_tests_for_*_ops, the
    # control-flow and quantisation ones): on one worker each case compiles once in the suite.
    if "node_tests" in nodeid.rsplit("::", 1)[-1].split("[", 1)[0]:
        return "onnx-node-tests"
    path = nodeid.split("::", 1)[0]
    return "tests/browser" if path.startswith("tests/browser/") else path


def _rank(nodeid: str) -> int:
    group = work_group(nodeid)
    return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)


try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # pytest-xdist is a dev dependency; without it the suite runs serially
    LoadFileScheduling = None

if LoadFileScheduling is not None:
    class GroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_group(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "no":
            return None
        config.option.loadscopereorder = False  # keep LONGEST_FIRST's order
        return GroupScheduling(config, log)
